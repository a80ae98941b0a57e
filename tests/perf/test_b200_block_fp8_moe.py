"""Block-FP8 (128 x 128 weight scales) experts on the SM100 family: vLLM 0.34 runs FlashInfer's TRT-LLM-gen
trtllm_fp8_block_scale_moe in its DeepSeekFp8 mode there (FLASHINFER_TRTLLM first in the FP8 oracle's priority list,
vllm/model_executor/layers/fused_moe/oracle/fp8.py:94-110; experts/trtllm_fp8_moe.py:396-406), not FlashInfer CUTLASS
(block FP8 on cc 9.0 only). Its compute-bound rate is its own (efficiency.MOE_VARIANT_SPEED["trtllm_fp8_block"]:
calibration.yaml kernel-flashinfer-trtllm-fp8-block-moe-b200-fib, 518-591 TFLOPS on a B200); weight-bound steps
are unchanged."""

from __future__ import annotations

from autotune.capability.profiles import profile
from autotune.capability.profiles.vllm_0_34_0 import BLOCK_FP8_SM100_MOE
from autotune.catalog import load_model
from autotune.perf import opcore
from autotune.perf.oplist import ffn_ops
from autotune.perf.ops import cost_ops
from autotune.specs import FfnSpec, Kernels, PhasePlan
from tests.perf.boxes import b200_box

R1 = load_model("deepseek-v3")  # DeepSeek-V3's block-FP8 checkpoint
LOCAL = FfnSpec("moe", 0, 32, 8, 3 * 7168 * 2048)  # an EP8 rank's 32 experts, top 8 (the calibration row's shape)


def _us(moe: str, rows: float) -> float:
    """The routed-expert ops (no router GEMM, norms or collectives) of `rows` routed rows on one B200, vLLM."""
    phase = PhasePlan(gpus=(0,), kernels=Kernels(moe=moe))
    c = opcore.context(R1, phase, "vllm", b200_box(), (0,))
    ops = [op for op in ffn_ops(c, LOCAL, rows / 8) if op.kind not in ("gemm", "norm", "collective")]
    return cost_ops(c, ops).time_s * 1e6


def test_the_checkpoint_is_block_fp8():
    assert R1.expert_format == "fp8_block"


def test_vllm_runs_the_trtllm_block_kernel_on_sm100_at_any_ep():
    pick = profile("vllm").auto_moe_kernel
    for ep in (1, 8):
        assert pick("fp8", "sm_100", False, ep, "fp8_block") == BLOCK_FP8_SM100_MOE == "trtllm_fp8_block"
    # under DeepEP the TRT-LLM experts refuse the parallel config and DeepGEMM is next (BLOCK_FP8_SM100_MOE's comment)
    assert pick("fp8", "sm_100", True, 8, "fp8_block") == "deep_gemm"
    # the other archs and formats keep their picks
    assert pick("fp8", "sm_90", False, 1, "fp8_block") == "triton"
    assert pick("fp8", "sm_120", False, 1, "fp8_block") == "deep_gemm"
    assert pick("fp8", "sm_100", False, 1, "fp8_tensor") == "flashinfer_cutlass"


def test_sglang_keeps_its_triton_pick():
    """SGLang 0.5.23's auto runner for FP8 without an a2a backend is Triton on every arch (quantization/fp8.py)."""
    assert profile("sglang").auto_moe_kernel("fp8", "sm_100", False, 1, "fp8_block") == "triton"


def test_compute_bound_call_meets_the_public_b200_figure():
    """16,158 local rows (the 14,107-token workload): 2,409.7 us measured; FlashInfer CUTLASS's value put it at
    ~1.08 ms (0.45x)."""
    assert abs(_us("auto", 16158) / 2409.706 - 1) < 0.15


def test_the_kernel_is_slower_only_where_compute_binds():
    small, large = 8 * 8, 16158  # 8 tokens: the experts' weights stream; 16k rows: tensor cores bind
    assert _us("auto", small) == _us("flashinfer_cutlass", small)
    assert _us("auto", large) > 2 * _us("flashinfer_cutlass", large)


def test_attention_dp_gathers_quantised_rows_for_it():
    """The TRT-LLM experts do not defer input quantisation (no expects_unquantized_inputs override), so vLLM's
    all-gather dispatch quantises the rows first (capability/profiles/vllm_0_34_0.py quantised_dp_dispatch)."""
    rule = profile("vllm").quantised_dp_dispatch
    assert rule(BLOCK_FP8_SM100_MOE, "fp8_block", 8, 8)
    assert not rule("flashinfer_cutlass", "fp8_block", 8, 8)
