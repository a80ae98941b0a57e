"""Ampere (sm_80: A100 / A800) rates and kernel rules (sm80-25)."""

import pytest

from autotune.capability import value_admitted
from autotune.catalog.models import load_model
from autotune.perf import efficiency, opcore, rates
from autotune.specs import PhasePlan
from tests.perf.boxes import sm80_box

# calibration.yaml kernel-torch-mm-bf16-sm80-crowd: torch.mm bf16, best square size, TFLOPS
TORCH_MM_BF16 = {"a100-sxm-80gb": 264.53, "a800-sxm-80gb": 266.48}


@pytest.mark.parametrize(("device", "measured"), TORCH_MM_BF16.items())
def test_large_gemm_rate_is_the_public_torch_mm_figure(device, measured):
    # before: the 0.75 default prior, 234 TFLOPS, 12% under both rows
    rate = rates.rates_table(sm80_box(device)).get("gemm", "bf16", "m>1024")
    assert rate.tflops == pytest.approx(measured, rel=0.03)
    assert "public:kernel-torch-mm-bf16-sm80-crowd" in rate.provenance


@pytest.mark.parametrize("expert_format", ["fp8_block", "fp8_tensor", "fp8_tensor_dynamic"])
def test_vllm_runs_fp8_experts_on_marlin_without_fp8_tensor_cores(expert_format):
    # vLLM's FP8 MoE oracle on cc 8.0: Triton refuses FP8 below cc 8.9, Marlin (cc >= 7.5) is the first that takes it
    # (capability/profiles/vllm_0_34_0.py FP8_MARLIN_MOE_ARCHS); before: Triton, which vLLM does not run there.
    # The experts compute in BF16 on sm_80 (precision.compute_dtype), so the pick reads the checkpoint's format.
    assert efficiency.auto_moe_kernel("vllm", "bf16", "sm_80", False, 1, expert_format) == "marlin"
    assert efficiency.auto_moe_kernel("vllm", "fp8", "sm_89", False, 1, expert_format) != "marlin"
    facts = {"engine": "vllm", "expert_weights": expert_format, "cc": 8.0, "ep": 1, "eplb": False, "arch": "sm_80"}
    assert value_admitted("vllm", "kernels.moe", "marlin", facts) is None
    assert value_admitted("vllm", "kernels.moe", "triton", facts) is not None  # an explicit Triton FP8 MoE raises
    assert value_admitted("vllm", "kernels.moe", "triton", {**facts, "cc": 8.9, "arch": "sm_89"}) is None


def test_an_fp8_moe_checkpoint_on_an_a100_is_priced_on_marlin():
    gpus = tuple(range(8))
    fp8 = opcore.context(load_model("qwen3.5-397b-a17b-fp8"), PhasePlan(gpus=gpus, tp=8), "vllm", sm80_box(), gpus)
    bf16 = opcore.context(load_model("qwen3.5-397b-a17b"), PhasePlan(gpus=gpus, tp=8), "vllm", sm80_box(), gpus)
    assert fp8.expert_dtype == "bf16" and fp8.expert_bytes == 1.0  # W8A16: FP8 weights, BF16 mma.sync
    assert fp8.moe_speed == pytest.approx(rates.MARLIN_MMA_SYNC_SPEED) and fp8.moe_stream_gbs > 0  # Marlin's
    assert bf16.moe_speed == pytest.approx(efficiency.MOE_VARIANT_SPEED["triton"]) and not bf16.moe_stream_gbs
