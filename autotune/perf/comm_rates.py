"""Constants of the collective model (perf/comm.py), each with its public source.

Calibration ids refer to shared/reference/calibration.yaml (pcie-rtx6kpro-nccl-allreduce-8gpu) or to this
project's autotune/catalog/calibration.yaml (the other ids). NCCL lines are NVIDIA/nccl v2.30.7-1
(commit 5067397c); vLLM lines are the vllm 0.34.0 wheel, SGLang lines the sglang 0.5.23 wheel.
"""

from __future__ import annotations

MIB = 1 << 20

# --- NCCL's own tuner model (src/graph/tuning.cc, ncclTunerConstantsDefaults) ---------------------------------
# Ring latency = baseLatencies[RING][proto] + 2(p-1) steps x hwLatencies[hw][RING][proto], microseconds
# (tuning.cc:151 baseLatencies Ring {LL 6.6, LL128 14.0, Simple 8.4}; :159 NVLINK Ring {0.6, 1.9, 3.4};
# :165 PCI Ring {1.0, 2.5, 5.7}). 8 ranks, LL: 6.6 + 14 x 1.0 = 20.6 us, against the public 24-25 us for
# 8 GPUs behind switches (pcie-rtx6kpro-nccl-allreduce-8gpu) and 28.6 us recorded on the rtx-pro-6000-x8 box.
NCCL_BASE_LATENCY_US = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
NCCL_STEP_LATENCY_US = {
    "pcie": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
    "nvlink": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
}
# Bandwidth of a protocol relative to Simple: tuning.cc:327 `busBw = min(llMaxBw, busBw * .5)` for ring LL;
# :329 `busBw * 0.92` (120/128) for ring LL128.
NCCL_PROTO_BANDWIDTH = {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}
# LL128 is on by default only when the ring's intra-node path is NVLink (tuning.cc:530
# `pEnable &= (graphs[a]->typeIntra <= PATH_NVB)`): on PCIe the tuner chooses between LL and Simple.
NCCL_DEFAULT_PROTOS_PCIE = ("LL", "Simple")
NCCL_DEFAULT_PROTOS_NVLINK = ("LL", "LL128", "Simple")

# --- NCCL's ring search on a two-socket AMD host (src/graph/topo.cc, search.cc) ------------------------------------
# NCCL models an AMD host's inter-CPU link at AMD_BW = 16 GB/s whatever the CPU generation (topo.h:26; topo.cc:76-77
# ncclTopoGetInterCpuBw). Its ring search walks the arch's speed list down to the last entry: 18 GB/s when the lowest
# compute capability is >= 10.0 (search.cc:1063 sm100SpeedArrayIntra, chosen at :1157), 3 GB/s for sm_90 (:1057)
# and older (:1051). A ring across the two sockets needs each direction of that link at the searched speed, so with
# Blackwell GPUs on an AMD host the search finds none and falls back to "simple order" at bwIntra 0.1 GB/s, one
# channel, type SYS (search.cc:1293-1310). The tuner rates each protocol with that bandwidth (tuning.cc:324 busBw =
# nChannels x bw, :327 LL x 0.5, :379 x nRanks / nsteps) and its latency table (NCCL_BASE_LATENCY_US,
# NCCL_STEP_LATENCY_US): LL's halved bandwidth loses to Simple past a few KB (8 ranks: ~3.9 KB), so NCCL runs Simple on
# messages LL would carry at its latency. Public: voipmonitor/rtx6kpro optimization/nccl-tuning.md "NCCL Graph XML Fix
# for AMD Turin" (NCCL 2.28.3 on Turin: estimate 0.1 GB/s, SYS/SYS, SIMPLE for small messages; calibration id
# rtx6kpro-amd-turin-nccl-graph-fallback), and the rtx-pro-6000-x8 box's 8-GPU curve (rtx6kpro-asus-nccl-p2p-level):
# 28.6 us at 256 B, 66-86 us at 4-256 KB, where its 4 GPUs on one socket stay at 15-20 us up to 64 KB.
NCCL_AMD_INTER_CPU_GBS = 16.0
NCCL_RING_SEARCH_MIN_GBS = ((100, 18.0), (90, 3.0), (0, 3.0))  # (lowest compute capability from, last speed)
NCCL_FALLBACK_RING_GBS = 0.1
# What a Simple ring step over PCIe takes, where the tuner's 5.7 us (NCCL_STEP_LATENCY_US, which keeps rating the
# protocols) is its estimate: the rtx-pro-6000-x8 box's 8-GPU curve runs Simple from 4 KB on (above), 65.6 / 70.8 /
# 69.3 / 79.5 / 86.2 us at 4 / 8 / 16 / 64 / 256 KB (rtx6kpro-asus-nccl-p2p-level) = 8.4 + 14 steps x (s + the SHM
# extra 0.57) + the wire: s = 3.5 / 3.8 / 3.7 / 4.1 / 3.1, median 3.7 (tests/bench/calibration_check.py FITTED
# simple_step_us; prior NCCL's 5.7). One source: a prior elsewhere.
NCCL_PCIE_SIMPLE_STEP_US = 3.7

