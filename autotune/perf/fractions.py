"""Compute fractions that depend on more than the architecture: the part's tensor rate per SM (export parts reach
more of their lower peak) and the prefill attention kernel's head dimension. Pure functions, no I/O; rates.py
builds the rates table from them."""

from __future__ import annotations

import math

from autotune.perf import tiles
from autotune.specs import HardwareProfile

# --- compute fractions on a part whose tensor cores are slower per SM than its architecture's reference part ----
# The compute fractions of rates.py (LARGE_GEMM_FRACTION, FP8_VS_BF16, ATTENTION_PREFILL_FRACTION) were measured or
# set on each architecture's full-rate part (COMPUTE_FRACTION_REFERENCE). A kernel tile's time is its tensor-core
# time plus work that does not run on the tensor cores (softmax and scale promotion on the CUDA cores, the
# epilogue, load latency the pipeline does not hide): 1 / fraction - 1 of the tensor-core time on the reference
# part. Export parts cut the tensor-core rate per SM and keep the rest (H20: 148 bf16 TFLOPS on 78 SMs against the
# H100's 989 on 132, a quarter per SM, while its 44 FP32 TFLOPS are the H100's per SM; L20: 119.5 on 92 SMs, half the
# L40S's per SM), so the same kernels reach more of their lower peak: fraction' = 1 / (1 + (1 / fraction - 1) x r),
# r = the part's bf16 TFLOPS per SM over the reference's. Public figures on such parts (calibration.yaml):
# - kernel-l20-hgemm-cublas: cuBLAS reaches 0.88-0.96 of the L20's peak (0.80 on the L40S -> 0.89 here);
# - kernel-flashmla-h20-decode: FlashMLA's compute-bound decode 125-130 of the H20's 148 TFLOPS (0.84-0.88), where
#   it reaches 660 of 989 on H800 (0.67, kernel-flashmla-h800-decode; 0.60 -> 0.86 here);
# - kernel-fa3-h20-fwd: FlashAttention-3 forward, non-causal, seqlen 2k, 120-126 TFLOPS on H20 (0.81-0.85), against
#   460-625 of 989 on H100 at the same shape (0.47-0.63, kernel-fa3-h100-fwd-headdim).
# All checked in tests/bench/calibration_check.py. The H100 / H200 / B200 / L40S / RTX PRO 6000 Server are the
# references: their rates do not move.
COMPUTE_FRACTION_REFERENCE = {  # arch -> bf16 dense TFLOPS per SM of the part its fractions describe
    "sm_80": 312 / 108,  # A100 (devices.py; A100 whitepaper: 108 SMs)
    "sm_89": 362 / 142,  # L40S
    "sm_90": 989 / 132,  # H100 / H200 SXM
    "sm_100": 2250 / 148,  # B200
    "sm_120": 504 / 188,  # RTX PRO 6000 Blackwell Server Edition
}


def tensor_rate_ratio(hw: HardwareProfile) -> float:
    """The part's dense bf16 TFLOPS per SM over its architecture's reference part's (1 where either is unknown)."""
    reference = COMPUTE_FRACTION_REFERENCE.get(hw.gpu.arch)
    sms = tiles.sm_count(hw.gpu.name, hw.gpu.arch)
    peak = hw.gpu.peak_tflops.get("bf16", 0.0)
    if not reference or sms <= 0 or peak <= 0:
        return 1.0
    return peak / sms / reference


def per_sm_fraction(fraction: float, ratio: float) -> float:
    """A compute fraction of the reference part on a part of tensor-rate `ratio` (see COMPUTE_FRACTION_REFERENCE)."""
    if ratio == 1.0 or not 0.0 < fraction < 1.0:
        return fraction
    return 1.0 / (1.0 + (1.0 / fraction - 1.0) * ratio)


def variant_speed(speed: float, fraction: float, ratio: float) -> float:
    """A kernel variant's speed `speed` against the kernel the rates table's `fraction` describes (both on the
    reference part), on a part of tensor-rate `ratio`: the variant's extra time is work off the tensor cores (see
    the fused-MoE variants in perf/efficiency.py), which per_sm_fraction shrinks against the slower tensor cores.
    `speed` itself where the ratio is 1 or the fraction unknown."""
    if ratio == 1.0 or speed == 1.0 or not 0.0 < fraction * speed < 1.0 or not 0.0 < fraction < 1.0:
        return speed
    return per_sm_fraction(fraction * speed, ratio) / per_sm_fraction(fraction, ratio)


