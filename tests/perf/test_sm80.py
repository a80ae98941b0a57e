"""Ampere (sm_80: A100 / A800) rates and kernel rules (sm80-25)."""

import pytest

from autotune.perf import rates
from tests.perf.boxes import sm80_box

# calibration.yaml kernel-torch-mm-bf16-sm80-crowd: torch.mm bf16, best square size, TFLOPS
TORCH_MM_BF16 = {"a100-sxm-80gb": 264.53, "a800-sxm-80gb": 266.48}


@pytest.mark.parametrize(("device", "measured"), TORCH_MM_BF16.items())
def test_large_gemm_rate_is_the_public_torch_mm_figure(device, measured):
    # before: the 0.75 default prior, 234 TFLOPS, 12% under both rows
    rate = rates.rates_table(sm80_box(device)).get("gemm", "bf16", "m>1024")
    assert rate.tflops == pytest.approx(measured, rel=0.03)
    assert "public:kernel-torch-mm-bf16-sm80-crowd" in rate.provenance