# --- NCCL_P2P_LEVEL (src/graph/paths.cc) ---------------------------------------------------------------------
# Path types, nearest first (src/include/graph.h PATH_*). `nvidia-smi topo -m` NODE (between host bridges of
# one socket) is NCCL's PHB: the rtx6kpro ASUS page's NCCL log shows `1[1] -> 2[2] via SHM/direct/direct`
# for a NODE pair at default settings (calibration id rtx6kpro-asus-nccl-p2p-level).
NCCL_PATH_RANK = {"LOC": 0, "NVL": 1, "NVB": 2, "C2C": 3, "PIX": 4, "PXB": 5, "PXN": 6, "P2C": 7, "PHB": 8, "SYS": 9}
NCCL_LABEL_PATH = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
# Legacy integer levels (paths.cc:243 levelsOldToNew = {LOC, PIX, PXB, PHB, SYS, SYS}).
NCCL_LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")
# Default level: paths.cc:356 `int p2pLevel = PATH_PXB` ("don't use P2P across CPU Host Bridges"), raised to
# PATH_SYS only on AMD x86 hosts with at most 2 GPUs (paths.cc:358-362). Default since v2.23.4-1
# (paths.cc:277 there); v2.21.5-1 and older defaulted to PATH_SYS (paths.cc:279). The engines' wheels ship
# NCCL >= 2.27, so an 8-GPU box without switches runs every cross-bridge pair over host shared memory (SHM).
NCCL_DEFAULT_P2P_LEVEL = "PXB"
NCCL_AMD_PAIR_P2P_LEVEL = "SYS"

# SHM chosen by NCCL where hardware P2P works: 4 GPUs on one socket of the rtx-pro-6000-x8 box, 32 MB
# all-reduce busbw 30.3 GB/s at defaults (SHM on the NODE pairs) vs 39.3 GB/s with NCCL_P2P_LEVEL=SYS
# (rtx6kpro-asus-nccl-p2p-level) -> an SHM edge moves 30.3/39.3 of a P2P edge.
NCCL_SHM_VS_P2P = 30.3 / 39.3
# Extra latency per ring step over such an SHM edge: 8-GPU 256 B all-reduce 28.6 us at defaults on the same
# box (rtx-pro-6000-x8 preset curve) = 6.6 + 14 x (1.0 + 0.57) with NCCL's LL constants above.
NCCL_SHM_STEP_EXTRA_US = 0.57
# SHM because the hardware has no P2P (GeForce): NVIDIA/nccl#1530, 8x4090 8 B all-reduce 42-43 us
# = 6.6 + 14 x (1.0 + 1.56).
NO_P2P_STEP_EXTRA_US = 1.56