# Prefill attention on sm_90 runs FlashAttention-3 (vLLM's FLASH_ATTN backend, vllm_flash_attn fa3), whose rate
# depends on the head dimension: calibration.yaml kernel-fa3-h100-fwd-headdim (FA3 paper, figure 5, H100 SXM5, 16k
# tokens per batch). A serving prefill is causal, so the causal panel is used: 473 / 616 / 642 TFLOPS at 16k for
# head dims 64 / 128 / 256, counted as the paper counts them (half the square), times (8,192 + 64) / 8,192 for the
# diagonal blocks the op list counts as computed whole (tiles.causal_diagonal_entries): 0.482 / 0.628 / 0.654 of
# the 989 TFLOPS dense peak. (The non-causal panel, 0.503 / 0.655 / 0.764, put a causal head-dim-256 prefill 15%
# above the paper's causal figure at every length: FA3's causal kernel loses more to masking there.) The curves'
# rise at short sequence lengths is the per-wave fixed time tiles.CTA_FIXED_US adds. Interpolated in log2(head dim),
# held at the ends; an MLA prefill (q.k 192, v 128) takes the mean width, 160. sm_100: calibration.yaml
# kernel-fa4-b200-fwd-headdim (Dao-AILab/flash-attention#2605, FlashAttention-4 forward, MFU quoted against
# 2,250 TFLOPS, the B200's dense BF16 peak): 879 / 1,330 TFLOPS non-causal at 16k for head dims 64 / 128, i.e.
# 0.391 / 0.591 (the 0.60 prior of ATTENTION_PREFILL_FRACTION at 128); no 256 row there: held at 128's.
# Other archs: one fraction (above).
PREFILL_HEAD_DIM_FRACTION = {
    "sm_90": ((64, 0.482), (128, 0.628), (256, 0.654)),
    "sm_100": ((64, 0.391), (128, 0.591)),
}
PREFILL_HEAD_DIM_PROVENANCE = {
    "sm_90": "public:kernel-fa3-h100-fwd-headdim",
    "sm_100": "public:kernel-fa4-b200-fwd-headdim",
}


# FP8 prefill attention on sm_90 (FA3 on FP8 queries, keys and values: SGLang's FA3 backend over an FP8 KV cache,
# engine profile fp8_kv_prefill_attention_archs): calibration.yaml kernel-fa3-h100-fwd-fp8 (FA3 paper, figure 7, H100
# SXM5, 16k tokens per batch): 1,024 TFLOPS causal at head dim 256 against the BF16 figure's causal 642
# (kernel-fa3-h100-fwd-headdim), 1.595x; non-causal 1,171 against 756, 1.549x. The causal pair is used (a serving
# prefill is causal, as PREFILL_HEAD_DIM_FRACTION); head dim 256 is the one FP8 panel whose mask the figure's pattern
# pins (confidence M), and held at every head dim. No sm_100 figure (FA4's FP8 path is not the engines' default).
FP8_PREFILL_VS_BF16 = {"sm_90": 1024.0 / 642.0}
FP8_PREFILL_PROVENANCE = "public:kernel-fa3-h100-fwd-fp8"
# FP8 / BF16 dense datasheet peaks of the reference part FP8_PREFILL_VS_BF16 was measured on (H100 SXM: 1,979 / 989)
FP8_REFERENCE_PEAK_RATIO = {"sm_90": 1979.0 / 989.0}


def fp8_prefill_speed(arch: str, bf16_fraction: float, ratio: float, peak_ratio: float) -> float:
    """Speed of the FP8 prefill attention kernel against the BF16 one that reaches `bf16_fraction` of the part's
    BF16 peak at the reference tensor rate: its fraction of the FP8 peak on the reference part (bf16_fraction x
    FP8_PREFILL_VS_BF16 / the reference's FP8 / BF16 peak ratio) and `bf16_fraction`, both moved to the part's tensor
    rate per SM `ratio` (per_sm_fraction: the softmax runs on the CUDA cores, whose rate per SM export parts keep),
    times the part's own FP8 / BF16 peak ratio `peak_ratio`. 1 on an arch without a figure."""
    vs_bf16 = FP8_PREFILL_VS_BF16.get(arch)
    if not vs_bf16 or not 0.0 < bf16_fraction < 1.0 or peak_ratio <= 0:
        return 1.0
    fp8_fraction = bf16_fraction * vs_bf16 / FP8_REFERENCE_PEAK_RATIO[arch]
    return peak_ratio * per_sm_fraction(fp8_fraction, ratio) / per_sm_fraction(bf16_fraction, ratio)


def head_dim_speed(arch: str, head_dim: float, probed: bool, ratio: float, base_fraction: float) -> float:
    """Speed of a prefill attention kernel of `head_dim` (mean of the q.k and v widths) relative to the rates
    table's prefill rate (`base_fraction`, rates.base_fraction, of the dense peak):
    PREFILL_HEAD_DIM_FRACTION's figure over that fraction on an arch that has one, else 1 (and 1 when `probe --bench`
    measured the prefill rate); both fractions moved to the part's tensor rate `ratio` (per_sm_fraction) on a part
    slower per SM than the reference."""
    points = PREFILL_HEAD_DIM_FRACTION.get(arch)
    if not points or probed or head_dim <= 0:
        return 1.0
    x = math.log2(head_dim)
    (d0, f0), (d1, f1) = points[0], points[-1]
    fraction = f1
    if head_dim <= d0:
        fraction = f0
    elif head_dim < d1:
        for (da, fa), (db, fb) in zip(points, points[1:], strict=False):
            if head_dim <= db:
                t = (x - math.log2(da)) / (math.log2(db) - math.log2(da))
                fraction = fa + t * (fb - fa)
                break
    if ratio == 1.0:
        return fraction / base_fraction
    return per_sm_fraction(fraction, ratio) / per_sm_fraction(base_fraction, ratio)
