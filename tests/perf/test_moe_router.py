"""The MoE router (issue 16, e2e16): every MoE layer runs a replicated, unquantised gate GEMM and a top-k kernel
(vLLM GateLinear, SGLang MoEGate); the op list had neither, so small-batch decode of wide-expert models came out
fast. Fails on the model before it."""

from __future__ import annotations

from autotune.catalog import load_model, load_preset
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_ops
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")  # FP8 block checkpoint, 256 routed experts, hidden 7168


def _moe_ffn(model):
    return next(layer.ffn for layer in model.layers if layer.ffn.kind == "moe")


def _router(tp: int, dp: int = 1, tokens: float = 8.0):
    phase = PhasePlan(gpus=tuple(range(tp * dp)), tp=tp, dp=dp, ep=tp * dp if dp > 1 else 1, dp_attention=dp > 1)
    c = context(DSV3, phase, "vllm", H200, phase.gpus)
    ops = ffn_ops(c, _moe_ffn(DSV3), tokens)
    gates = [op for op in ops if op.source == "moe router"]
    topk = [op for op in ops if op.source == "moe router top-k"]
    return gates, topk


def test_every_moe_layer_runs_a_replicated_bf16_router_and_a_topk_kernel():
    gates, topk = _router(tp=8)
    assert len(gates) == 1 and len(topk) == 1
    (gate,) = gates
    hidden, experts = DSV3.hidden_size, _moe_ffn(DSV3).num_experts
    assert (gate.kind, gate.dtype, gate.n, gate.k) == ("gemm", "bf16", experts, hidden)  # not the FP8 of the experts
    assert gate.nbytes >= hidden * experts * 2  # the whole gate on every rank: TP does not split it
    assert _router(tp=1)[0][0].nbytes == gate.nbytes


def test_the_router_runs_on_each_data_parallel_ranks_own_rows():
    (tp_gate,), _ = _router(tp=8, tokens=64.0)
    (dp_gate,), _ = _router(tp=1, dp=8, tokens=64.0)
    assert tp_gate.m == 64.0 and dp_gate.m == 8.0
