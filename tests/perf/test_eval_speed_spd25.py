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
from autotune.perf import ascend, costing, ep_balance, ffn_shape, lm_head, oplist, precision, rates, sharding, tiles
from autotune.perf.opcore import (
    Op,
    StepInput,
    _act_bytes,
    _collective,
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
from autotune.specs import DTYPE_BYTES, PhasePlan, Workload

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
    if ffn.kind == "moe":  # the shared experts' layout (sgshared29: sharding.shared_expert_layout)
        layout = sharding.shared_expert_layout(phase, c.engine, bool(c.dispatch_act_bytes))
    else:
        layout = sharding.dense_layout(ffn, phase, c.engine)
    shards = phase.tp if layout == "tp" else 1 if layout in ("dp", "rank") else ranks
    rows = tokens if layout == "all" else tokens / (phase.dp * phase.tp) if layout == "rank" else tokens / phase.dp
    act = _act_bytes(rows, ffn.params / shards / hidden, hidden, 2, c.act_in_bytes)
    nbytes = ffn.params * c.dense_bytes / shards + act
    tile_n = (2 * ffn.params / shards / hidden / 3 + hidden) / 2  # gate_up's and down's widths (sgshared29)
    speed = c.dense_speed * _tile_speed(c, c.dense_dtype, rows, tile_n)
    source = "dense_dp" if layout == "dp" else "tp"
    ops.append(_gemm(source, dense_op_dtype(c), rows, ffn.params / shards, hidden, 2 * ffn.params * tokens / ranks,
                     nbytes, 2, speed))  # fmt: skip
    _gemm_waves(ops, c, c.dense_dtype, rows, tile_n, 2.0, "dense ffn")
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
        if c.fused_shared:  # the form before has no fused shared experts (test_sglang_shared_fusion.py)
            continue
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
    """The FFN half's step-independent work (the dense or shared layout, the quantisation kernels, the EP spread, the
    routing miss rates) runs once per (Context, FFN spec), not once per step as before."""
    calls = {"layout": 0, "quants": 0, "spread": 0}

    def counted(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(ffn_shape, "dense_layout", counted("layout", sharding.dense_layout))
    monkeypatch.setattr(ffn_shape, "shared_expert_layout", counted("layout", sharding.shared_expert_layout))
    monkeypatch.setattr(precision, "standalone_quants", counted("quants", precision.standalone_quants))
    monkeypatch.setattr(ffn_shape, "ep_spread", counted("spread", ffn_shape.ep_spread))
    model = load_model("deepseek-v4.1-flash")
    (_, c), ffn = next(_contexts("deepseek-v4.1-flash", "rtx-pro-6000-x8", 5)), model.layers[-1].ffn
    assert ffn.kind == "moe" and ffn.params  # shared experts and routed experts
    for tokens in TOKENS:
        oplist.ffn_kernel_ops(c, ffn, tokens)
    assert calls["layout"] == 1 and calls["spread"] == 1 and calls["quants"] <= 2
    assert len(c.ffn_shapes) == 1


def _head_kernel_ops_before(c, rows: float) -> list:
    """lm_head.head_kernel_ops as written before spd25 (everything per call)."""
    model, phase = c.model, c.phase
    head_params = model.vocab_size * model.hidden_size
    ranks = phase.tp * phase.dp
    over_dp = sharding.head_over_dp(c.engine, phase)
    shards = ranks if over_dp else phase.tp
    m = rows / (1 if over_dp else phase.dp)
    act = precision.ACTIVATION_BYTES
    nbytes = head_params * DTYPE_BYTES["bf16"] / shards + _act_bytes(m, model.vocab_size / shards, model.hidden_size,
                                                                       1.0, act)  # fmt: skip
    speed = _tile_speed(c, "bf16", m, model.vocab_size / shards)
    ops = [_gemm("dp_lm_head" if phase.dp > 1 else "tp", "bf16", m, head_params / shards, model.hidden_size,
                 2 * head_params * rows / ranks, nbytes, 1.0, speed)]  # fmt: skip
    if not rows:
        return ops
    if over_dp:
        # an all-reduce since sgdp28 (SGLang's SUM_LEN hidden-state gather of the head; was an all-gather)
        ops.append(_collective("allreduce", c.stage, rows * model.hidden_size * act, "dp_lm_head"))
        ops.append(_collective("allgather", c.stage, rows * model.vocab_size * act, "dp_lm_head"))
        own = rows / phase.dp * model.vocab_size
        ops.append(Op("elementwise", "bf16", "any", rows / phase.dp, 0.0, 0.0, 0.0, 2 * own * act, 1.0,
                      "dp_lm_head (logits scatter)"))  # fmt: skip
        sampled = own * lm_head.SAMPLING_LOGIT_BYTES
    else:
        if phase.tp > 1 and m > 1:
            ops.append(Op("elementwise", "bf16", "any", m, 0.0, 0.0, 0.0, 2 * m * model.vocab_size * act, 1.0,
                          "tp (logits gather reorder)"))  # fmt: skip
        sampled = m * model.vocab_size * lm_head.SAMPLING_LOGIT_BYTES
    ops.append(Op("sampling", "bf16", "any", m, 0.0, 0.0, 0.0, sampled, 1.0, "engine"))
    return ops


# SGLang does not start V4.1 on the RTX box (capability/sglang_0_5_23.py): its vocab-parallel head over the DP
# ranks is reached on Hopper
HEAD_CASES = (*CASES[1:], ("deepseek-v4.1-flash", "h200-x8"))


@pytest.mark.parametrize("case", HEAD_CASES)
def test_head_kernel_ops_are_the_form_before_bit_for_bit(case):
    over_dp = checked = 0
    for _, c in _contexts(*case, 25):
        over_dp += sharding.head_over_dp(c.engine, c.phase)
        for rows in (0.0, 1.0, 2.5, 7.0, 96.0, 513.0):
            assert _same(lm_head.head_kernel_ops(c, rows), _head_kernel_ops_before(c, rows)), (c.phase, rows)
            checked += 1
        assert c.memo_keys["head_shape"] is lm_head.head_shape(c)  # built once per Context
    assert checked > 100 and over_dp  # both heads: over the TP group and vocab-parallel over the DP ranks


def test_wave_dtypes_are_the_rates_tables_wave_entries():
    """Context.wave_dtypes: the check _gemm_waves made per GEMM before (fp8 / int8 with a `gemm/<dtype>/wave`
    rate), resolved once per Context."""
    for case in CASES:
        for _, c in _contexts(*case, 10):
            for dtype in ("bf16", "fp8", "int8", "fp4"):
                before = dtype in ("fp8", "int8") and ("gemm", dtype, "wave") in c.table.entries
                assert (dtype in c.wave_dtypes) == before


def _op_terms_before(c, ops) -> tuple:
    """costing._op_terms as written before spd25 (vllm-ascend's speed and share applied inside the loop)."""
    out = []
    for op in ops:
        kind, _, _, _, _, _, flops, nbytes, count, _, speed, _ = op
        flops_per_s, bytes_per_s, min_s, key = c.rate_terms.get(op[:3]) or costing._rate_terms(c, op[:3])
        if kind == "collective":
            name, seconds = (
                costing._hccl_s(c, op, c.platform) if c.platform is not None else costing.collective_s(c, op)
            )
            out.append((key, name, seconds, 0.0))
            continue
        if c.platform is not None:
            speed *= ascend.op_speed(c.platform, kind, op.dtype, c.phase.tp)
            share = ascend.op_share(c.platform, kind, c.phase.tp)
            flops, nbytes = flops * share, nbytes * share
        t_compute = flops / flops_per_s / speed if flops else 0.0
        t_memory = nbytes / bytes_per_s / speed if kind == "attention" else nbytes / bytes_per_s
        out.append((key, None, max(t_memory, t_compute) + min_s * count, t_compute))
    return tuple(out)


@pytest.mark.parametrize("platform", [{}, {"flashcomm1": "on"}, {"hccl_op_expansion": "AIV", "weight_nz": "off"}])
def test_op_terms_on_vllm_ascend_are_the_form_before(platform):
    model, hw = load_model("qwen3-235b-a22b-w8a8"), load_preset("atlas-800i-a2")
    phase = PhasePlan(gpus=tuple(range(8)), tp=4, dp=2, dp_attention=True, platform=platform)
    c = context(model, phase, "vllm-ascend", hw, phase.gpus)
    assert c.platform is not None
    x = StepInput(24.0, 2048.0, 512.0, 1024.0)
    layer = model.layers[0]
    ops = oplist.layer_ops(c, layer, x) + lm_head.head_ops(c, 25.0)
    assert {op.kind for op in ops} >= {"gemm", "grouped_moe", "attention", "collective"}
    assert repr(costing._op_terms(c, ops)) == repr(_op_terms_before(c, ops))


def test_add_terms_at_times_one_adds_what_the_scaled_sum_adds():
    """_add_terms without the x 1.0 scaling (x * 1.0 is x) adds the floats the scaled loop adds."""
    c = next(_contexts("deepseek-v4.1-flash", "rtx-pro-6000-x8", 5))[1]
    model = c.model
    x = StepInput(7.0, 3000.0, 900.0, 1500.0)
    ops = oplist.layer_ops(c, model.layers[0], x) + oplist.layer_ops(c, model.layers[-1], x)
    terms = costing._op_terms(c, ops)
    fast = costing._add_terms(costing.Cost(), terms, 1.0)
    scaled = costing._add_terms(costing.Cost(), terms, 2.0)
    for cost, times in ((fast, 1.0), (scaled, 2.0)):
        compute_s = memory_s = 0.0
        comm: dict = {}
        for _, name, seconds, t_compute in terms:  # the loop before, scaling every term
            seconds *= times
            if name is not None:
                if seconds > 0:
                    comm[name] = comm.get(name, 0.0) + seconds
            else:
                t_compute *= times
                compute_s += t_compute
                memory_s += seconds - t_compute
        assert (cost.compute_s, cost.memory_s, cost.comm_s) == (compute_s, memory_s, comm)
    assert fast.comm_s  # the layers' collectives took the named branch


def _m_bucket_before(m: float) -> str:
    for bound, name in rates.M_BUCKETS:
        if m <= bound:
            return name
    return rates.M_BUCKETS[-1][1]


def test_m_bucket_and_extra_waves_are_the_forms_before():
    """rates.m_bucket's bisection is the scan over M_BUCKETS it replaced (NaN in the last bucket, as the scan left
    it), and tiles.gemm_extra_waves without its max() call the same floats."""
    edges = [b for b, _ in rates.M_BUCKETS] + [0, 0.0, -1.0, 1e-9, float("-inf"), float("nan")]
    values = edges + [b * f for b in (16, 128, 1024) for f in (0.999999, 1.000001)] + [i * 0.37 for i in range(9000)]
    for m in values:
        assert rates.m_bucket(m) == _m_bucket_before(m), m
    for m in values[:-1] + [3.0, 700.0, 33000.0]:
        for n in (1.0, 128.0, 129.0, 7168.0):
            for sms in (0, 132, 188):
                got = tiles.gemm_extra_waves(m, n, sms)
                tile_m, tile_n = tiles.GEMM_TILE
                before = 0.0
                if m > 0 and n > 0 and sms > 0:
                    before = max(0.0, m / tile_m * math.ceil(n / tile_n) / sms - 1.0)
                assert repr(got) == repr(before), (m, n, sms)
