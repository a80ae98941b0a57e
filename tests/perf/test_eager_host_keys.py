"""The FFN half's launch key (eager_host.ffn_launch_prefix) holds exactly what the FFN op list's counts read of the
Context: two Contexts that differ only in one of its fields count different launches, and each gets its own count
from the memo whichever asks first; fields outside it (kernel speeds, imbalance, byte sizes) leave the count alone."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import eager_host
from autotune.perf.opcore import Context, StepInput, context
from autotune.perf.oplist import ffn_ops, step_tokens
from autotune.specs import Comm, PhasePlan

# prompt rows past every fused all-reduce + RMSNorm limit (Context.fused_norm_max_tokens): the collectives and
# norms count apart
STEP = StepInput(prefill_tokens=32768.0)


def _fresh(c: Context, **changes) -> Context:
    """c with `changes`, its per-Context memos empty (dataclasses.replace would share them)."""
    memos = {f.name: {} for f in dataclasses.fields(c) if not f.compare}
    return dataclasses.replace(c, **memos, **changes)


def _ctx(name: str, engine: str, **layout) -> Context:
    m, hw = load_model(name), load_preset("h200-x8")
    ranks = layout.get("tp", 1) * layout.get("dp", 1)
    plan = PhasePlan(gpus=tuple(range(ranks)), **layout)
    return context(m, plan, engine, hw, plan.gpus)


def _moe_ffn(c: Context):
    return next(layer.ffn for layer in c.model.layers if layer.ffn.kind == "moe")


def _dense_ffn(c: Context):
    return next(layer.ffn for layer in c.model.layers if layer.ffn.kind != "moe")


def _remembered(c: Context, ffn, x: StepInput = STEP) -> float:
    return eager_host._half_launches(c, "ffn", ffn, x, eager_host.launch_key(c, x))


def _own(c: Context, ffn, x: StepInput = STEP) -> float:
    return eager_host.op_launches(ffn_ops(c, ffn, step_tokens(x)))


def _pair(a: Context, b: Context, pick) -> None:
    """Each Context's remembered count is its own op list's, whichever asks first, and the two differ."""
    assert _own(a, pick(a)) != _own(b, pick(b))
    for first, second in ((a, b), (b, a)):
        eager_host._HALF_LAUNCHES.clear()
        assert _remembered(first, pick(first)) == _own(first, pick(first))
        assert _remembered(second, pick(second)) == _own(second, pick(second))


def test_tp_keys_the_ffn_launches():  # a one-GPU all-reduce launches nothing
    _pair(_ctx("qwen3-235b-a22b", "vllm", tp=1), _ctx("qwen3-235b-a22b", "vllm", tp=2), _moe_ffn)


def test_dp_keys_the_ffn_launches():  # attention DP's gather and return pair
    dp = _ctx("qwen3-235b-a22b", "vllm", tp=2, dp=2, dp_attention=True)
    _pair(_ctx("qwen3-235b-a22b", "vllm", tp=2), dp, _moe_ffn)


def test_ep_keys_the_ffn_launches():  # DeepEP's all-to-alls only with expert parallelism
    deepep = Comm(all2all="deepep")
    a = _ctx("deepseek-v3", "sglang", tp=8, comm=deepep)
    _pair(a, _ctx("deepseek-v3", "sglang", tp=8, ep=8, comm=deepep), _moe_ffn)


def test_all2all_keys_the_ffn_launches():
    a = _ctx("deepseek-v3", "sglang", tp=8, ep=8)
    _pair(a, _ctx("deepseek-v3", "sglang", tp=8, ep=8, comm=Comm(all2all="deepep")), _moe_ffn)


def test_dense_dp_keys_the_ffn_launches():  # SGLang --moe-dense-tp-size 1: no collective around the dense MLP
    a = _ctx("deepseek-v3", "sglang", tp=4, dp=2, dp_attention=True)
    _pair(a, _ctx("deepseek-v3", "sglang", tp=4, dp=2, dp_attention=True, dense_dp=True), _dense_ffn)


def test_the_engine_s_dense_layout_keys_the_ffn_launches():  # profile tp_spans_dp: SGLang's 'all', vLLM's 'tp'
    a = _ctx("deepseek-v3", "sglang", tp=4, dp=2, dp_attention=True)
    _pair(a, _fresh(a, engine="vllm"), _dense_ffn)


def test_dense_quantisation_keys_the_ffn_launches():  # its quant kernels in place of the activation kernel
    a = _ctx("deepseek-v3", "sglang", tp=8)
    assert a.dense_quant_bytes
    _pair(a, _fresh(a, dense_quant_bytes=0.0), _dense_ffn)


def test_expert_quantisation_keys_the_ffn_launches():
    a = _ctx("deepseek-v3", "sglang", tp=8, ep=8)
    assert a.expert_quant_bytes
    _pair(a, _fresh(a, expert_quant_bytes=0.0), _moe_ffn)


def _nvfp4(c: Context, **changes) -> Context:
    """c on its model with NVFP4 checkpoints (precision.standalone_quants: an FP4 GEMM on one fuses a quant)."""
    m = dataclasses.replace(c.model, dense_format="nvfp4", expert_format="nvfp4")
    return _fresh(c, model=m, dense_quant_bytes=1.0, expert_quant_bytes=1.0, **changes)


def test_dense_dtype_keys_the_ffn_launches():
    a = _nvfp4(_ctx("deepseek-v3", "sglang", tp=8), dense_dtype="fp8")
    _pair(a, _fresh(a, dense_dtype="fp4"), _dense_ffn)


def test_expert_dtype_keys_the_ffn_launches():
    a = _nvfp4(_ctx("deepseek-v3", "sglang", tp=8, ep=8), expert_dtype="fp8")
    _pair(a, _fresh(a, expert_dtype="fp4"), _moe_ffn)


def test_fused_shared_experts_key_the_ffn_launches():  # no shared GEMM pair of their own
    a = _ctx("deepseek-v3", "sglang", tp=8)
    assert a.fused_shared  # SGLang fuses them at EP 1 (sharding.fused_shared_experts)
    _pair(a, _fresh(a, fused_shared=0), _moe_ffn)


@pytest.mark.parametrize(
    "changes",
    ({"moe_speed": 0.5}, {"dense_speed": 0.5}, {"imbalance": 1.7}, {"expert_bytes": 0.5}, {"moe_stream_gbs": 900.0}),
)
def test_speeds_and_sizes_share_the_ffn_launches(changes):
    """What the key leaves out moves no count: the variant reuses the remembered count, equal to its own."""
    a = _ctx("deepseek-v3", "sglang", tp=8, ep=8)
    b = _fresh(a, **changes)
    assert eager_host.ffn_launch_prefix(a) == eager_host.ffn_launch_prefix(b)
    assert _own(a, _moe_ffn(a)) == _own(b, _moe_ffn(b))