# --- NCCL channels (NCCL_MIN_NCHANNELS) ----------------------------------------------------------------------
# pcie-rtx6kpro-nccl-allreduce-8gpu: a ring crossing the socket link reaches 22.2 GB/s busbw at NCCL's default
# channel count (Festr, dual Turin, 32 MB) and 37.6 GB/s with NCCL_MIN_NCHANNELS=8 on the same box -> 0.59 of
# the link-bound rate. Rings inside one socket are not channel bound at defaults (Grimulkan, 4 switches on one
# CPU: 40.1 GB/s default vs 39.4 GB/s with NCCL_MIN_NCHANNELS=8).
NCCL_CROSS_SOCKET_DEFAULT_FRACTION = 22.2 / 37.6
# 8 channels reach the link bound on all three public boxes (37.6 / 39.4 / 41.1 GB/s). Below 8 the rate is
# taken as proportional to the channel count (an assumption: no public sweep over channel counts).
NCCL_SATURATING_CHANNELS = 8

# --- Engines' custom all-reduce (vLLM/SGLang P2P kernel) ------------------------------------------------------
# Which kernel each engine runs for which size, arch and world size (the one-/two-shot split, size limits, the
# FlashInfer / symmetric-memory paths of vLLM): the engine profiles' allreduce_paths (capability/profiles/*.py).

# vLLM's two-stage custom kernel (csrc/custom_all_reduce.cuh cross_device_reduce_2stage, vLLM c9eabec): a
# reduce-scatter round (each rank reads its 1/p part from every peer), an end_sync every block waits on, then an
# all-gather round (each rank reads the p-1 peers' reduced parts out of their IPC buffers), both walking the part with
# the kernel's fixed grid (36 blocks x 512 threads x 16 B: capability/profiles/vllm_0_34_0.py CUSTOM_GRID_BYTES).
# vllm-project/vllm#24111 (H100 SXM, TP=4 and TP=6) and #24532 (TP=4), CUDA graphs, ca_2stage at 0.5-4 MiB
# (calibration ids custom-allreduce-h100-tp6-vllm24111, custom-allreduce-h100-tp4-vllm24532) step with the grid's
# passes, not with the bytes: at 4 ranks 17, 18 us (1 pass each round), 25-27, 26-27 (2), 35 (3), 42-43 (4); at 6
# ranks 15, 17, 20 (1), 26, 29 (2), 37 (3). Less the two fixed times that is ~8.4 us per pass at both world sizes,
# though a pass moves (p-1) x 288 KiB per rank (4.2 us at 4 ranks at the one-stage kernel's measured rate, ~390 GB/s
# per rank): a floor per pass of both rounds, the link rate (NVLINK_COLLECTIVE_EFFICIENCY) above it. Fitted on those
# two sources' ca_2stage columns (tests/bench/calibration_check.py FITTED two_stage_wave_us, median log error over the
# 18 rows; prior 0: link-bound). SGLang's two-shot pull is one round (sglang
# kernels/jit/csrc/distributed/custom_all_reduce.cuh:353-382: each thread reads its chunk from every peer, reduces it
# and stores it to every peer, no barrier between), so its profile sets no grid: the link-rate two-shot. Measured on
# Hopper only: other archs take the same floor (a prior; on sm_100 vLLM reaches its custom kernel only past FlashInfer
# and below the symmetric-memory limit, capability/profiles/vllm_0_34_0.py allreduce_paths).
CUSTOM_TWO_STAGE_WAVE_US = 8.5

