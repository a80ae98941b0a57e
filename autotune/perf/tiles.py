"""Tiles and waves: what a kernel's grid of thread blocks (CTAs) costs beyond its FLOPs and bytes.

A kernel runs its CTAs in waves of (SMs x CTAs resident per SM); the last wave may be partly empty (wave
quantisation, NVIDIA "Matrix Multiplication Background User's Guide", section "Wave quantization":
https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/). Two effects follow:
- a GEMM whose output tiles do not fill the SMs computes at tiles / SMs of the large-shape rate
  (gemm_tile_efficiency);
- a tiled attention kernel pays a fixed time per wave of CTAs (load Q, the first K/V block, store O: dependent
  round trips to device memory that no other CTA on the SM hides), so a batch of many short sequences costs
  waves x CTA_FIXED_US however few its FLOPs (attention_waves).
Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

# Streaming multiprocessors per GPU (public datasheets / whitepapers; CUDA cores / 128 per SM on Ada and
# Blackwell consumer/workstation parts, whose datasheets list cores, not SMs):
# A100 / A800: 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, table 1).
# H100 SXM5 132, H100 PCIe 114 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, table 3); H800 PCIe as
# H100 PCIe; H200 (SXM and NVL): 132, the same GH100 configuration as H100 SXM5 (H200 datasheet: same compute).
# H20: 78 (public spec listings of the China-market part; confidence M).
# L40S 18,176 cores -> 142; L20 11,776 -> 92; L4 7,424 -> 58; RTX 4090 16,384 -> 128 (product datasheets).
# B200: 148 (CUDA deviceQuery reports of DGX B200; confidence M).
# RTX PRO 6000 Blackwell 24,064 cores -> 188; RTX 5090 21,760 -> 170 (product datasheets).
SMS_BY_NAME = (
    (r"RTX PRO 6000", 188),
    (r"RTX 5090", 170),
    (r"RTX 4090", 128),
    (r"\bL40S?\b", 142),
    (r"\bL20\b", 92),
    (r"\bL4\b", 58),
    (r"A[18]00", 108),
    (r"H[18]00.*PCIe", 114),
    (r"\bH20\b", 78),
    (r"H[128]00", 132),
    (r"B[23]00", 148),
)
# an unlisted NVIDIA GPU: its architecture's most common part above; other vendors' chips (AI cores, CUs) are
# not modelled by these CTA rules: 0, no wave terms
SMS_BY_ARCH = {"sm_80": 108, "sm_89": 142, "sm_90": 132, "sm_100": 148, "sm_120": 188}
SMS_DEFAULT = 0

# GEMM output tile (rows x columns of C one CTA computes): 128 x 128, vLLM's cutlass_scaled_mm sm90 FP8 config
# for M > 128 (csrc/quantization/cutlass_w8a8/c3x/scaled_mm_sm90_fp8_dispatch.cuh, sm90_fp8_config_default:
# TileShape 128x128x128) and CUTLASS 3.x's usual large-shape tile. Libraries pick smaller or split-K tiles for
# skinny shapes; those are memory bound, where the tile efficiency does not decide the time.
GEMM_TILE = (128, 128)

# Fixed time of one wave of narrow-dtype (FP8) GEMM output tiles beyond the first (the first is in the kernel's
# minimum time, rates.MIN_US): the tile's pipeline fill, the scale epilogue and the store, which a short K loop does
# not amortise. From calibration.yaml kernel-deepgemm-h800-grouped (DeepGEMM dense FP8 on H800, 132 SMs, 128 x 128
# tiles): at m=4096, n=32768, k=512 (8,192 tiles, 62 waves) 590 TFLOPS, 233 us, where the same kernel's large-K
# rate (1,304 TFLOPS at n=4096 k=7168) gives 105 us: 2.0 us per wave; n=7168 k=2048 (13.6 waves) and n=24576
# k=1536 (46.5 waves) give 1.8 and 1.6 us. 2.0 is used.
GEMM_WAVE_FIXED_US = 2.0

# Attention CTAs (vLLM's FlashAttention, vllm/vllm_flash_attn/cute/interface.py): one per (sequence, KV head,
# query block) with GQA packing, total_mblocks = batch x kv heads x m-blocks (:474-475); decode splits the KV only
# while total_mblocks < SMs (num_splits = min(SMs // total_mblocks, ...), :387-398), so a batch with at least one
# CTA per SM runs unsplit, in ceil(CTAs / SMs) waves; prefill query blocks are 128 rows (m_block_size=128, :206).
# One CTA per SM at a time (their shared-memory tiles), a prior.
ATTENTION_Q_BLOCK = 128
# Fixed time of one wave of attention CTAs: three dependent device-memory round trips (Q, the first K/V block,
# the O store) of ~0.5-0.7 us each plus the pipeline's setup: 2 us, a prior (no public per-CTA figure).
CTA_FIXED_US = 2.0
# Fixed time of one wave of prefill CTAs of FA3 on sm_90 over a paged KV cache whose page is shorter than the
# kernel's KV block (engine profile fa3_paged_kv_non_tma_archs): FA3 then takes its PagedKVNonTMA path (vLLM's fork
# vllm-project/flash-attention, commit 617264c: hopper/flash_api.cpp get_pagedkv_tma requires
# `page_size % kBlockN == 0`, :464-474; kBlockN is 128 at head dim 128 causal and 80-128 at the other head dims,
# hopper/tile_size.h tile_size_fwd_sm90), which also forces PackGQA (get_pack_gqa, :476-479). On that path no tile
# load or store is a TMA copy: the producer warpgroup (128 threads instead of one warp,
# mainloop_fwd_sm90_tma_gmma_ws.hpp:124) gathers K/V rows with cp.async after reading the page table
# (Use_TMA_KV = !PagedKVNonTMA, :59), Q is loaded by threads (Use_TMA_Q is false for PackGQA with kBlockH 1,
# :54-58) and a varlen O is stored by threads (Use_TMA_O needs !Varlen, epilogue_fwd.hpp:38): each query tile
# starts and ends with more dependent round trips. From calibration.yaml kernel-fa3-vllm-paged-prefill-hopper
# (flagos-ai/FlagGems#4956: vLLM's FA3, paged KV of 16-token blocks, causal, head dim 128, 32 heads, batch 4 at
# 2k / 4k / 8k): 2,048 / 4,096 / 8,192 CTAs in 15.5 / 31.0 / 62.1 waves of 132 take 20.2 / 35.0 / 64.6 us per wave
# for 8.5 / 16.5 / 32.5 computed 128 x 128 blocks per CTA: a line of 1.85 us per block
# (rates.FA3_PAGED_KV_PREFILL_SPEED) and 4.5 us per wave, where the FA3 paper's contiguous (TMA) curve
# (kernel-fa3-h100-fwd-headdim, 2,048 CTAs at every length) gives 1.70-1.77 us per block and 2.0-2.5 us per wave.
FA3_PAGED_CTA_FIXED_US = 4.5
# Causal prefill computes every KV block a query block touches whole (FlashAttention masks inside the diagonal
# block, it does not skip its upper half): a query attends on average half a block of masked keys beyond its
# prefix, ATTENTION_KV_BLOCK / 2 = 64 entries (n_block_size=128 with m_block_size=128, interface.py:206).
ATTENTION_KV_BLOCK = 128
# vLLM runs decode batches in full CUDA graphs (cudagraph_mode FULL_AND_PIECEWISE) and, where the FlashAttention
# kernel is FA3 (aot_schedule = fa_version == 3: v1/attention/backends/flash_attn.py:722; FA3 is the default on
# sm_90, v1/attention/backends/fa_utils.py:99-101), caps the KV splits of a captured batch at
# attention_config.flash_attn_max_num_splits_for_cuda_graph = 32 (config/attention.py:66; flash_attn.py:773-779
# and :864-874, the same cap in the MLA backend: v1/attention/backends/mla/flashattn_mla.py:155-175, :225-235).
# FA3 keeps one split while a sequence's KV spans at most 4 blocks (hopper/heuristics.h, `if (num_n_blocks <= 4)
# return 1;`, quoted in Dao-AILab/flash-attention#2445). A decode batch of few (sequence, KV head) pairs then runs
# on pairs x 32 CTAs however many SMs the GPU has (vllm-project/vllm#35899: "with 1 KV head per device and batch
# size 1 on an H100 (132 SMs) ... the default of 32 splits still leaves 100 SMs unused").
FA3_GRAPH_MAX_SPLITS = 32
FA3_ONE_SPLIT_BLOCKS = 4
# Prefill attention kernels that pack a KV head's query heads into one CTA's rows: FA3 on sm_90 always packs a
# varlen batch (flash-attention hopper/heuristics.h should_pack_gqa: `if (varlen_q) return true;`; vLLM's prefill
# is varlen), FA4 / CuTe on sm_100 packs when q_per_kv > 1 (vllm_flash_attn/cute/interface.py:869-870). FA2, which
# vLLM runs on sm_80 / sm_89 / sm_120 (v1/attention/backends/fa_utils.py:99-106), swaps query heads into rows for
# single-token queries only (flash-attention csrc/flash_attn/flash_api.cpp, seqlenq_ngroups_swapped when
# max_seqlen_q == 1): a prefill CTA holds one query head.
PACKED_GQA_PREFILL_ARCHS = ("sm_90", "sm_100")
# Query rows per CTA tile of a latent-MLA decode kernel: a latent KV is one KV head, so every query head of the
# rank and every verified token of a sequence are rows of one tile, padded to whole tiles, and the kernel computes
# the padding. sm_90, both engines' default (vLLM FLASH_ATTN_MLA: vllm/platforms/cuda.py:147, FA3 with head dim 64
# + 512 latent: hopper/tile_size.h tile_size_fwd_sm90 `if (headdim_v == 512) return {64, 64, ...}`; SGLang's fa3)
# and FlashMLA / FlashInfer's sm_90 MLA: 64 rows. deepseek-ai/FlashMLA#30 measures it on H20 (calibration id
# kernel-flashmla-h20-decode): 16 heads x 1-4 tokens (16-64 rows) take the same 0.60-0.61 ms, 5 tokens (80 rows)
# 1.17 ms. Triton MLA (the engines' sm_120 default): blocks of 16 heads (vllm
# v1/attention/ops/triton_decode_attention.py:329-331, VALID_BLOCK_H). Other (kernel, arch): no padding modelled
# (vLLM's sm_100 FLASHINFER_MLA: its trtllm-gen tile is not in the Python source).
MLA_DECODE_Q_TILE = {("auto", "sm_90"): 64, ("flashinfer", "sm_90"): 64}
TRITON_MLA_HEAD_BLOCK = 16
# Fixed time of one latent-MLA decode call, us, where a public figure gives it: FlashInfer's sm_90 MLA kernel
# (BatchMLAPagedAttentionWrapper backend "auto" = its FA3 template on sm_90, what SGLang's flashinfer MLA backend
# builds, srt/layers/attention/flashinfer_mla_backend.py:305-307 and :355-363) is one cooperative launch whose CTAs
# compute the KV splits, meet at a grid-wide barrier and merge the partial outputs (include/flashinfer/attention/
# mla_hopper.cuh: grid.sync() then DevicePersistentMergeStates). calibration.yaml kernel-flashinfer-mla-sm90-h200
# (sword-k-w/flashinfer-mla, H200, BF16, 128 heads, 512 + 64 latent, page 64, under a CUDA graph): 14.87 us at
# 2 sequences x 1,024 keys, of which the op list's FLOP / byte terms are ~1 us: 13.9 us fixed (its attention stage
# alone 9.19, its merge alone 5.36), against the floor (rates.MIN_US["attention"] a kernel) the op list charges every
# decode kernel. The call is one cooperative launch (KV splits, grid barrier, merge: flashinfer mla_hopper.cuh), so
# the op list counts it as one kernel (oplist._kernel_ops), not ATTENTION_DECODE_LAUNCHES' split kernel and combine.
# Other (kernel, arch): the floor alone.
MLA_DECODE_FIXED_US = {("flashinfer", "sm_90"): 13.9}


def mla_decode_q_tile(kernel: str, arch: str) -> int:
    """Query rows per tile of the latent-MLA decode kernel `kernel` runs on `arch` (0: no padding modelled)."""
    if kernel == "triton" and arch.startswith("sm_"):
        return TRITON_MLA_HEAD_BLOCK
    return MLA_DECODE_Q_TILE.get((kernel, arch), 0)


def mla_decode_fixed_waves(kernel: str, arch: str, floor_us: float) -> float:
    """The latent-MLA decode kernel's fixed time beyond the attention floor `floor_us` (MLA_DECODE_FIXED_US), in
    waves of CTA_FIXED_US (the unit of the op list's zero-work attention `wave` terms); 0 where none is known."""
    fixed = MLA_DECODE_FIXED_US.get((kernel, arch), 0.0)
    return (fixed - floor_us) / CTA_FIXED_US if fixed > floor_us else 0.0


def padded_rows(rows: float, tile: int) -> float:
    """`rows` rounded up to whole tiles of `tile` rows (rows unchanged without a tile)."""
    return math.ceil(rows / tile) * tile if tile > 0 and rows > 0 else rows


# FA2's prefill over a paged KV cache (vLLM passes a block_table) always runs its split-KV kernel
# (vllm-project/flash-attention commit 617264c, csrc/flash_attn/flash_api.cpp mha_varlen_fwd: `run_mha_fwd(params,
# stream, paged_KV)`, :798, whose force_split_kernel picks run_mha_fwd_splitkv_dispatch, :287-297), with one split
# (`num_splits <= 1` for varlen paged KV, :763), i.e. run_mha_fwd_splitkv_align: 64 query rows x 64 keys (128 at head
# dim <= 64), 4 warps (csrc/flash_attn/src/flash_fwd_launch_template.h:173-178). A CTA holds 64 rows of one query
# head, against 128 packed rows above.
FA2_PAGED_Q_BLOCK = 64


# vLLM's FlashAttention-2 decode over its paged KV cache (the `auto` kernel on the engine profile's
# fa2_decode_archs: sm_80 / sm_86 / sm_89 / sm_120), vllm-project/flash-attention commit 617264c,
# csrc/flash_attn/flash_api.cpp mha_varlen_fwd. vLLM runs a step's whole batch in one call with max_seqlen_q = its
# longest query (vllm/v1/attention/backends/flash_attn.py:1317, the call at :1427-1462) and passes num_splits =
# max_num_splits = 0 for FA2 (its CUDA-graph split cap is set for FA3 only: :714, :722, :759-779, :864-877).
# - Swapped (a batch of one-token queries with more query than KV heads, no sliding window: seqlenq_ngroups_swapped,
#   :646-652): a KV head's query heads become the rows of one 64-row query block, and only then is the KV split
#   (set_params_splitkv, :756-761): num_splits_heuristic (:307-341) over batch x KV heads x query blocks, with twice
#   the SMs as its slots ("128 threads per block", :361), at most 128 splits over blocks of 256 / 128 / 64 keys at
#   head dim <= 64 / <= 128 / above (:348; flash_fwd_launch_template.h:184): one split once the tiles reach 0.8 of
#   the slots, else the fewest whose wave efficiency is within 0.85 of the best (a split count that leaves the blocks
#   per split unchanged is skipped). The kernel counts the longest sequence's blocks; the op list has the mean's.
# - Otherwise (MHA decode; a speculative verify; a step that carries a prompt too) the KV is never split (`num_splits
#   <= 1` for varlen paged KV, :762-765) and the heads are not packed: one CTA per (64-row query block, sequence,
#   query head) (flash_fwd_launch_template.h:107) walks its KV head's whole cache alone. Flash-Decoding's A100
#   table (pytorch.org/blog/flash-decoding, FlashAttention v2.0.9, 16 query heads over 2 KV heads, batch 1, 65,536
#   and 131,072 keys: 2,300.6 and 4,592.2 us) shows such a grid streaming at a fixed rate per CTA, 14.6 GB/s for
#   the 33.5 MB of K and V each of its 16 CTAs walks; that release's kernel moves 64 keys a step where vLLM's
#   paged one moves 128 at head dim 128, so the op list keeps rates.PER_SM_STREAM_GBS per CTA (decode_fill_speed).
#   Unpacked, a KV head's cache is walked once per query head, by CTAs that share it through L2 when they run
#   together: the op keeps its bytes at one read of the KV and its SMs at min(CTAs, SMs) x that rate over the reads.
FA2_SPLIT_SLOTS_PER_SM = 2
FA2_MAX_SPLITS = 128
FA2_ONE_SPLIT_FILL = 0.8
FA2_SPLIT_EFFICIENCY = 0.85


def fa2_kv_block(head_dim: float) -> int:
    """Keys per block of FA2's split-KV kernel at head dim `head_dim` (flash_fwd_launch_template.h:184)."""
    return 256 if head_dim <= 64 else (128 if head_dim <= 128 else 64)


@lru_cache(maxsize=4096)
def fa2_num_splits(tiles: int, slots: int, kv_blocks: int) -> int:
    """KV splits FA2's num_splits_heuristic picks for `tiles` (sequence, KV head, query block) tiles on `slots`
    CTA slots (2 x SMs) over `kv_blocks` KV blocks (above); remembered, as a step asks per decode op."""
    if tiles >= FA2_ONE_SPLIT_FILL * slots:
        return 1
    efficiency: dict[int, float] = {}
    for splits in range(1, min(FA2_MAX_SPLITS, slots, kv_blocks) + 1):
        if splits > 1 and math.ceil(kv_blocks / splits) == math.ceil(kv_blocks / (splits - 1)):
            continue  # the same blocks per split as one split fewer
        waves = tiles * splits / slots
        efficiency[splits] = waves / math.ceil(waves)
    best = max(efficiency.values(), default=0.0)
    return next((s for s, e in efficiency.items() if e >= FA2_SPLIT_EFFICIENCY * best), 1)


def fa2_swapped_splits(seqs: float, kv_heads: float, q_per_kv: float, entries: float, head_dim: float, sms: int) -> int:
    """KV splits of a swapped FA2 decode call (above): fa2_num_splits over its (sequence, KV head, query block)
    tiles at `entries` attended KV entries; 1 without an SM count."""
    if seqs <= 0 or sms <= 0:
        return 1
    tiles = math.ceil(seqs * kv_heads * math.ceil(q_per_kv / FA2_PAGED_Q_BLOCK))
    return fa2_num_splits(tiles, FA2_SPLIT_SLOTS_PER_SM * sms, max(1, math.ceil(entries / fa2_kv_block(head_dim))))


def fa2_decode_streams(
    seqs: float, rows_per_seq: float, kv_heads: float, q_per_kv: float, splits: int, sms: int, swapped: bool
) -> float:
    """CTAs of vLLM's FA2 decode call that stream KV at once, per time each (sequence, KV head)'s KV is read (its
    query heads when not swapped): min(CTAs, SMs) / reads, `splits` KV splits when swapped (fa2_swapped_splits).
    The op list costs the KV once at rates.decode_fill_speed of this; 0 without an SM count."""
    if seqs <= 0 or sms <= 0:
        return 0.0
    if swapped:
        return min(seqs * kv_heads * math.ceil(q_per_kv / FA2_PAGED_Q_BLOCK) * splits, sms)
    return min(fa2_unpacked_ctas(seqs, rows_per_seq, kv_heads, q_per_kv), sms) / max(1.0, q_per_kv)


def fa2_unpacked_ctas(seqs: float, rows_per_seq: float, kv_heads: float, q_per_kv: float) -> float:
    """CTAs of an unswapped FA2 call's decode rows: sequences x query heads x 64-row query blocks (above)."""
    return seqs * kv_heads * q_per_kv * math.ceil(rows_per_seq / FA2_PAGED_Q_BLOCK) if seqs > 0 else 0.0


# Kernels of one split-KV decode attention call: the split kernel and the combine that merges its partial outputs
# (FA3: hopper/flash_api.cpp mha_fwd, `if (params.num_splits > 1) { ... run_mha_fwd_combine(...) }`; FA2:
# flash_fwd_launch_template.h:136, `if (params.num_splits > 1)`), each an Op.count launch at rates.MIN_US["attention"].
# Kernels that split to fill the SMs are taken to split (the prior's two launches); FA2's own split rule below.
ATTENTION_DECODE_LAUNCHES = 2
# Kernels of one prefill attention call: one. FA2 over vLLM's paged KV runs one split (FA2_PAGED_Q_BLOCK above:
# `num_splits <= 1` for varlen paged KV), so no combine; FA3 splits only when the tiles fill under 0.8 of the SMs and
# the KV exceeds 4 blocks (hopper/heuristics.h num_splits_heuristic: a short chunk over a long cached prefix at high
# TP); that combine is not counted, a simplification. Its floor (rates' attention/bf16/prefill min_us) is a prior of
# its own, the 6 us the model gave a whole attention call before kernels were counted (rates.MIN_US["attention"] x
# ATTENTION_DECODE_LAUNCHES): no public small-prefill kernel time is at hand.
PREFILL_LAUNCHES = 1.0
PREFILL_ATTENTION_MIN_US = 6.0


def fa2_decode_launches(splits: int) -> float:
    """Kernels an FA2 decode call with `splits` KV splits launches (Op.count): the split kernel and its combine, or
    the one kernel unsplit."""
    return float(ATTENTION_DECODE_LAUNCHES) if splits > 1 else 1.0


# The swap's copies (flash_api.cpp mha_varlen_fwd, vLLM passing `out`): the kernel writes a temporary output that
# one copy_ moves into `out` (:693-699, :805-815); the query's reshape of its head-transposed view (:649) and, with
# one split, the softmax LSE's (:832) cannot be views once the batch and the KV heads both exceed one (the merged
# dimensions' strides differ), so each runs one more copy kernel: elementwise ops at rates.MIN_US["elementwise"].
def fa2_swap_copies(seqs: float, kv_heads: float, splits: int) -> tuple[int, int]:
    """(copy kernels, of which moving a query-sized tensor) a swapped FA2 decode call runs (above)."""
    strided = seqs > 1 and kv_heads > 1
    return 1 + strided + (strided and splits <= 1), 1 + strided


def prefill_q_block(arch: str) -> int:
    """Query rows of one prefill attention CTA on `arch`: FA3 / FA4's 128 packed rows on
    PACKED_GQA_PREFILL_ARCHS, FA2's paged split-KV tile of 64 rows of one head elsewhere."""
    return ATTENTION_Q_BLOCK if arch in PACKED_GQA_PREFILL_ARCHS else FA2_PAGED_Q_BLOCK


# CUTLASS tiles of vLLM's narrow-dtype GEMMs on sm_120 (RTX PRO 6000 / RTX 5090), cluster 1x1x1, no split-K:
# NVFP4 one config, 128 x 128 (x 128) at every M (vllm csrc/quantization/fp4/nvfp4_scaled_mm_sm120_kernels.cu,
# cutlass_scaled_fp4_mm_sm120a: MmaTileShape Shape<_128,_128,_128>; github.com/vllm-project/vllm commit
# 06f9c24); FP8 by M: 16 x 64 to M 16, 32 x 64 to 32, 64 x 64 to 256, 128 x 128 above (csrc/quantization/w8a8/
# cutlass/c3x/scaled_mm_sm120_fp8_dispatch.cuh, cutlass_gemm_sm120_fp8_dispatch; commit 3da1af5). A CTA computes
# its whole tile however few of its rows are real, and one CTA runs one tile's whole K loop on one SM.
SM120_FP4_TILE = (128, 128)
SM120_FP8_TILES = ((16, (16, 64)), (32, (32, 64)), (256, (64, 64)), (math.inf, (128, 128)))


# Output tiles of vLLM's per-tensor FP8 GEMM (cutlass_scaled_mm, the kernel Fp8LinearMethod runs with dynamic
# per-token activation scales: CutlassFP8ScaledMMLinearKernel) on sm_89, sm_90 and sm_100, by shape, written here as
# (rows along m, columns along n). The small-m configs of sm_90 / sm_100 swap A and B (swap_ab): the kernel's M tile
# then runs along n. One CTA runs one output tile's whole K loop on one SM (no split-K or stream-K:
# PersistentScheduler on sm_90, the default tile scheduler on sm_100; on sm_89 one K slice per tile,
# csrc/quantization/w8a8/cutlass/scaled_mm_c2x.cuh cutlass_gemm_caller: kGemmSplitKParallel with a split count of
# 1), so a GEMM of few tiles and a long K takes at least one tile's K loop.
# sm_90 (csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh, cutlass_gemm_sm90_fp8_dispatch;
# github.com/vllm-project/vllm commit c30af86): m <= 16: TileShape 64x16x256 swapped (sm90_fp8_config_M16_N1280 /
# M16_N8192); m <= 64: 64x16x256 swapped for n <= 1280 (M64_N1280), 64x64x256 swapped above (M64_N8192); m <= 128:
# 64x128x128 (M128); m >= 8192 and k >= 6144: 256x128x128 (M8192_K6144); else 128x128x128 (default).
# sm_100 (scaled_mm_sm100_fp8_dispatch.cuh, cutlass_gemm_sm100_fp8_dispatch; commit 487e7b0): m <= 16: 128x32x128
# swapped (M16_swap_ab); m <= 64: 64x64x128 when m == 64 and k < 4096 (M64), else 128x64x256 swapped
# (M64_swap_ab); m <= 256: 128x128x128 (M256); above, 256x128x128 on a 2x2 cluster (default), a 2-SM MMA whose
# CTA pair splits the 256 rows: 128 per SM.
# sm_89 (CUTLASS 2.x, csrc/quantization/w8a8/cutlass/scaled_mm_c2x_sm89_fp8_dispatch.cuh,
# cutlass_gemm_sm89_fp8_dispatch; commit ae36150): by m's power of two (at least 16), then by n's (np2), GemmShape
# (rows, columns): m <= 16: 16x64 to np2 8192, 16x128 to 24576, 32x64 above (sm89_fp8_config_M16); m <= 32: 32x64 /
# 32x128 to 16384 / 32x64 (M32); m <= 64: 64x64 to 8196, 64x128 to 16384, 64x64 above (M64); m <= 128: 64x128 to
# 8192, 128x128 to 16384, 128x64 above (M128); m <= 256: 64x128 to 4096, 128x128 above (M256); above: 128x128 to
# 4096, 256x128 to 8192, 128x128 above (default). Rows: (m bound, tile to the first n bound, tile to the second,
# (first, second n bounds), tile above).
SM89_FP8_TILES = (
    (16, (16, 64), (16, 128), (8192, 24576), (32, 64)),
    (32, (32, 64), (32, 128), (8192, 16384), (32, 64)),
    (64, (64, 64), (64, 128), (8196, 16384), (64, 64)),
    (128, (64, 128), (128, 128), (8192, 16384), (128, 64)),
    (256, (64, 128), (128, 128), (4096, math.inf), (128, 128)),
    (math.inf, (128, 128), (256, 128), (4096, 8192), (128, 128)),
)


# Smallest output tile of the CuTe-DSL NVFP4 GEMM vLLM runs on sm_100 (FlashInfer mm_fp4 backend="cute-dsl",
# CUTLASS's Sm100BlockScaledPersistentDenseGemmKernel: flashinfer/gemm/kernels/dense_blockscaled_gemm_sm100.py,
# github.com/flashinfer-ai/flashinfer, added in flashinfer#2540), written here as (rows along m, columns along n).
# Its tactics sweep the MMA tile (kernel M x N) over 128 x 64, 256 x 64, 128 x 128 ... 256 x 256, clusters up to
# 4 x 4 and swap-AB (kernel M along n when m <= 128), with no split-K: one CTA runs one output tile's whole K loop
# (the NVFP4 dense runner's get_valid_tactics, NVIDIA/TensorRT-LLM tensorrt_llm/_torch/custom_ops/
# cute_dsl_custom_ops.py, commit 3f6bafa). Whatever tactic the autotuner takes, a CTA computes at least 128 x 64
# outputs over the whole K: swap-AB at small m puts the 128 along n, the 64 along m.
CUTE_DSL_FP4_MIN_TILE = (64, 128)
# Bytes one NVFP4 operand element brings into shared memory: the 4-bit value and its E4M3 scale per 16 elements.
NVFP4_OPERAND_BYTES = 0.5 + 1.0 / 16


def cutlass_fp8_tile(arch: str, m: float, n: float, k: float) -> tuple[int, int] | None:
    """(rows along m, columns along n) of the output tile one SM computes in vLLM's per-tensor FP8 CUTLASS GEMM of
    m x n outputs and reduction width k on `arch` (the dispatches above); None on other archs."""
    if arch == "sm_90":
        if m <= 16:
            return (16, 64)
        if m <= 64:
            return (16, 64) if n <= 1280 else (64, 64)
        if m <= 128:
            return (64, 128)
        return (256, 128) if m >= 8192 and k >= 6144 else (128, 128)
    if arch == "sm_89":
        np2 = 1 << max(0, math.ceil(math.log2(max(n, 1.0))))
        for bound, small, mid, mid_bound, large in SM89_FP8_TILES:
            if m <= bound:
                return small if np2 <= mid_bound[0] else mid if np2 <= mid_bound[1] else large
    if arch == "sm_100":
        if m <= 16:
            return (32, 128)
        if m <= 64:
            return (64, 64) if m == 64 and k < 4096 else (64, 128)
        return (128, 128)
    return None


def kloop_cta(k: float, tile: tuple[int, int], in_bytes: float) -> tuple[float, float]:
    """(FLOPs, bytes its SM receives) of one CTA running one output `tile`'s whole K loop of reduction width `k`:
    the whole tile is computed however few of its rows or columns are real, and every k-step brings the tile's
    A and B slices (`in_bytes` per element) into the SM's shared memory (a cluster's TMA multicast splits who
    issues a shared slice, not what each SM receives). (0, 0) for k <= 0."""
    if k <= 0:
        return 0.0, 0.0
    rows, cols = tile
    return 2.0 * rows * cols * k, k * in_bytes * (rows + cols)


def sm120_narrow_tile(dtype: str, m: float) -> tuple[int, int] | None:
    """(rows, columns) of the output tile vLLM's sm_120 CUTLASS GEMM of `dtype` takes at `m` rows; None for a
    dtype without one listed above."""
    if dtype == "fp4":
        return SM120_FP4_TILE
    if dtype != "fp8":
        return None
    for bound, tile in SM120_FP8_TILES:
        if m <= bound:
            return tile
    return SM120_FP8_TILES[-1][1]


def tile_bound_speed(m: float, n: float, tile: tuple[int, int], sms: int, tflops: float, peak_tflops: float) -> float:
    """Speed, relative to computing an m x n output's FLOPs at `tflops` over the whole GPU, of a GEMM whose CTAs
    each compute one whole `tile` (rows padded up to the tile, counted fractionally above one tile, as
    gemm_tile_efficiency does) on one SM at that SM's share of the datasheet peak `peak_tflops`, in waves of
    one CTA per SM: min(1, full-GPU time / tile-bound time). K cancels out. 1 without SMs or rates."""
    if m <= 0 or n <= 0 or sms <= 0 or tflops <= 0 or peak_tflops <= 0:
        return 1.0
    ctas = max(1.0, m / tile[0]) * math.ceil(n / tile[1])
    waves = max(1.0, ctas / sms)
    return min(1.0, (m * n / tflops) / (waves * tile[0] * tile[1] * sms / peak_tflops))


@lru_cache(maxsize=256)
def sm_count(name: str, arch: str) -> int:
    """SMs of the GPU named `name` (NVML name), or its architecture's default; 0 for a non-NVIDIA architecture.
    Remembered per (name, arch): every Context asks (opcore.context), and the name patterns are regexes."""
    if arch not in SMS_BY_ARCH:
        return SMS_DEFAULT
    for pattern, sms in SMS_BY_NAME:
        if re.search(pattern, name, re.IGNORECASE):
            return sms
    return SMS_BY_ARCH.get(arch, SMS_DEFAULT)


def gemm_tile_efficiency(m: float, n: float, sms: int) -> float:
    """Share of the SMs a GEMM of m x n outputs keeps busy: tiles / SMs while its tiles do not fill one wave, else 1
    (and 1 on a GPU without an SM count). Rows count fractionally and the later waves' tail is left out: the model
    costs mean batches, and a step in m would set the steady state apart from the simulator's whole steps."""
    if m <= 0 or n <= 0 or sms <= 0:
        return 1.0
    tiles = m / GEMM_TILE[0] * math.ceil(n / GEMM_TILE[1])
    return min(1.0, tiles / sms)


def gemm_extra_waves(m: float, n: float, sms: int) -> float:
    """Waves of an m x n GEMM's output tiles beyond the first (rows counted fractionally, as gemm_tile_efficiency
    does); 0 on a GPU without an SM count."""
    if m <= 0 or n <= 0 or sms <= 0:
        return 0.0
    waves = m / GEMM_TILE[0] * math.ceil(n / GEMM_TILE[1]) / sms - 1.0
    return waves if waves > 0.0 else 0.0  # max(0.0, waves) without the call (every FP8 GEMM op asks)


def attention_waves(ctas: float, sms: int) -> float:
    """Waves of `ctas` attention CTAs at one per SM (0 when there are none, or on a GPU without an SM count)."""
    return math.ceil(ctas / sms) if ctas > 0 and sms > 0 else 0.0


def attention_ctas(seqs: float, rows_per_seq: float, kv_heads: float, q_per_kv: float) -> float:
    """CTAs of a FlashAttention call: sequences x KV heads x query blocks, the query heads of a KV head packed
    into the block's rows (pack_gqa defaults on when q_per_kv > 1: vllm_flash_attn/cute/interface.py:869-870)."""
    if seqs <= 0:
        return 0.0
    return seqs * kv_heads * math.ceil(rows_per_seq * q_per_kv / ATTENTION_Q_BLOCK)


def prefill_ctas(arch: str, seqs: float, rows_per_seq: float, kv_heads: float, q_per_kv: float) -> float:
    """CTAs of a prefill attention call on `arch`: attention_ctas where the kernel packs a KV head's query heads
    (PACKED_GQA_PREFILL_ARCHS), else sequences x query heads x blocks of FA2_PAGED_Q_BLOCK rows."""
    if arch in PACKED_GQA_PREFILL_ARCHS:
        return attention_ctas(seqs, rows_per_seq, kv_heads, q_per_kv)
    if seqs <= 0:
        return 0.0
    return seqs * kv_heads * q_per_kv * math.ceil(rows_per_seq / FA2_PAGED_Q_BLOCK)


def causal_diagonal_entries(entries: float) -> float:
    """Masked KV entries a causal prefill query computes beyond the `entries` it attends (0 without any)."""
    return min(entries, ATTENTION_KV_BLOCK / 2) if entries > 0 else 0.0


def prefill_rows_per_seq(tokens: float, ctx: float) -> float:
    """Prompt rows per sequence of `tokens` rows whose mean attended prefix is `ctx`: a chunk of fresh prompts
    attends half its rows on average, so a sequence holds about 2 x ctx of the rows (at least one row)."""
    return min(tokens, max(1.0, 2.0 * ctx))


def decode_split_ctas(mblocks: float, ctx: float, sms: int, max_splits: int) -> float:
    """CTAs a split-KV decode kernel runs for `mblocks` (sequence, KV head, query block) tiles at mean context
    `ctx` when it splits each tile's KV at most `max_splits` ways (FA3 under vLLM's CUDA graphs, above): one split
    for a KV of at most FA3_ONE_SPLIT_BLOCKS blocks, else as many as fill the SMs, capped; 0 without an SM count."""
    if mblocks <= 0 or sms <= 0:
        return 0.0
    blocks = math.ceil(ctx / ATTENTION_KV_BLOCK) if ctx > 0 else 1
    if blocks <= FA3_ONE_SPLIT_BLOCKS:
        return float(mblocks)
    splits = max(1, min(max_splits, sms // max(1, math.ceil(mblocks)), blocks))
    return float(mblocks * splits)


def prefill_longest_cta(
    rows_per_seq: float, ctx: float, q_per_cta: float, q_block: int = ATTENTION_Q_BLOCK
) -> tuple[float, float]:
    """(query rows, KV entries) of the longest CTA of a causal prefill whose sequences hold `rows_per_seq` prompt
    rows at mean attended prefix `ctx`, `q_per_cta` query heads packed per CTA (1 unpacked): the last query block
    of a sequence, at most `q_block` (prefill_q_block) packed rows, attends the sequence's whole prefix and chunk
    (ctx + rows / 2 entries: a chunk's rows attend ctx on average, the last one rows / 2 more)."""
    if rows_per_seq <= 0:
        return 0.0, 0.0
    return min(float(q_block), rows_per_seq * q_per_cta), ctx + rows_per_seq / 2.0
