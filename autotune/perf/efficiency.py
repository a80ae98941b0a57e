"""Calibrated defaults: how close real kernels and collectives get to the datasheet.

Every figure here is a prior that a probe measurement (`HardwareProfile.measured`) replaces. Where a
public measurement backs it, the comment names the entry in shared/reference/calibration.yaml.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.capability.profiles import profile
from autotune.specs import HardwareProfile, ModelSpec, PhasePlan


@dataclass(frozen=True)
class Efficiency:
    gemm_compute: float  # large GEMM, fraction of dense peak
    gemm_memory: float  # weight-streaming (small-M) GEMM, fraction of HBM bandwidth
    attention_compute: float  # prefill attention, fraction of dense peak
    attention_memory: float  # decode attention, fraction of HBM bandwidth


# kernel-l20-hgemm-cublas: cuBLAS reaches 0.88-0.96 of peak on large FP16 GEMMs; serving shapes are
# smaller and ragged (MoE), so 0.75 is used. kernel-flashmla-h800-decode: FlashMLA reaches ~0.90 of HBM
# bandwidth when memory bound and ~0.67 of dense peak when compute bound.
DEFAULT_EFFICIENCY = Efficiency(gemm_compute=0.75, gemm_memory=0.80, attention_compute=0.60, attention_memory=0.85)

# Relative speed of kernel variants against the engine's auto choice (1.0). Priors, not measurements:
# `mi-tune kernels bench` and measured trials are the way to replace them.
ATTENTION_VARIANT_SPEED = {"auto": 1.0, "flashinfer": 1.0, "triton": 0.85}


def auto_attention_kernel(engine: str, model, arch: str, chosen: str) -> str:
    """The attention kernel a plan runs: its kernels.attention, or for `auto` the engine's default where that is
    not the fast kernel the speed priors take as 1.0: Triton MLA (DeepSeek / GLM / Kimi latent attention) on the
    archs the engine profile names (`triton_mla_archs`, cited there)."""
    if chosen != "auto":
        return chosen
    mla = any(layer.attention.latent_shared for layer in model.layers[:1])
    if mla and arch in profile(engine).triton_mla_archs:
        return "triton"
    return "auto"


# MoE additions, priors: flashinfer_cutlass is the same CUTLASS grouped GEMM family as cutlass (1.0);
# b12x (W4A8, SM120/121 FP4 experts): flashinfer#3051 measures its FP4 GEMM 1.3-1.7x faster than CUTLASS at
# decode M <= 64 and at par from M >= 256, so 1.1 over the whole step mix; flashinfer_mxfp4 (W4A16 MXFP4):
# sglang#34682 on H20 has it 0.96-1.37x the time of a CUTLASS W4A8 MoE and ~1/1.5-2 of Marlin's, i.e. about
# the auto pick (1.0). On a part slower per SM than its arch's reference (the H20), a speed is moved as a compute
# fraction (opcore._moe_variant_speed, fractions.variant_speed): a variant's extra time is work off the tensor
# cores, e.g. the Triton FP8 block kernel's scale promotion of every K block's partial product on the CUDA cores
# (sglang kernels/ops/moe/fused_moe_triton_kernels.py:586-601), which the H20 runs at the H100's rate per SM.
# calibration.yaml kernel-triton-moe-h20-down-tma (sglang#10567, H20 TP8, the down projection at 8K tokens, 1.435
# ms) checks it (the model: 1.46 ms; 1.61 with the reference part's 0.85).
MOE_VARIANT_SPEED = {
    "auto": 1.0,
    "cutlass": 1.0,
    "deep_gemm": 1.1,
    "triton": 0.85,
    "marlin": 0.7,  # other archs only: NVIDIA's are by arch (opcore._moe_variant_speed, rates.MMA_SYNC_SHARE)
    "flashinfer_cutlass": 1.0,
    "b12x": 1.1,
    "flashinfer_mxfp4": 1.0,
    "trtllm_fp8_block": 0.35,  # vLLM's SM100 block-FP8 pick (vllm_0_34_0.BLOCK_FP8_SM100_MOE): below
}
# trtllm_fp8_block: FlashInfer's trtllm_fp8_block_scale_moe in its DeepSeekFp8 mode (FP32 scales per 128 x 128 weight
# block and per 1 x 128 activation block; the UE8M0 / MXFP8 mode is another path). Its compute-bound rate against the
# grouped FP8 rate the others take: calibration.yaml kernel-flashinfer-trtllm-fp8-block-moe-b200-fib (flashinfer-bench
# MLSys26 MoE definition on one B200, DeepSeek-V3 experts H7168 I2048, 32 local of 256, top 8): 1,786.8 us for
# 10,501 local routed rows and 2,409.7 us for 16,158 (518 / 591 TFLOPS), which the op list meets at 0.327 / 0.377 of
# the grouped rate; their mean, 0.35, is used (confidence M: one benchmark's workloads). Corroborated by an nsys
# profile of the same baseline by another author (calibration.yaml notes): its 549 calls of the large tile (the three
# workloads above 900 tokens) spend 1,128 us a call in GEMM1 + GEMM2 + finalize and up to 1,693 us with the separate
# activationDeepSeekKernel (SwiGLU + FP8 re-quantisation, not fused into GEMM1 in this mode), against 1,552 us, the
# first source's mean over those three workloads (0.53 PFLOPS at their mean 9,333 local rows).
# Weight-bound steps are unchanged (the speed divides the compute term only, costing.py).
# Dense (non-expert) FP8 GEMM kernel (vLLM --linear-backend, SGLang --fp8-gemm-backend), applied to FP8 dense
# GEMMs only. Priors: the engines' auto pick on cc >= 8.9 is the CUTLASS scaled-mm (1.0); the Triton block-FP8
# GEMM gets the same 0.85 as the other Triton variants above.
LINEAR_VARIANT_SPEED = {"auto": 1.0, "cutlass": 1.0, "triton": 0.85}

# PCIe: usable fraction of raw lane bandwidth for NCCL rings. pcie-rtx6kpro-nccl-allreduce-8gpu:
# 8x RTX PRO 6000 Gen5 all_reduce busbw 37.6-41.1 GB/s against 63 GB/s raw -> 0.62. Checked (not moved) against
# two more boxes: calibration id rtx6kpro-wrx90-cpayne-8gpu (Gen5, 8 GPUs on 2 switches, one socket: 46.44 / 63 =
# 0.74) and calibration id pcie-tinybox-4090-p2p-readme (Gen4, 6 GPUs, no switches: 24.58 / 31.5 = 0.78); the
# rtx6kpro 4-GPU P2P_LEVEL=SYS ring reads 39.3 / 63 = 0.62. Per source 0.62-0.78 (Gen4 highest); nothing found
# says why rings would differ by generation or box, so the shipped value stays (src22a).
PCIE_COLLECTIVE_EFFICIENCY = 0.62
# Point-to-point DMA: hardware.md 5.1, Gen4 24-26 / 31.5, Gen5 50-55 / 63 GB/s -> 0.82. Checked (not moved):
# tinybox Gen4 24.44 one way, 50.6 both ways (0.78 / 0.80); WRX90 Gen5 56.3 one way, 109.3 both ways (0.89 / 0.87).
PCIE_COPY_EFFICIENCY = 0.82
# P2P impossible in hardware (GeForce): NCCL goes through host shared memory. tinygrad open-gpu-kernel-modules#44:
# 4090 P2P-disabled copy 6.3 GB/s against 31.5 raw -> 0.2.
SHM_EFFICIENCY = 0.20
# NVLink: NCCL all_reduce busbw ~360 of 450 GB/s per direction on H100/H200 SXM class.
NVLINK_COLLECTIVE_EFFICIENCY = 0.80

# NCCL latency (per protocol and ring step), protocols, P2P level, channels, PCIe-IPC: perf/comm_rates.py.
# Custom / PCIe-IPC all-reduce latency: perf/comm_rates.py ENGINE_AR_BASE_US, ENGINE_AR_PEER_US.

# Per-step CPU cost of the engine's scheduler (batch assembly, sampling bookkeeping, graph replay), ms: the engine
# profile's `scheduler_cpu_ms` (priors). Whether it adds to the step depends on the engine's scheduler
# (scheduler_overhead_ms below). Flat in the batch: the public per-step host figures found (hst28) are per-loop
# components, ~1 us a running request each (vLLM's update_from_output 0.142 / 0.287 ms at 128 / 256, calibration id
# sched-host-vllm46112-update-from-output; TRT-LLM's scheduler 2.0 ms at ~1,536 a rank, calibration id
# sched-host-trtllm10273-host-step-time) and ~0.4 ms a decode step for vLLM's schedule + input preparation on B200
# (calibration id sched-host-vllm42131-decode-fast-path), none a step's whole host time at a known batch. They stay
# far under the overlapped GPU steps where the serving rows read optimistic (DeepSeek-R1 DEP8 H200 at 384 a rank:
# ~90 ms modelled, 1.58x optimistic, would need ~370 us a request of host time to be exposed). Measured (hst28, not
# shipped): base + 30 us a request (the TRT-LLM wall-time bound) moves no calibration row while overlapped.
# What an overlapped scheduler still exposes per step (the sync between the CPU and the GPU stream), ms. Prior.
OVERLAP_EXPOSED_MS = 0.05
# Per-layer time a CUDA-graph replay adds to a step beyond its kernels' GPU time (the gaps between the graph's kernel
# nodes), us, on a decode step inside the graph sizes and each draft step of a speculative decode (ops._step): a
# prior. Read against one public node-level trace (calibration.yaml graph-replay-gap-localai-nsys: nsys
# --cuda-graph-trace=node of one steady llama.cpp decode step graphed whole, Qwen3.6-27B NVFP4, 64 layers, batch 128:
# 0.225 ms of inter-kernel idle, 3.5 us a layer; another engine's graph, GPU not stated).
DECODE_LAUNCH_US_PER_LAYER = 3.0
# A prompt-carrying step inside the graph sizes replays a piecewise graph: vLLM's default FULL_AND_PIECEWISE graphs
# decode batches whole and prefill / mixed batches in pieces split at the attention ops, which run eagerly between
# them (vllm/config/compilation.py:722-724, the split ops :925-; the -O2 default, config/vllm.py:339); SGLang's
# breakable prefill graph (srt/model_executor/cuda_graph_config.py:119-123) runs RadixAttention eagerly at its break
# points the same way (srt/layers/radix_attention.py:133-140). What the eager attention call and the pieces' replays
# add per layer over a whole graph: vllm-project/vllm#20059 (Qwen2.5-1.5B-Instruct, 28 layers, ShareGPT at 1 QPS;
# no GPU named, the author's companion vllm#20050 ran an A100 40G): median ITL 5.39 ms with piecewise graphs
# against 4.97 ms with a full decode graph over the same piecewise split, (5.39 - 4.97) / 28 = 15 us a layer
# (median TPOT 5.42 against 5.02: 14 us; calibration.yaml piecewise-graph-itl-vllm20059). Added to the replay gap
# above on every such step; measured where the step is small (host-exposed), so an upper bound on a chunk whose GPU
# time hides the host's attention calls. Before: 30 us a layer, no source. A step above the graph sizes replaces
# both with the eager host's excess (below).
PIECEWISE_EXTRA_US_PER_LAYER = 15.0
PREFILL_LAUNCH_US_PER_LAYER = DECODE_LAUNCH_US_PER_LAYER + PIECEWISE_EXTRA_US_PER_LAYER
# A step above the engine's CUDA-graph sizes (engine profile graph_caps) replays no graph: the CPU launches every
# kernel from Python, and the step takes the longer of that host time and the GPU's (perf/eager_host.py). Host time
# per kernel launch, us, times the kernels of the stage's layers counted from the op list.
# Fitted on vLLM's graphless decode steps (calibration_check eager_launch_us): vllm-project/vllm#45709, Qwen3-30B-A3B
# TP4, 34-35 ms over 48 layers of 14 modelled kernels (eager-host-time-vllm45709-4090d, -l20), and
# vllm-project/vllm#20469's --enforce-eager Qwen3-14B-AWQ on one A100 (vllm-awq-qwen3-14b-a100-eager), 20.63 ms over
# 40 layers of 10: 51 us a kernel in both (the rows put a per-layer term beside it at -26..+38 us: none kept); 48 us
# once FA2's packed-GQA decode counted its output copies (perf/fa2_decode.py: one more kernel a layer on the A100
# row, one or two on the sm_89 ones); 45 us since the split decode call counts its combine kernel too
# (tiles.ATTENTION_DECODE_LAUNCHES: 12 kernels a layer on the A100 row, 20.63 ms / 40 / 12 = 43 us; 16 on the
# vllm#45709 rows, 44-46 us), all four rows then within 5% (calibration_check eager_launch_us grid). Eager and
# compiled (no graph) differ by 4% in vllm#45709, so one figure serves both; SGLang's eager DeepSeek-V3 forward is
# near it (sglang#12160: (82.6 - 23.1) ms over 61 layers of 25.7 modelled kernels, 38 us a kernel, GPU not stated).
# Public per-launch figures it is read against: vllm-project/vllm-omni#6516 (1x A800, Xeon Gold 6336Y, PyTorch eager
# decode of an 8B model): 206,149 launches in 8,259.5 ms with 5,179.2 ms of kernel time and 3,080.3 ms idle
# (185,245 in 8,323.3 / 3,186.7 with flash_attn_varlen), the same launches in 5,196.9 ms under a CUDA graph: 15-17 us
# of exposed host time per launch, at most 40-45 us (wall time over launches); vllm-project/vllm-omni#7881: ~2,700
# small kernels per clip take 42-90 ms of host time, 16-33 us per launch (calibration.yaml
# eager-launch-host-vllm-omni6516 / -7881). The bare launch beneath them is 2.5-4.6 us (FreeToken#338: 39 torch
# launches in 143 us wall less 44.7 us of GPU work; kekzl/imp#1367: nsys median cudaLaunchKernel 4.58 us of CPU;
# calibration.yaml eager-launch-host-freetoken338 / -imp1367). The fit sits above the sources' 15-45 us: an op of the
# list is one fused kernel where the eager path runs more (Qwen3's q / k norms, the views and copies around each
# custom op), and the module calls' Python runs between launches.
EAGER_HOST_US_PER_LAUNCH = 45.0


def graph_caps(
    model: ModelSpec, phase: PhasePlan, engine: str, hw: HardwareProfile, query_len: int
) -> tuple[float, float]:
    """(decode sequences, prompt-carrying step tokens) of the whole instance up to which a step replays a CUDA graph:
    the engine profile's per-rank caps times the DP ranks (each rank batches its own requests); no caps where the
    profile has none (every step in a graph)."""
    caps = profile(engine).graph_caps
    if caps is None:
        return math.inf, math.inf
    decode_seqs, step_tokens = caps(hw.gpu.arch, hw.gpu.memory_gib, model, phase, query_len)
    return decode_seqs * phase.dp, step_tokens * phase.dp


def scheduler_overlapped(engine: str, pp: int) -> bool:
    """Whether the engine overlaps its CPU scheduling with the GPU step by default: at pp 1 always; with pipeline
    parallel only where the profile says so (`overlap_under_pp`: vLLM's async scheduling, not SGLang's overlap
    scheduler; cited in the profiles)."""
    return profile(engine).overlap_under_pp or pp == 1


def pickup_lag_steps(engine: str, pp: int) -> float:
    """Steps a request that arrives while the instance runs waits after the step boundary that follows its arrival,
    before its first step starts: the batches the engine's loop has already scheduled ahead when it reads the request
    (profile `overlap_scheduled_ahead`, cited there) where the scheduling overlaps the GPU, else none. With pp stages a
    step is pp micro-batches in flight, so a batch ahead is 1/pp of a step. A request that finds the instance idle
    starts at once (both loops read it and launch its batch in the same pass)."""
    if not scheduler_overlapped(engine, pp):
        return 0.0
    return profile(engine).overlap_scheduled_ahead(pp) / pp


def scheduler_overhead_ms(engine: str, pp: int, gpu_ms: float) -> float:
    """CPU scheduling time the step pays on top of its GPU time: all of it without overlap; with overlap only what
    exceeds the GPU step (the CPU prepares step n+1 while the GPU runs step n), at least OVERLAP_EXPOSED_MS."""
    return exposed_scheduler_ms(profile(engine).scheduler_cpu_ms, scheduler_overlapped(engine, pp), gpu_ms)


def exposed_scheduler_ms(cpu_ms: float, overlapped: bool, gpu_ms: float) -> float:
    """scheduler_overhead_ms of the engine's scheduler CPU time and whether it overlaps the GPU step (ops._step reads
    both once per step_fn)."""
    return max(OVERLAP_EXPOSED_MS, cpu_ms - gpu_ms) if overlapped else cpu_ms


def resolved_moe_kernel(model: ModelSpec, phase: PhasePlan, engine: str, arch: str, expert_dtype: str) -> str:
    """The plan's kernels.moe, 'auto' resolved to the engine's pick on the arch (auto_moe_kernel)."""
    moe = phase.kernels.moe
    if moe == "auto" and model.is_moe:
        deepep = phase.comm.all2all == "deepep" and phase.ep > 1
        moe = auto_moe_kernel(engine, expert_dtype, arch, deepep, phase.ep, model.expert_format)
    return moe


def auto_moe_kernel(engine: str, expert_dtype: str, arch: str, deepep: bool, ep: int, expert_format: str = "") -> str:
    """The fused-MoE kernel each engine picks for kernels.moe = auto (its speed prior is MOE_VARIANT_SPEED): the
    engine profile's `auto_moe_kernel` (cited there). The checkpoint's format decides first: INT4 (AWQ / GPTQ)
    experts run Marlin in both engines (vLLM quantization/auto_awq.py:338-362 -> fused_moe/oracle/int_wna16.py:
    130-147, Marlin first on CUDA; SGLang quantization/awq/awq.py:356-390, awq_marlin)."""
    if expert_format in ("int4_awq", "int4_gptq") or expert_dtype == "int4":
        return "marlin"
    return profile(engine).auto_moe_kernel(expert_dtype, arch, deepep, ep, expert_format)


# MoE expert parallel: coefficient of variation of the routed experts' popularity (std / mean of the experts'
# long-run shares), which perf/ep_balance.py turns into the busiest rank's load by EP size and batch. The two
# public sources imply very different values (autotune/catalog/calibration.yaml): eplb-trtllm-deepseek-r1-ep32,
# DeepSeek-R1 EP32 (8 of 256 experts per rank, 1,024 tokens per rank), max/mean 2.564 -> 2.17; eplb-vllm-kimi-k3-
# ep16, EP16 max/mean 1.069 (384 experts assumed, Kimi K2's count) -> 0.20. Their geometric mean, 0.65, is used
# (at DeepSeek-V3 EP8 it gives the busiest rank 1.16x the mean, the old fixed 1.15). The popularity is the traffic's
# (the TRT-LLM figure is one machine-translation dataset's): a workload's expert_load_cv (--expert-load-cv, or
# what `measure` reads from the engine) replaces this default (ep_balance.expert_load_cv).
EXPERT_LOAD_CV = 0.65
# Routing popularity of the experts, rank^-ROUTING_SKEW (routing.distinct_experts), in ROUTING_GROUPS groups. A
# prior: routing is measurably non-uniform (eplb-trtllm-deepseek-r1-ep32: the busiest of 32 ranks 2.56x the mean
# without EPLB), and a skew of 0.5 puts the busiest eighth of 256 experts at 2.8x the mean rate, the least
# popular eighth at 0.5x. No public per-expert histogram is in calibration.yaml to fit it to.
ROUTING_SKEW = 0.5
ROUTING_GROUPS = 8
# Share of that excess left with the expert-parallel load balancer. autotune/catalog/calibration.yaml
# eplb-trtllm-deepseek-r1-ep32: (max - mean) / mean 1.56 without -> 0.115 with (EP36, 32 redundant experts),
# 7% left; eplb-vllm-kimi-k3-ep16: max/mean 1.069 -> 1.008, 12% left. Both keep ~1/10 of the excess.
EPLB_RESIDUAL_IMBALANCE = 0.1

# The layer's norms: input + post-attention RMSNorm, each fused with its residual add (vLLM/SGLang); their minimum
# kernel time is rates.FUSED_ADD_NORM_MIN_US.
NORMS_PER_LAYER = 2

# Speculative decoding: per-draft-token acceptance `a` (expected tokens per step (1 - a^(k+1)) / (1 - a)).
# calibration.yaml mtp-deepseek-v3-report: 2nd-token acceptance 85-90% -> 0.85 (the low end);
# dspark-vllm-v4-flash-0731 / dspark-vllm-v41-flash-gsm8k: mean acceptance length 2.74 / 2.82 at k=5 ->
# a = 0.67 / 0.68 under the geometric model -> 0.68. EAGLE has no head in the catalog: the MTP figure, a prior.
DRAFT_ACCEPTANCE = {"mtp": 0.85, "dspark": 0.68, "eagle": 0.85}
# Per model family and method, where a public report measured it (calibration.yaml): GLM-5.x MTP,
# mtp-llamacpp-glm53-flash: mean accepted length 4.13 at 5 drafts (per-position 0.92 / 0.81 / 0.60 / 0.44 / 0.35)
# -> a = 0.80 under the geometric model (a Q4-quantised draft layer: a low end). DeepSeek-V3 MTP:
# mtp-sglang-deepseek-v3-nextn ~1.9 accepted length with one draft -> 0.9, beside the report's 0.85-0.90: the
# method default 0.85 stays. A workload's `draft_acceptance` (--draft-acceptance) overrides both.
DRAFT_ACCEPTANCE_BY_FAMILY = {("glm_moe_dsa", "mtp"): 0.80}


def draft_acceptance(family: str, method: str, override: float = 0.0) -> float:
    """Per-draft-token acceptance of `method` on a model `family`: the workload's override (0 = none), else the
    family's public figure, else the method's."""
    if override > 0:
        return override
    hit = DRAFT_ACCEPTANCE_BY_FAMILY.get((family, method))
    return hit if hit is not None else DRAFT_ACCEPTANCE.get(method, DRAFT_ACCEPTANCE["mtp"])


def efficiency(hw: HardwareProfile) -> Efficiency:
    return DEFAULT_EFFICIENCY


def peak_tflops(hw: HardwareProfile, dtype: str) -> float:
    """Achievable large-GEMM TFLOPS for `dtype` on one GPU: measured if probed, else peak x efficiency."""
    measured = hw.measured.gemm_tflops.get(dtype, 0.0) if hw.measured else 0.0
    if measured:
        return measured
    peaks = hw.gpu.peak_tflops
    peak = peaks.get(dtype) or peaks.get("bf16", 0.0)
    return peak * efficiency(hw).gemm_compute


def mem_bw_gbs(hw: HardwareProfile) -> float:
    """Achievable HBM/GDDR bandwidth of one GPU, GB/s."""
    if hw.measured and hw.measured.mem_bw_gbs:
        return hw.measured.mem_bw_gbs
    return hw.gpu.mem_bw_gbs * efficiency(hw).gemm_memory
