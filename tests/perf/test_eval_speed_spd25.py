"""The bit-identical speed-ups of the evaluation round spd25 (tests/bench/bench_predict.py): the FFN half's
step-independent parts built once per Context (perf/ffn_shape.py). The ops the step builds are checked against the
form before written out (the same floats, field for field), and the sharing against a count of the step-independent
work (which the form before did per step)."""

from __future__ import annotations

import math

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import ep_balance, ffn_shape, oplist, precision, rates, sharding
from autotune.perf.opcore import (
    Op,
    _act_bytes,
    _gemm,
    _gemm_waves,
    _quant,
    _tile_speed,
    activation_op,
    context,
    dense_op_dtype,
)
from autotune.perf.routing import LOGIT_BYTES, distinct_experts
from autotune.search.random_plans import random_plans
from autotune.specs import Workload

CASES = (
    ("deepseek-v4.1-flash", "rtx-pro-6000-x8"),
    ("deepseek-v3", "rtx-pro-6000-x8"),
    ("qwen3-235b-a22b", "h200-x8"),
    ("glm-5.3-flash", "rtx-pro-6000-x8"),
)
TOKENS = (1.0, 3.0, 0.75, 17.0, 64.0, 200.5, 1024.0, 4096.0, 12288.0)


def _contexts(model_name: str, preset: str, count: int):
    model, hw = load_model(model_name), load_preset(preset)
    for plan in random_plans(model, hw, Workload(), count, seed=25):
        if profile(plan.engine).ascend_platform:
            continue
        for phase in plan.phases.values():
            yield model, context(model, phase, plan.engine, hw, phase.replica_gpus(0)[: phase.stage_ranks])


def _ep_imbalance_before(c, top_k: int, tokens: float) -> float:
    ep = c.phase.ep
    mean_rows = tokens * top_k / ep
    if ep <= 1 or mean_rows <= 0:
        return c.imbalance
    z = ep_balance.expected_max_normal(ep)
    skew = (c.imbalance - 1.0) / z
    return min(float(ep), 1.0 + z * math.sqrt(skew * skew + (1.0 - 1.0 / ep) / mean_rows))


def _dense_before(ops: list, c, ffn, tokens: float) -> None:
    phase, hidden = c.phase, c.model.hidden_size
    ranks = phase.tp * phase.dp
    layout = sharding.dense_layout(ffn, phase, c.engine)
    shards = phase.tp if layout == "tp" else 1 if layout == "dp" else ranks
    rows = tokens if layout == "all" else tokens / phase.dp
    act = _act_bytes(rows, ffn.params / shards / hidden, hidden, 2, c.act_in_bytes)
    nbytes = ffn.params * c.dense_bytes / shards + act
    speed = c.dense_speed * _tile_speed(c, c.dense_dtype, rows, ffn.params / shards / hidden / 2)
    source = "dense_dp" if layout == "dp" else "tp"
    ops.append(_gemm(source, dense_op_dtype(c), rows, ffn.params / shards, hidden, 2 * ffn.params * tokens / ranks,
                     nbytes, 2, speed))  # fmt: skip
    _gemm_waves(ops, c, c.dense_dtype, rows, ffn.params / shards / hidden / 2, 2.0, "dense ffn")
    if c.dense_quant_bytes:
        quants = precision.standalone_quants(c.dense_dtype, c.model.dense_format, 2)
        ops.append(_quant(rows, hidden, quants, "kernels.gemm_dtype", c.dense_quant_bytes))
    else:
        ops.append(activation_op(rows, ffn.params / shards / hidden / 3))