# --- FlashInfer PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE / VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC) -
# World sizes: sglang pcie_ipc_ar.py:77, vllm flashinfer_pcie_ipc_all_reduce.py:29 `_SUPPORTED_WORLD_SIZES = (2,4,8)`.
PCIE_IPC_WORLD_SIZES = (2, 4, 8)
# Size limit: SGLang sizes the workspace for the widest decode reduction, max_numel = decode width x hidden
# (pcie_ipc_ar.py:258-276), decode width = CUDA-graph decode max_bs x draft tokens (:159-163), fallback width 64
# rows (:81); SGLANG_PCIE_IPC_MAX_NUMEL overrides, default 0 = derive (environ.py:1540). vLLM: the largest
# CUDA-graph capture size x hidden (flashinfer_pcie_ipc_all_reduce.py:126), capture size defaulting to
# min(2 x max_num_seqs x query_len, 512) (config/vllm.py:2398-2405). Larger reductions (prefill chunks) go to NCCL.
PCIE_IPC_FALLBACK_ROWS = 64
# Bandwidth: sglang pcie_ipc_ar.py:16-25, 8x sm_120 host, GPUs 0-3 / 4-7 on two NUMA nodes, no switches, hidden
# 6144 bf16: 12 KiB 5.3 us, 96 KiB 15.3 us, 384 KiB 34.6 us, 100 MiB 8.5 ms (calibration id
# sglang-pcie-ipc-allreduce-8x-sm120). Costed as two-shot traffic (each rank moves 2(p-1)/p of the message,
# 4+4 islands across the sockets) on the link matrix: on that host (one root port per GPU, 63 GB/s Gen5 x16)
# 7/4 x 100 MiB / (63 GB/s x e) = 8.5 ms - L gives e = 0.343 (the fixed time L: engine_ar_latency_us below).
PCIE_IPC_EFFICIENCY = 0.343
# The same fraction from another source, the prior of PCIE_IPC_EFFICIENCY where the sglang rows are held out
# (tests/bench/calibration_check.py FITTED ipc_eff): p2pmark's dense-interconnect test has every GPU read from all its
# peers at once (64 MB cudaMemcpyPeerAsync from each peer concurrently, lukealonso/p2pmark README "Dense Interconnect
# Score"), all-pairs P2P traffic as in the PCIe-IPC kernel. On Festr's dual Turin direct-attach 8x RTX PRO 6000 (two
# NUMA nodes, no switches: the same class of host) it reaches 173.1 GB/s in all (voipmonitor/rtx6kpro
# hardware/pcie-bandwidth.md "p2pmark Scores (8 GPUs)"; calibration id rtx6kpro-p2pmark-dense-interconnect-8gpu):
# 21.6 GB/s per GPU = 0.343 of a Gen5 x16 link (63 GB/s).
PCIE_ALL_PAIRS_P2P_FRACTION = 173.1 / 8 / 63.0

# --- Fixed time of the engines' P2P all-reduce kernels (custom all-reduce, FlashInfer PCIe-IPC) -----------------
# One kernel whose blocks arrive at a barrier on every peer's flag before reading and again after
# (sglang kernels/jit/csrc/distributed/custom_all_reduce.cuh:331-349 one-shot, :364-382 two-shot;
# vllm csrc/custom_all_reduce.cuh barrier_at_start / barrier_at_end): a launch part plus one flag exchange per
# peer, latency = ENGINE_AR_BASE_US + ENGINE_AR_PEER_US x (p - 1), the same form on NVLink and PCIe.
# Fitted on both link types at once (least squares on the 512 B figures, wire time ~0):
# - NVLink, sgl-project/sglang#2904 (H100 SXM, no CUDA graph) 512 fp32 (2 KiB): 3.7 / 4.8 / 5.9 us at p = 2 / 4 / 8 ->
#   intercept 3.50, slope 0.354 us per peer (custom-allreduce-h100-nvlink-sglang2904);
# - PCIe, 8 GPUs: FlashInfer PCIe-IPC 12 KiB 5.3 us (sglang-pcie-ipc-allreduce-8x-sm120, ~1.0 us of it wire) and
#   the rtx6kpro custom PCIe kernel 7.5 us at 256 B - 1 KB (pcie-rtx6kpro-nccl-allreduce-8gpu): their geometric
#   middle, 3.50 + 0.33 x 7 = 5.8 us, gives 0.33 us per peer -- the NVLink slope within 7%, so one figure serves
#   both links (a second free constant per link would have one source each).
# Checked against vllm-project/vllm#24111's H100 TP=6 two-stage rows (custom-allreduce-h100-tp6-vllm24111).
# Priors where no public row is left (tests/bench/calibration_check.py): NCCL's ring LL base latency 6.6 us and its
# NVLink LL per-step hardware latency 0.6 us (NVIDIA/nccl src/graph/tuning.cc:151, :159).
ENGINE_AR_BASE_US = 3.5
ENGINE_AR_PEER_US = 0.35
# The fit above is Hopper NVLink (sglang#2904, H100) and sm_120 PCIe. On B200 (sm_100) NVLink the same small-message
# work takes longer: NVIDIA/nccl#1940, nccl-tests all_reduce_perf 8 B on 8 GPUs with NCCL 2.27's symmetric-memory
# kernels (P2P loads/stores and flag exchanges over NVLink, as the engines' kernels do), tuned the same way on both:
# best ~3.0 us on 8x B200 against ~2.3 us on 8x H800 / H200 -> 1.30x the fixed time of a P2P kernel on an NVLink
# group of sm_100 parts (calibration id nvlink-small-message-latency-b200-nccl1940). Other archs: 1.0 (no public
# figure; the Hopper fit).
NVLINK_P2P_LATENCY_FACTOR_BY_ARCH = {"sm_100": 3.0 / 2.3}


