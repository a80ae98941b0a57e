"""The routed experts' tile waves (perf/oplist.py _moe_waves): the fused MoE is a tiled GEMM, and the experts'
tensor parallelism shards the intermediate, so at DeepSeek-R1 TP8 each expert's down projection reduces over 256
columns, too short a K loop to hide the fixed time of each wave of tiles. The first two tests fail on the model
before; the third guards the block-FP8 scope."""

from __future__ import annotations

import dataclasses

from autotune.catalog import load_model, load_preset
from autotune.perf import tiles
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_ops
from autotune.perf.ops import cost_ops
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
R1 = load_model("deepseek-v3")  # FP8 block-scaled experts, 256 x 2048 intermediate, top 8
TOKENS = 8192.0


def _routed_s(tp: int, engine: str = "vllm", model=R1, tokens: float = TOKENS) -> float:
    """One rank's routed-expert ops (no collectives, norms or shared experts) of one MoE layer, seconds."""
    gpus = tuple(range(tp))
    c = context(model, PhasePlan(gpus=gpus, tp=tp), engine, H200, gpus)
    moe = dataclasses.replace(model.layers[-1].ffn, params=0)  # the routed experts alone
    ops = [op for op in ffn_ops(c, moe, tokens) if op.kind not in ("collective", "norm")]
    return cost_ops(c, ops).time_s


def _waves(engine: str) -> float:
    gpus = tuple(range(8))
    c = context(R1, PhasePlan(gpus=gpus, tp=8), engine, H200, gpus)
    moe = dataclasses.replace(R1.layers[-1].ffn, params=0)
    return sum(op.count for op in ffn_ops(c, moe, TOKENS) if op.bucket == "wave")


def test_tp8_experts_cost_more_per_flop_than_tp1():
    """vLLM's pointer-gathered Triton MoE: same routed FLOPs over the node either way; at TP8 the down
    projection's K is 256 (2 K steps a tile), so a rank's share takes longer than 1/8 of the TP1 time (old: 1/8
    up to the fixed per-kernel times)."""
    tp1, tp8 = _routed_s(1), _routed_s(8)
    assert tp8 > 1.15 * tp1 / 8


def test_wave_time_counts_the_pointer_gathered_gemms():
    """vLLM: gate / up (rows x 512 at TP8) and down (rows x 7168) each pay GEMM_WAVE_FIXED_US per wave beyond the
    first, at 8192 tokens x top 8 = 65,536 routed rows on 132 SMs; SGLang's down projection comes by TMA (engine
    profile triton_moe_tma_down): gate / up only."""
    rows, sms = TOKENS * R1.layers[-1].ffn.experts_per_token, tiles.sm_count("NVIDIA H200", "sm_90")
    gate_up, down = tiles.gemm_extra_waves(rows, 512, sms), tiles.gemm_extra_waves(rows, R1.hidden_size, sms)
    assert _waves("vllm") == gate_up + down and down > 200
    assert _waves("sglang") == gate_up > 10


def test_per_tensor_fp8_experts_take_no_wave_term():
    """The per-wave figure is DeepGEMM's block-scaled FP8; a per-tensor FP8 MoE accumulates inside the MMA."""
    tensor = dataclasses.replace(R1, expert_format="fp8_tensor")
    gpus = tuple(range(8))
    c = context(tensor, PhasePlan(gpus=gpus, tp=8), "vllm", H200, gpus)
    moe = dataclasses.replace(tensor.layers[-1].ffn, params=0)
    assert not [op for op in ffn_ops(c, moe, TOKENS) if op.bucket == "wave"]
