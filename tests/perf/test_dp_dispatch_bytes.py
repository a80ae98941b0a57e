"""Attention DP's all-gather dispatch of an EP MoE layer: vLLM gathers the rows quantised for the expert GEMMs, with
their routing slots, unless the experts kernel quantises its own input; SGLang gathers bf16 hidden states
(capability/profiles/vllm_0_34_0.py quantised_dp_dispatch, perf/sharding.dispatch_act_bytes)."""

import pytest

from autotune.capability.profiles.sglang_0_5_23 import quantised_dp_dispatch as sglang_rule
from autotune.capability.profiles.vllm_0_34_0 import quantised_dp_dispatch
from autotune.catalog import load_model, load_preset
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_comm_ops
from autotune.perf.sharding import TOPK_SLOT_BYTES
from autotune.specs import Kernels, PhasePlan

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")  # block-FP8 experts
TOKENS = 4096.0


def _gathered_bytes(engine: str, moe: str) -> float:
    phase = PhasePlan(gpus=tuple(range(8)), tp=1, dp=8, ep=8, dp_attention=True, kernels=Kernels(moe=moe))
    c = context(DSV3, phase, engine, H200, phase.gpus)
    ffn = DSV3.layers[-1].ffn
    (gather,) = [op for op in ffn_comm_ops(c, ffn, TOKENS) if op.bucket == "allgather" and op.source == "dp"]
    return gather.nbytes


def test_vllm_gathers_fp8_rows_with_their_routing_slots_for_the_triton_experts():
    ffn = DSV3.layers[-1].ffn
    row = DSV3.hidden_size * 1.0 + ffn.experts_per_token * TOPK_SLOT_BYTES
    assert _gathered_bytes("vllm", "triton") == pytest.approx(TOKENS * row)
    # about half the bf16 row the old model gathered
    assert _gathered_bytes("vllm", "triton") < 0.6 * TOKENS * DSV3.hidden_size * 2


def test_bf16_rows_where_the_experts_quantise_their_own_input_and_on_sglang():
    bf16 = TOKENS * DSV3.hidden_size * 2
    assert _gathered_bytes("vllm", "flashinfer_cutlass") == pytest.approx(bf16)  # block FP8: deferred
    assert _gathered_bytes("sglang", "triton") == pytest.approx(bf16)


def test_the_rule_reads_the_experts_kernel_and_format():
    assert quantised_dp_dispatch("flashinfer_cutlass", "nvfp4", 8, 8)
    assert quantised_dp_dispatch("flashinfer_cutlass", "fp8_tensor", 8, 8)
    assert not quantised_dp_dispatch("flashinfer_cutlass", "fp8_block", 8, 8)
    assert quantised_dp_dispatch("cutlass", "fp8_tensor", 8, 8)
    assert not quantised_dp_dispatch("cutlass", "nvfp4", 8, 8)
    assert not quantised_dp_dispatch("b12x", "nvfp4", 8, 8)
    assert quantised_dp_dispatch("deep_gemm", "fp8_block", 8, 8)


def test_a_weight_only_checkpoint_gathers_bf16_rows():
    awq = load_model("qwen3.5-397b-a17b-awq")  # INT4 weights, bf16 activations (W4A16, Marlin)
    phase = PhasePlan(gpus=tuple(range(8)), tp=1, dp=8, ep=8, dp_attention=True)
    assert context(awq, phase, "vllm", H200, phase.gpus).dispatch_act_bytes == 0.0


def test_sglang_quantises_before_the_gather_only_for_nvfp4_on_flashinfer_cutlass_with_ep_over_the_dp_ranks():
    assert sglang_rule("flashinfer_cutlass", "nvfp4", 8, 8)
    assert not sglang_rule("flashinfer_cutlass", "nvfp4", 4, 8)  # moe_ep_size != attn_dp_size
    assert not sglang_rule("triton", "fp8_block", 8, 8)
    assert not sglang_rule("flashinfer_cutlass", "fp8_tensor", 8, 8)