# A device-to-device copy of an all-reduce's message around the kernel (vLLM's symmetric-memory path copies the input
# into its symmetric buffer and the result out, vllm/distributed/device_communicators/symm_mem.py:134, :155): one
# small elementwise kernel each, NVIDIA/Megatron-LM#6463's decode profile "a fused add 1.5 us" (the figure behind
# rates.MIN_US['elementwise']), plus reading and writing the message at the GPU's memory bandwidth.
DEVICE_COPY_MIN_US = 1.5


def engine_ar_latency_us(p: int) -> float:
    """Fixed time of one custom / PCIe-IPC all-reduce over p ranks, microseconds (see above)."""
    return ENGINE_AR_BASE_US + ENGINE_AR_PEER_US * (p - 1)


# --- The fused all-reduce + residual add + RMSNorm (perf/comm_fused.py) ---------------------------------------------
# The norm's work inside the fused kernel: after the sum, FusedOp reads the residual and writes the new residual and the
# normed output, each a message's size (flashinfer include/flashinfer/comm/trtllm_allreduce_fusion.cuh
# allreduce_fusion_kernel_oneshot_lamport / _twoshot_sync -> fused_op; trtllm_mnnvl_allreduce.cuh
# oneshotAllreduceFusionKernel; vLLM passes residual_in, residual_out and norm_out,
# vllm/compilation/passes/fusion/allreduce_rms_fusion.py:264-281): 3 message sizes of memory traffic at the GPU's
# memory bandwidth and no launch of its own, where the unfused norm kernel moves 4 (it reads the reduced input too).
# The Lamport buffers' clearing and polling (p message copies in local memory) are left out: they overlap the wire.
FUSED_NORM_EPILOGUE_BYTES_PER_BYTE = 3.0
# And a fixed time of the epilogue: each token's RMS needs a reduction across its block (trtllm FusedOp) or cluster
# (mnnvl: cluster.sync) after the sum, where the P2P fixed time (engine_ar_latency_us) was fitted on plain all-reduce
# kernels. FlagGems-vllm#773 (8x H100 SXM, vLLM 0.28.0 + FlashInfer 0.6.16.post3, CUDA graph, [M, 6144] bf16, TP2
# one-shot; calibration id fused-allreduce-rmsnorm-h100-tp2-flaggems773): trtllm 6.98 us at M = 6, 12.98 us at M = 138,
# mnnvl 6.07 us at M = 6, each 2.0-2.9 us above the P2P fixed time + wire + epilogue traffic (4.1 / 10.1 / 4.1 us).
# Fitted on that source's three rows (their mean |log error| is least at 2.86; tests/bench/calibration_check.py
# FITTED fused_epilogue_us, prior 0: the epilogue's memory time alone); vllm#22086's older one-shot
# (fused-allreduce-rmsnorm-h100-tp2-vllm22086, shown apart) reads 2-16 us more still. One source: a prior elsewhere.
FUSED_NORM_EPILOGUE_US = 2.9
