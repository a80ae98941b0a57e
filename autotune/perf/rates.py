"""The rates table of one box: op class x dtype x shape bucket -> achieved rate and minimum kernel latency.

Every entry says where its figure comes from (`provenance`):
- `datasheet-prior`: the GPU's datasheet peak x a per-architecture fraction that is a prior (no measurement);
- `public:<id>`: an entry of autotune/catalog/calibration.yaml or shared/reference/calibration.yaml;
- `probe`: `HardwareProfile.measured` (`probe --bench` on this box: per-bucket kernel points, copy bandwidth);
- `measured-run`: a per-op-class multiplier on time fitted from measured runs (`mi-tune measure`,
  HardwareProfile.corrections), marked on each entry it scales, e.g. `probe; measured-run x1.12`.
A composite figure names both parts, e.g. `probe*public:gemm-fp8-vs-bf16-sm90` (the probed bf16 rate scaled by
the public FP8/bf16 ratio). Built once per hardware fingerprint and looked up per op (ops.py).
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from dataclasses import dataclass

from autotune.perf import fractions, tiles
from autotune.perf.fractions import PREFILL_HEAD_DIM_PROVENANCE, per_sm_fraction, tensor_rate_ratio
from autotune.specs import HardwareProfile

# GEMM / grouped-GEMM buckets over m (rows: tokens, or tokens per expert), upper bounds inclusive.
M_BUCKETS = ((16, "m<=16"), (128, "m<=128"), (1024, "m<=1024"), (float("inf"), "m>1024"))
ATTENTION_BUCKETS = ("decode", "prefill")
GEMM_DTYPES = ("bf16", "fp8", "int8", "fp4")

# --- large-GEMM bf16 fraction of the dense datasheet peak, per architecture -------------------------------------
# sm_89: kernel-l20-hgemm-cublas (shared calibration): cuBLAS FP16 105-115 of 119.5 TFLOPS on L20 -> 0.88-0.96 at
# large square shapes; serving shapes are ragged, 0.80 is used. Second source, kernel-torch-mm-bf16-crowd (torch.mm
# bf16, best square size 1k-10k): L40S 269 of 362 (0.74), RTX 4090 167 of 165 (1.01, above its rated boost clock):
# the three sm_89 parts bracket 0.80 (in-sample fit 0.75-0.80), so it stays. sm_90: vLLM PR #17126 / #49363
# (calibration id gemm-fp8-vs-bf16-sm90) torch bf16 reaches 544-593 TFLOPS at m=256 on H100 (989 peak), i.e.
# 0.55-0.60 already at m=256; 0.75 at m>1024 is a prior (the v1 global figure). sm_100 / sm_120 / others: the same
# 0.75, a prior. kernel-torch-mm-bf16-crowd checks these priors (H200 790 TFLOPS, 0.80; B200 1,696, 0.75; RTX PRO
# 6000 Server 409, 0.81): one source, the priors are not moved (op_check's gemm groups check them independently).
# sm_80: calibration.yaml kernel-torch-mm-bf16-sm80-crowd (the crowd table's Ampere rows): torch.mm bf16 264.5 TFLOPS
# on an A100 SXM4 80GB, 266.5 on an A800 SXM4 80GB: 0.848 / 0.854 of 312 (A100 40GB 246.3, 0.79); the FlashAttention-2
# paper (arXiv:2307.08691, section 1): optimized GEMM reaches "up to 80-90% of the theoretical maximum" on A100.
LARGE_GEMM_FRACTION = {"sm_80": 0.85, "sm_89": 0.80, "sm_90": 0.75, "sm_100": 0.75, "sm_120": 0.75}
LARGE_GEMM_FRACTION_DEFAULT = 0.75  # domestic / unknown: prior
LARGE_GEMM_PROVENANCE = {"sm_80": "public:kernel-torch-mm-bf16-sm80-crowd", "sm_89": "public:kernel-l20-hgemm-cublas"}

# --- achieved FP8 / bf16 large-GEMM ratio, per architecture: the GEMM kernel alone (the noquant columns). The op list
# costs each FP8 GEMM's activation quantisation as its own op (opcore._quant), so a with-quant ratio would count it
# twice. calibration.yaml gemm-fp8-vs-bf16-sm90: H100 noquant 1.76 (Llama-8B N=6144 K=4096, m=256: 956.0 / 544.3)
# and 1.65 (Gemma-31B N=12288 K=5376, m=128: 581.8 / 352.6) -> their mean 1.70 (with quant: 1.40-1.43);
# gemm-fp8-vs-bf16-sm100: B200 noquant 1.54 at m=1024 (2207.5 / 1433.0; with quant 1.24); gemm-fp8-vs-bf16-sm120:
# RTX 5090 FP8 (no activation quant) 422-424 TFLOPS at m=2048-4096 against 236-240 bf16 at 8192^2 -> 1.78 (no quant
# cost: an upper end). sm_89 (L40S/4090): no public pair found -> 1.5, a prior inside the 1.1-1.7 public range.
FP8_VS_BF16 = {"sm_89": 1.5, "sm_90": 1.70, "sm_100": 1.54, "sm_120": 1.75}
FP8_VS_BF16_DEFAULT = 1.5  # prior
FP8_VS_BF16_PROVENANCE = {
    "sm_90": "public:gemm-fp8-vs-bf16-sm90",
    "sm_100": "public:gemm-fp8-vs-bf16-sm100",
    "sm_120": "public:gemm-fp8-vs-bf16-sm120",
}
# The ratios above are measured at K = 4096-5376 (FP8_RATIO_K). At smaller K a tile runs fewer K iterations over
# the same prologue / epilogue (FP8 adds the scale application to the epilogue), so the narrow dtype's advantage
# shrinks. FP8 GEMMs pay it as a fixed time per wave of output tiles (tiles.GEMM_WAVE_FIXED_US, from DeepGEMM's
# public K sweep); FP4 GEMMs, which that figure does not describe, keep a prior: ratio(K) = 1 + (ratio - 1) x
# g(K) / g(FP8_RATIO_K), g(K) = K / (K + FP8_K_HALF), FP8_K_HALF = 1024 (no public sweep over K at fixed m, n).
FP8_RATIO_K = 4096
FP8_K_HALF = 1024.0
# int8 and fp4 over fp8: no public serving-shape pair in calibration.yaml -> priors (int8 = fp8; fp4 1.5x fp8,
# below the datasheet 2x for the same reason FP8 is below 2x bf16).
NARROW_VS_FP8 = {"int8": 1.0, "fp4": 1.5}

# --- compute rate of a bucket relative to the large-shape rate (same kernel, fewer rows: tile padding, fewer
# CTAs than SMs). gemm-fp8-vs-bf16-sm100: B200 bf16 1338 TFLOPS at m=512 vs 1433 at m=1024 (0.93);
# gemm-fp8-vs-bf16-sm90: H100 bf16 544 at m=256 vs ~750 large (0.73). Small buckets are weight-bandwidth bound,
# their compute fraction is a prior that rarely decides the op time.
M_BUCKET_SCALE = {"m<=16": 0.35, "m<=128": 0.6, "m<=1024": 0.8, "m>1024": 1.0}
# Grouped (MoE) GEMM against a dense GEMM of the same rows per expert: ragged groups, per-expert tails. Prior,
# under the public upper end: kernel-deepgemm-h800-grouped (DeepGEMM, H800) runs grouped contiguous FP8 at
# 0.95-1.07 of its dense rate at 4,096-8,192 rows per group; the engines' default fused-MoE kernels are slower.
GROUPED_VS_DENSE = 0.85

# Marlin (W4A16 / MXFP4 weight-only MoE: 4-bit weights dequantised in registers into FP16/BF16 mma.sync):
# calibration.yaml kernel-marlin-a10-large-batch (MARLIN paper, arXiv:2408.11743: at batch >= 1,024 it runs about
# 10% below the FP16 GEMM, compute bound) -> 0.9 of an mma.sync BF16 GEMM. On sm_80 / sm_86 / sm_89 / sm_120 that
# is the BF16 rate itself (no wgmma or tcgen05: the other kernels run the same instruction). On sm_90 / sm_100
# mma.sync gets only a share of the wgmma / tcgen05 rate, MMA_SYNC_SHARE: what an mma.sync kernel gets against the
# arch's own kernel of the same problem, FlashAttention-2 (mma.sync on both) over FlashAttention-3 / -4, forward
# BF16, head dim 128, non-causal, seqlen 8k: H100 370 / 646 TFLOPS (calibration.yaml kernel-fa2-h100-fwd, FA3
# paper figure 5; kernel-fa3-h100-fwd-headdim), B200 361.6 / 1,289 (kernel-fa2-b200-fwd, tritonbench#171;
# kernel-fa4-b200-fwd-headdim). FA2 runs at the same ~360 TFLOPS on both: the B200's doubled BF16 peak is
# tcgen05's only. Marlin's speed is MARLIN_MMA_SYNC_SPEED x the share (0.52 on sm_90, 0.25 on sm_100; before: a
# 0.7 prior on both). FA3 also overlaps its softmax with the GEMMs, so the share is a lower bound of the
# instruction's alone (confidence M).
MARLIN_MMA_SYNC_SPEED = 0.9
MMA_SYNC_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_120")
MARLIN_PROVENANCE = "public:kernel-marlin-a10-large-batch"
MMA_SYNC_SHARE = {"sm_90": 370.0 / 646.0, "sm_100": 361.6 / 1289.0}
MMA_SYNC_SHARE_PROVENANCE = ("public:kernel-fa2-h100-fwd", "public:kernel-fa2-b200-fwd")
# What one SM streams of Marlin's 4-bit expert weights (W4A16 fused MoE) while few rows per expert leave it
# weight-bound: calibration.yaml kernel-marlin-moe-h20-dsv3 (FlagGems#3222 / #3609: vLLM 0.20's fused_marlin_moe
# on H20, 78 SMs, 4.0 TB/s, DeepSeek-V3's experts, 256 x H7168 I2048, top 8). The weights the batch hits (the
# expected distinct experts of uniform routing, E (1 - (1 - k/E)^T), at the op list's 0.53125 B per INT4 weight
# with its group scales), over the time less the grouped MoE floor (MIN_US["grouped_moe"], which the costing adds
# on top), per SM: 18.4 / 22.1 / 22.5 GB/s at 1 / 16 / 64 tokens (1.43-1.76 TB/s, well under the H20's memory:
# the kernel dequantises in registers and feeds mma.sync, and its SMs set the rate). Their median, 22.1, is used.
# The op list caps a Marlin MoE's weight stream at SMs x this (Context.moe_stream_gbs): it binds on HBM3 parts
# (H20 / H100 / H200 / B200), not on GDDR ones (L40S, RTX PRO 6000: their SMs x 22.1 exceed the memory).
MARLIN_PER_SM_STREAM_GBS = 22.1
# The same for a dense W4A16 GEMM (vLLM's Marlin, or Humming, which vLLM 0.34 ranks ahead of Marlin on sm_90 only:
# quantization/utils/humming/priority.py:11-47; SGLang awq_marlin / gptq_marlin) at decode row counts, where its
# stream-K split over the SMs (not the HBM) sets the rate: calibration.yaml kernel-marlin-dense-w4a16-h100-humming2
# and -h200-tileops. At m = 1, n = k = 8192: 4.98 TFLOPS = 26.95 us on an H100 (inclusionAI/humming#2; Humming
# 4.96) and ~21.8 us on an H200 (tile-ai/TileOPs#2159: its 23.84 us "9.4% slower than the fastest Marlin
# baseline"), against 12-16 us at 0.80 of the HBM. Over the op list's bytes (0.53125 B a weight) less the GEMM floor
# (MIN_US["gemm"], which the costing adds on top), over 132 SMs: 11.3 and 14.4 GB/s per SM; their mean, 12.8, is
# used. The op list caps a weight-only INT4 checkpoint's dense GEMMs at SMs x this (Context.dense_stream_gbs): on
# HBM parts; GDDR parts' memory binds first (RTX PRO 6000: 188 x 12.8 = 2.4 TB/s over its 1.6-1.8).
MARLIN_DENSE_PER_SM_STREAM_GBS = 12.8
MARLIN_DENSE_PROVENANCE = "public:kernel-marlin-dense-w4a16-h100-humming2, kernel-marlin-dense-w4a16-h200-tileops"

# --- minimum kernel latency (GPU time of a tiny launch), microseconds --------------------------------------------
# gemm: sglang PR #3047 (calibration id kernel-min-time-small-gemm): FP8 scaled-mm N=384 K=2048 at m=1 runs at
# 0.51-0.88 TFLOPS = 1.8-3.1 us for 1.6 MFLOP; 3 us is used. grouped_moe: a fused-MoE step is at least a routing /
# permute kernel + two grouped GEMMs + unpermute: 4 x the GEMM floor, a prior. attention: 3 us a decode kernel, a prior
# (a split call: tiles.ATTENTION_DECODE_LAUNCHES; prefill: tiles.PREFILL_ATTENTION_MIN_US). norm / elementwise:
# kernel-min-time-rmsnorm-decode (Megatron-LM#6463): TransformerEngine rmsnorm_fwd 2.9 us (a plain RMSNorm: MLA's
# q_a / kv_a norms), a fused add 1.5 us; the layer's fused residual add + RMSNorm is FUSED_ADD_NORM_MIN_US below.
# quant: per-token FP8 activation quant is an elementwise kernel (1.5 us). sampling: top-k/top-p + argmax over the
# vocab, several launches: 10 us, a prior.
MIN_US = {
    "gemm": 3.0,
    "grouped_moe": 12.0,
    "attention": 3.0,
    "norm": 2.9,
    "elementwise": 1.5,
    "quant": 1.5,
    "sampling": 10.0,
}
# The layer's two norms in vLLM and SGLang are one kernel each that adds the residual and normalises (a
# ("norm", "bf16", "fused_add") entry): 4.11 us in Megatron-LM#6463's decode profile (calibration id
# kernel-min-time-rmsnorm-decode), 5.17 us for FlashInfer's fused_add_rmsnorm (SGLang's) and 5.53 us for
# torch.compile's (vLLM's default, its custom op off) at hidden 7168 and one row under CUDA graphs (vllm#36899,
# kernel-min-time-add-rmsnorm-vllm36899): the median of the three figures. Before, these ran at the plain
# RMSNorm's 2.9 us.
FUSED_ADD_NORM_MIN_US = 5.17
FUSED_ADD_NORM_PROVENANCE = "public:kernel-min-time-rmsnorm-decode, kernel-min-time-add-rmsnorm-vllm36899"
# The GEMM floor of an (arch, dtype) whose kernel has a public small-shape figure of its own: sm_100 NVFP4, the
# CuTe-DSL GEMM vLLM runs there, 3.45 us at k=0 in the least-squares line through flashinfer#2540's m=1 rows
# (calibration.yaml kernel-flashinfer-cutedsl-fp4-sm100-kloop; the same fit gives its K-loop rate,
# GEMM_CTA_LOAD_GBS_BY_ARCH); its smallest timed shape, m=4 n=7168 k=256, takes 3.87 us.
GEMM_MIN_US_BY_ARCH_DTYPE = {("sm_100", "fp4"): 3.45}
GEMM_MIN_US_PROVENANCE = {("sm_100", "fp4"): "public:kernel-flashinfer-cutedsl-fp4-sm100-kloop"}
GEMM_WAVE_PROVENANCE = "public:kernel-deepgemm-h800-grouped"  # tiles.GEMM_WAVE_FIXED_US
MIN_US_PROVENANCE = {
    "gemm": "public:kernel-min-time-small-gemm",
    "norm": "public:kernel-min-time-rmsnorm-decode",
    "elementwise": "public:kernel-min-time-rmsnorm-decode",
    "quant": "public:kernel-min-time-rmsnorm-decode",
}

# --- bandwidth fractions of the datasheet HBM/GDDR bandwidth -----------------------------------------------------
# Weight streaming (small-m GEMM) and elementwise: 0.80, the v1 prior. Decode attention: kernel-flashmla-h800-decode
# (shared calibration) FlashMLA reaches ~0.90 of HBM when memory bound (3,000 of 3,350 GB/s on H800);
# kernel-flashmla-h100-decode-achatbot: 2,812 GB/s (median of the fixed-length memory-bound cases) of the H100 SXM's
# 3,350, 0.84. 0.85, between the two.
# Prefill attention: the same entry, 0.67 of dense peak compute bound; 0.60 is used.
STREAM_FRACTION = 0.80
ATTENTION_DECODE_FRACTION = 0.85
ATTENTION_PREFILL_FRACTION = 0.60
ATTENTION_PROVENANCE = "public:kernel-flashmla-h800-decode"
# What one SM streams from device memory when too few CTAs run to load them all: calibration.yaml
# kernel-sm-restricted-stream-h100pcie (BulletServe#1: on an H100 PCIe, 114 SMs, 2.0 TB/s, decode kernels confined
# to fewer SMs speed up steeply until ~40 SMs, where device memory saturates): 2.0 TB/s x STREAM_FRACTION / 40 SMs
# = 40 GB/s per SM. A decode attention kernel on n CTAs (one per SM) streams at most n x this (decode_fill_speed).
PER_SM_STREAM_GBS = 2000.0 * STREAM_FRACTION / 40
PER_SM_STREAM_PROVENANCE = "public:kernel-sm-restricted-stream-h100pcie"
# What one SM's CTA receives per second over a GEMM's K loop (TMA loads of its A and B tiles into shared memory)
# when the grid has about one CTA per SM: calibration.yaml kernel-deepgemm-h800-kloop-per-sm (DeepGEMM's first
# release on H800, 132 SMs, n=2112 k=7168: 132 CTAs of one 64 x 16 or 128 x 16 tile's K loop each, 9.41 / 11.01 us
# at m=64 / 128): 89 and 129 GB/s per SM once the kernel floor (MIN_US["gemm"], which the costing adds on top) is
# taken off; their mean, 110, is used. Measured on sm_90; sm_89 takes it too (no public figure: a prior). For
# vLLM's per-tensor FP8 CUTLASS GEMM, whose small-m tiles leave few CTAs each a long K loop (opcore._kloop_speed).
GEMM_CTA_LOAD_GBS = 110.0
# sm_100: calibration.yaml kernel-flashinfer-cutedsl-fp4-sm100-kloop (flashinfer#2540, FlashInfer mm_fp4 backend
# cute-dsl, autotuned, m=1 at n=512-1792, k=1024-8192: at most 14 output tiles, each one CTA's whole K loop): the
# time grows by 0.64 ns per unit of k (least squares over the six rows, 3.45 us at k=0). One step of the kernel's
# smallest tile (64 x 128, tiles.CUTE_DSL_FP4_MIN_TILE) brings (64 + 128) x 0.5625 = 108 B
# (tiles.NVFP4_OPERAND_BYTES), so one SM receives 108 / 0.64 = 169 GB/s. It is the NVFP4 GEMM vLLM 0.34 runs on
# sm_100; its per-tensor FP8 CUTLASS GEMM feeds the same SMs the same way (TMA into shared memory, tcgen05) and
# takes the figure too, an extrapolation across kernels on one arch (confidence M) in place of the H800 figure
# above. The same PR's first table (before its autotuned tactics) gives 0.94 ns per k, 115 GB/s: DeepGEMM's.
GEMM_CTA_LOAD_GBS_BY_ARCH = {"sm_100": 169.0}


def gemm_cta_load_gbs(arch: str) -> float:
    """What one SM's CTA receives per second over a narrow GEMM's K loop on `arch` (GEMM_CTA_LOAD_GBS_BY_ARCH where
    a public figure of the arch exists, else GEMM_CTA_LOAD_GBS)."""
    return GEMM_CTA_LOAD_GBS_BY_ARCH.get(arch, GEMM_CTA_LOAD_GBS)


# FA3's prefill over a paged KV cache of pages shorter than its KV block (PagedKVNonTMA: perf/tiles.py
# FA3_PAGED_CTA_FIXED_US, engine profile fa3_paged_kv_non_tma_archs) computes a 128 x 128 block at head dim 128 in
# 1.85 us on an SM (calibration.yaml kernel-fa3-vllm-paged-prefill-hopper, the slope of its per-wave times), where
# PREFILL_HEAD_DIM_FRACTION's contiguous rate (0.628 x 989 TFLOPS over 132 SMs) gives 1.78 us: 1.78 / 1.85 = 0.965
# of that rate, taken at every head dim (one measured head dim). Layers whose prefill attends contiguous K/V (MLA's
# up-projected keys) keep the contiguous rate.
FA3_PAGED_KV_PREFILL_SPEED = 0.965
FA3_PAGED_KV_PROVENANCE = "public:kernel-fa3-vllm-paged-prefill-hopper"


def decode_fill_speed(ctas: float, decode_gbs: float) -> float:
    """Speed of a decode attention kernel running `ctas` CTAs (one per SM) relative to the rates table's decode
    bandwidth `decode_gbs`: min(1, ctas x PER_SM_STREAM_GBS / decode_gbs); 1 without CTAs or a bandwidth."""
    if ctas <= 0 or decode_gbs <= 0:
        return 1.0
    return min(1.0, ctas * PER_SM_STREAM_GBS / decode_gbs)


def critical_path_speed(full_s: float, cta_flops: float, cta_bytes: float, tflops: float, sms: int) -> float:
    """Speed of a kernel whose work on the whole GPU takes `full_s` seconds, relative to that, when its longest CTA
    (`cta_flops`, `cta_bytes`) takes longer on one SM: at its SM's share of the rate (`tflops` / `sms`) and at most
    PER_SM_STREAM_GBS from memory. No CTA finishes faster than its SM runs it, so a grid of few or unequal CTAs
    (a causal prefill's last query block attends the whole prompt) takes at least that: min(1, full / longest).
    1 without an SM count, a rate or a time."""
    if sms <= 0 or tflops <= 0 or full_s <= 0:
        return 1.0
    cta_s = max(cta_flops / (tflops * 1e12 / sms), cta_bytes / (PER_SM_STREAM_GBS * 1e9))
    return min(1.0, full_s / cta_s) if cta_s > 0 else 1.0


def narrow_k_speed(arch: str, k: float) -> float:
    """Speed of a narrow-dtype (FP8 / FP4) GEMM of reduction width `k` relative to the rates table's large-shape
    rate, which carries the ratio measured at FP8_RATIO_K (see FP8_K_HALF above)."""
    ratio = FP8_VS_BF16.get(arch, FP8_VS_BF16_DEFAULT)
    if k <= 0:
        return 1.0
    g = k / (k + FP8_K_HALF) / (FP8_RATIO_K / (FP8_RATIO_K + FP8_K_HALF))
    return (1.0 + (ratio - 1.0) * g) / ratio


def prefill_head_dim_speed(arch: str, head_dim: float, probed: bool, ratio: float = 1.0) -> float:
    """fractions.head_dim_speed against this module's ATTENTION_PREFILL_FRACTION (read at call time: a fitted
    constant tests/bench/calibration_check.py patches here)."""
    return fractions.head_dim_speed(arch, head_dim, probed, ratio, ATTENTION_PREFILL_FRACTION)


@dataclass(frozen=True)
class Rate:
    tflops: float  # achieved compute rate (0: the op class is bandwidth bound only)
    gbs: float  # achieved bandwidth
    min_us: float  # minimum GPU time of one kernel
    provenance: str


@dataclass(frozen=True)
class RatesTable:
    arch: str
    entries: dict[tuple[str, str, str], Rate]  # (op class, dtype, bucket) -> rate
    collective_scale: float = 1.0  # measured-run multiplier on collective time (costing.collective_s)
    tensor_rate_ratio: float = 1.0  # the part's tensor rate per SM over its arch's reference part's (above)

    def get(self, op_class: str, dtype: str, bucket: str) -> Rate:
        hit = self.entries.get((op_class, dtype, bucket))
        if hit is None:
            hit = self.entries[(op_class, "bf16", bucket)]
        return hit


_M_BOUNDS = tuple(bound for bound, _ in M_BUCKETS)  # m_bucket's bisection over M_BUCKETS
_M_NAMES = tuple(name for _, name in M_BUCKETS)


def m_bucket(m: float) -> str:
    """The M_BUCKETS bucket of a GEMM of `m` rows: the first whose bound m does not exceed (a bisection: every GEMM
    op asks); NaN in the last, as a scan would leave it."""
    return _M_NAMES[bisect_left(_M_BOUNDS, m)] if m == m else _M_NAMES[-1]


def _arch(hw: HardwareProfile) -> str:
    arch = hw.gpu.arch
    return arch if arch in LARGE_GEMM_FRACTION else "other"


def _large_gemm(hw: HardwareProfile, dtype: str, r: float) -> tuple[float, str]:
    """Achieved large-shape (m > 1024) GEMM TFLOPS for `dtype` and where it comes from. A probed figure is
    the large-shape rate itself; a dtype without one scales the probed (or prior) bf16 rate by the public ratio.
    `r`: the part's tensor rate per SM over its arch's reference part's (fractions.tensor_rate_ratio)."""
    measured = hw.measured.gemm_tflops if hw.measured else {}
    arch = _arch(hw)
    peaks = hw.gpu.peak_tflops
    if measured.get(dtype):
        return measured[dtype], "probe"
    fraction = LARGE_GEMM_FRACTION.get(arch, LARGE_GEMM_FRACTION_DEFAULT)
    if measured.get("bf16"):
        base, base_prov = measured["bf16"], "probe"
    else:
        base = peaks.get("bf16", 0.0) * per_sm_fraction(fraction, r)
        base_prov = LARGE_GEMM_PROVENANCE.get(arch, "datasheet-prior")
    if dtype == "bf16":
        return base, base_prov
    ratio = FP8_VS_BF16.get(arch, FP8_VS_BF16_DEFAULT) * NARROW_VS_FP8.get(dtype, 1.0)
    prov = FP8_VS_BF16_PROVENANCE.get(arch, "datasheet-prior") if dtype == "fp8" else "datasheet-prior"
    # never above the datasheet: a chip whose fp8 peak is not 2x bf16 (or lacks it) caps the scaled figure
    cap = peaks.get(dtype, 0.0) * 0.95 or base
    if not measured.get("bf16") and r != 1.0 and peaks.get(dtype) and peaks.get("bf16"):
        # the narrow dtype's own fraction of its peak on the reference part, moved to this part's tensor rate
        narrow_fraction = fraction * ratio * peaks["bf16"] / peaks[dtype]
        return min(peaks[dtype] * per_sm_fraction(narrow_fraction, r), cap), f"{base_prov}*{prov}"
    return min(base * ratio, cap), f"{base_prov}*{prov}"