def _ffn_kernel_ops_before(c, ffn, tokens: float) -> list:
    """oplist.ffn_kernel_ops as written before spd25 (_ffn_ops, _moe_waves, routing.router_ops), per step."""
    ops: list = []
    if ffn.params:
        _dense_before(ops, c, ffn, tokens)
    if ffn.kind != "moe":
        return ops
    phase, hidden = c.phase, c.model.hidden_size
    ranks = phase.tp * phase.dp
    imbalance = _ep_imbalance_before(c, ffn.experts_per_token, tokens)
    routed = tokens * ffn.experts_per_token / ranks * imbalance
    per_expert = tokens * ffn.experts_per_token / ffn.num_experts * imbalance
    hit = distinct_experts(ffn.num_experts, ffn.experts_per_token, tokens)
    ops.append(Op("grouped_moe", c.expert_dtype, rates.m_bucket(per_expert), per_expert, ffn.expert_params / hidden,
                  hidden, 2 * ffn.expert_params * routed, hit * ffn.expert_params * c.expert_bytes / ranks * imbalance,
                  1.0, "kernels.moe / ep / eplb", c.moe_speed))  # fmt: skip
    if c.moe_tile_waves:
        moe_tp = phase.tp * phase.dp / max(phase.ep, 1)
        inter = ffn.expert_params / hidden / 3 / moe_tp
        for name, n in (("gate_up", 2 * inter), ("down", hidden)):
            if name in c.moe_tile_waves:
                _gemm_waves(ops, c, c.expert_dtype, routed * ranks / max(phase.ep, 1), n, 1.0, f"moe {name}")
    if c.expert_quant_bytes:
        quants = precision.standalone_quants(c.expert_dtype, c.model.expert_format, 2)
        ops.append(_quant(routed, hidden, quants, "kernels.moe", c.expert_quant_bytes))
    permute = 2 * 2 * routed * hidden * oplist.PERMUTE_BYTES
    ops.append(Op("elementwise", "bf16", "any", routed, 0.0, 0.0, 0.0, permute, 2.0, "moe permute"))
    rows, weights, act = tokens / phase.dp, hidden * ffn.num_experts, precision.ACTIVATION_BYTES
    ops.append(_gemm("moe router", "bf16", rows, weights, hidden, 2 * weights * rows,
                     weights * act + _act_bytes(rows, ffn.num_experts, hidden, 1, act)))  # fmt: skip
    topk = rows * (ffn.num_experts * LOGIT_BYTES + ffn.experts_per_token * 8)
    ops.append(Op("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, topk, 1.0, "moe router top-k"))
    return ops


def _same(a: list, b: list) -> bool:
    """Op lists equal field for field, floats bit for bit (repr: -0.0 and 0.0 differ)."""
    return len(a) == len(b) and all(repr(tuple(x)) == repr(tuple(y)) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("case", CASES)
def test_ffn_kernel_ops_are_the_form_before_bit_for_bit(case):
    checked = 0
    for model, c in _contexts(*case, 25):
        for ffn in {id(layer.ffn): layer.ffn for layer in model.layers}.values():
            for tokens in TOKENS:
                assert _same(oplist.ffn_kernel_ops(c, ffn, tokens), _ffn_kernel_ops_before(c, ffn, tokens)), (
                    c.phase,
                    tokens,
                )
                checked += 1
    assert checked > 100


def test_ep_imbalance_is_the_form_before():
    for _, c in _contexts("deepseek-v4.1-flash", "rtx-pro-6000-x8", 40):
        for tokens in TOKENS:
            assert oplist.ep_imbalance(c, 6, tokens) == _ep_imbalance_before(c, 6, tokens)


def test_ffn_shape_is_built_once_per_context_and_ffn(monkeypatch):
    """The FFN half's step-independent work (the dense layout, the quantisation kernels, the EP spread, the routing
    miss rates) runs once per (Context, FFN spec), not once per step as before."""
    calls = {"layout": 0, "quants": 0, "spread": 0}

    def counted(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(ffn_shape, "dense_layout", counted("layout", sharding.dense_layout))
    monkeypatch.setattr(precision, "standalone_quants", counted("quants", precision.standalone_quants))
    monkeypatch.setattr(ffn_shape, "ep_spread", counted("spread", ffn_shape.ep_spread))
    model = load_model("deepseek-v4.1-flash")
    (_, c), ffn = next(_contexts("deepseek-v4.1-flash", "rtx-pro-6000-x8", 5)), model.layers[-1].ffn
    assert ffn.kind == "moe" and ffn.params  # shared experts and routed experts
    for tokens in TOKENS:
        oplist.ffn_kernel_ops(c, ffn, tokens)
    assert calls["layout"] == 1 and calls["spread"] == 1 and calls["quants"] <= 2
    assert len(c.ffn_shapes) == 1