def reference_fraction(hw: HardwareProfile, dtype: str) -> float:
    """The large-shape GEMM fraction of `dtype`'s datasheet peak on the arch's reference part (the priors above,
    before fractions.per_sm_fraction moves them to this part, as _large_gemm does); 0 where a probe measured the
    GEMM rates or a peak is unknown."""
    peaks = hw.gpu.peak_tflops
    if (hw.measured and hw.measured.gemm_tflops) or not peaks.get(dtype) or not peaks.get("bf16"):
        return 0.0
    fraction = LARGE_GEMM_FRACTION.get(_arch(hw), LARGE_GEMM_FRACTION_DEFAULT)
    if dtype == "bf16":
        return fraction
    ratio = FP8_VS_BF16.get(_arch(hw), FP8_VS_BF16_DEFAULT) * NARROW_VS_FP8.get(dtype, 1.0)
    return fraction * ratio * peaks["bf16"] / peaks[dtype]


_TABLES: dict[str, RatesTable] = {}


def rates_table(hw: HardwareProfile) -> RatesTable:
    """The box's rates table, cached by hardware fingerprint."""
    hit = _TABLES.get(hw.fingerprint)
    if hit is not None:
        return hit
    table = corrected(build(hw), hw.corrections)
    if len(_TABLES) >= 64:
        _TABLES.clear()
    _TABLES[hw.fingerprint] = table
    return table


def corrected(table: RatesTable, corrections: dict[str, float]) -> RatesTable:
    """The table with each op class's time scaled by its fitted multiplier (HardwareProfile.corrections):
    rates divided by it, the kernel floor multiplied; provenance gains `measured-run xM`."""
    if not corrections:
        return table
    entries = {}
    for key, r in table.entries.items():
        m = corrections.get(key[0], 1.0)
        prov = f"{r.provenance}; measured-run x{m:.3g}"
        entries[key] = r if m == 1.0 else Rate(r.tflops / m, r.gbs / m, r.min_us * m, prov)
    return RatesTable(table.arch, entries, corrections.get("collective", 1.0), table.tensor_rate_ratio)


def probed_points(hw: HardwareProfile) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(op class, dtype, bucket) -> (median achieved TFLOPS, median achieved GB/s) of `probe --bench`'s kernel
    points (HardwareProfile.measured.ops); kernel-floor points ("launch") are left out."""
    by_key: dict[tuple[str, str, str], list] = {}
    for p in hw.measured.ops if hw.measured else ():
        if p.bucket != "launch" and p.tflops > 0 and p.gbs > 0:
            by_key.setdefault((p.op_class, p.dtype, p.bucket), []).append(p)
    return {
        k: (statistics.median(p.tflops for p in ps), statistics.median(p.gbs for p in ps)) for k, ps in by_key.items()
    }


def _probed_floor_us(hw: HardwareProfile, op_class: str, dtype: str) -> float:
    """Shortest probed kernel time of a tiny shape of `op_class` (0 when not probed)."""
    times = [p.time_us for p in (hw.measured.ops if hw.measured else ()) if p.bucket == "launch"
             and p.op_class == op_class and p.dtype == dtype and p.time_us > 0]  # fmt: skip
    return min(times, default=0.0)


def _probed_stream(hw: HardwareProfile, op_class: str, dtype: str, fallback: float) -> float:
    """The bandwidth ceiling of an op class: the highest achieved GB/s of its probed points (small-m points
    stream the weights), never below the probed/prior stream bandwidth `fallback`."""
    best = max((p.gbs for p in (hw.measured.ops if hw.measured else ()) if p.op_class == op_class
                and p.dtype == dtype and p.bucket != "launch"), default=0.0)  # fmt: skip
    return max(best, fallback)


def build(hw: HardwareProfile) -> RatesTable:
    """The rates table. A bucket `probe --bench` timed takes its probed figures (provenance `probe`): the median
    achieved TFLOPS of its points, the op class's probed bandwidth ceiling, the probed kernel floor; other
    buckets scale the probed (or prior) large-shape rate by the priors above."""
    arch = _arch(hw)
    tensor_ratio = tensor_rate_ratio(hw)  # the compute fractions below, moved to this part (perf/fractions.py)
    probed_bw = hw.measured.mem_bw_gbs if hw.measured and hw.measured.mem_bw_gbs else 0.0
    # a probed stream bandwidth is what weight streaming reaches; kernels reading KV reach it too (the same
    # streaming pattern), so attention scales from it by its prior ratio to the streaming fraction
    stream = probed_bw or hw.gpu.mem_bw_gbs * STREAM_FRACTION
    stream_prov = "probe" if probed_bw else "datasheet-prior"
    probed = probed_points(hw)
    entries: dict[tuple[str, str, str], Rate] = {}
    for dtype in GEMM_DTYPES:
        if dtype != "bf16" and not hw.gpu.peak_tflops.get(dtype):
            continue
        large, prov = _large_gemm(hw, dtype, tensor_ratio)
        floor_us = _probed_floor_us(hw, "gemm", dtype)
        floor_key = (arch, dtype)
        prior_min = GEMM_MIN_US_BY_ARCH_DTYPE.get(floor_key, MIN_US["gemm"])
        prior_prov = GEMM_MIN_US_PROVENANCE.get(floor_key, MIN_US_PROVENANCE["gemm"])
        gemm_min, gemm_min_prov = (floor_us, "probe") if floor_us else (prior_min, prior_prov)
        gemm_bw = _probed_stream(hw, "gemm", dtype, stream)
        moe_bw = _probed_stream(hw, "grouped_moe", "bf16", stream)
        for _, bucket in M_BUCKETS:
            tflops = large * M_BUCKET_SCALE[bucket]
            dense = probed.get(("gemm", dtype, bucket))
            if dense:
                entries[("gemm", dtype, bucket)] = Rate(dense[0], gemm_bw, gemm_min, f"probe; min {gemm_min_prov}")
            else:
                entries[("gemm", dtype, bucket)] = Rate(tflops, stream, gemm_min, f"{prov}; min {gemm_min_prov}")
            grouped = probed.get(("grouped_moe", dtype, bucket))
            grouped_bf16, dense_bf16 = probed.get(("grouped_moe", "bf16", bucket)), probed.get(("gemm", "bf16", bucket))
            if grouped:
                entries[("grouped_moe", dtype, bucket)] = Rate(grouped[0], moe_bw, MIN_US["grouped_moe"], "probe")
            elif dense and grouped_bf16 and dense_bf16:  # this dtype's probed dense rate x the probed bf16 ratio
                rate = dense[0] * grouped_bf16[0] / dense_bf16[0]
                entries[("grouped_moe", dtype, bucket)] = Rate(rate, moe_bw, MIN_US["grouped_moe"], "probe")
            else:
                base = dense[0] if dense else tflops
                base_prov = "probe" if dense else prov
                entries[("grouped_moe", dtype, bucket)] = Rate(
                    base * GROUPED_VS_DENSE, stream, MIN_US["grouped_moe"], f"{base_prov}; grouped datasheet-prior"
                )
        if dtype in ("fp8", "int8"):  # one wave of output tiles beyond the first: a fixed latency only (tiles.py)
            entries[("gemm", dtype, "wave")] = Rate(0.0, stream, tiles.GEMM_WAVE_FIXED_US, GEMM_WAVE_PROVENANCE)
    bf16_peak = hw.gpu.peak_tflops.get("bf16", 0.0)
    # the decode attention kernel's share of the probed stream rate, or of the datasheet bandwidth (one constant)
    fraction = ATTENTION_DECODE_FRACTION
    att_bw = stream * fraction / STREAM_FRACTION if probed_bw else hw.gpu.mem_bw_gbs * fraction
    att_prov = "probe" if probed_bw else (ATTENTION_PROVENANCE if arch == "sm_90" else "datasheet-prior")
    decode, prefill = probed.get(("attention", "bf16", "decode")), probed.get(("attention", "bf16", "prefill"))
    decode_bw = decode[1] if decode else att_bw
    prefill_tflops = prefill[0] if prefill else bf16_peak * per_sm_fraction(ATTENTION_PREFILL_FRACTION, tensor_ratio)
    entries[("attention", "bf16", "decode")] = Rate(
        prefill_tflops, decode_bw, MIN_US["attention"], "probe" if decode else att_prov
    )
    prefill_prov = att_prov if probed_bw else PREFILL_HEAD_DIM_PROVENANCE.get(arch, att_prov)
    entries[("attention", "bf16", "prefill")] = Rate(
        prefill_tflops, decode_bw, tiles.PREFILL_ATTENTION_MIN_US, "probe" if prefill else prefill_prov
    )
    # one wave of attention CTAs: a fixed latency only (perf/tiles.py CTA_FIXED_US, a prior)
    entries[("attention", "bf16", "wave")] = Rate(0.0, decode_bw, tiles.CTA_FIXED_US, "datasheet-prior")
    # one wave of FA3 prefill CTAs over a paged KV cache of short pages (perf/tiles.py FA3_PAGED_CTA_FIXED_US)
    entries[("attention", "bf16", "paged_wave")] = Rate(
        0.0, decode_bw, tiles.FA3_PAGED_CTA_FIXED_US, FA3_PAGED_KV_PROVENANCE
    )
    for op_class in ("norm", "elementwise", "quant", "sampling"):
        prov = stream_prov + (f"; min {MIN_US_PROVENANCE[op_class]}" if op_class in MIN_US_PROVENANCE else "")
        entries[(op_class, "bf16", "any")] = Rate(0.0, stream, MIN_US[op_class], prov)
    entries[("norm", "bf16", "fused_add")] = Rate(
        0.0, stream, FUSED_ADD_NORM_MIN_US, f"{stream_prov}; min {FUSED_ADD_NORM_PROVENANCE}"
    )
    return RatesTable(arch, entries, tensor_rate_ratio=tensor_ratio)


def is_prior(provenance: str) -> bool:
    """True when any part of the figure is a datasheet prior (nothing measured backs that part)."""
    return "datasheet-prior" in provenance


def collective_provenance(hw: HardwareProfile, name: str = "") -> str:
    """Collectives are costed on the topology with NCCL's tuner constants and public PCIe/NVLink fits
    (perf/comm_rates.py), or from probed curves where `probe --bench` measured them (for `name`, an op list
    collective such as "allgather": where that collective's curve was measured)."""
    from autotune.perf.comm import PROBED_NAMES

    curves = hw.measured.collectives if hw.measured else {}
    wanted = {PROBED_NAMES.get(name, "-")} | ({"pcie_ipc_all_reduce"} if name == "allreduce" else set())
    if curves and (not name or any(key.split("/", 1)[0] in wanted for key in curves)):
        prov = "probe"
    else:
        prov = "public:pcie-rtx6kpro-nccl-allreduce-8gpu" if hw.interconnect != "nvlink" else "datasheet-prior"
    m = hw.corrections.get("collective", 1.0)
    return prov if m == 1.0 else f"{prov}; measured-run x{m:.3g}"


_PROVENANCES: dict = {}  # (id(hw), "class/dtype/bucket") -> (hw, its rates table, provenance): used(), across plans


def used(hw: HardwareProfile, steps_rates_ms: list[dict[str, float]], share: float = 0.01) -> dict[str, str]:
    """The entries that carried more than `share` of some step's time, with their provenance (remembered per box
    object and its rates table object: a collective's reads only the box, the others' only the table)."""
    table = rates_table(hw)
    out: dict[str, str] = {}
    for by_rate in steps_rates_ms:
        total = sum(by_rate.values())
        for key, ms in by_rate.items():
            if total <= 0 or ms <= share * total or key in out:
                continue
            hit = _PROVENANCES.get((id(hw), key))
            if hit is not None and hit[0] is hw and hit[1] is table:
                out[key] = hit[2]
                continue
            op_class, dtype, bucket = key.split("/", 2)
            if op_class == "collective":
                out[key] = collective_provenance(hw, bucket)
            else:
                out[key] = table.get(op_class, dtype, bucket).provenance
            if len(_PROVENANCES) >= 4096:
                _PROVENANCES.clear()
            _PROVENANCES[(id(hw), key)] = (hw, table, out[key])
    return dict(sorted(out.items()))
