"""vLLM 0.34.0 (CUDA wheel): the engine profile (autotune/capability/engine_profile.py). Sources: the wheel's
source, paths relative to site-packages (the citation test opens each cited line)."""

from __future__ import annotations

from autotune.capability import vllm_0_34_0 as rules
from autotune.capability.engine_profile import (
    CUDA_VISIBLE_DEVICES,
    DSA_MHA_PREFILL_TOPK,
    AllReducePath,
    EngineProfile,
    MoeConfigFiles,
)
from autotune.capability.flashinfer_comm import mnnvl_fused_path
from autotune.specs import Batching, ModelSpec, PhasePlan

VERSION = "0.34.0"


def default_batching(memory_gib: float, gpu_name: str, arch: str) -> Batching:
    """Batch limits `vllm serve` (UsageContext.OPENAI_API_SERVER) picks when the user sets none,
    vllm/engine/arg_utils.py:2995-3045: device memory >= 160 GiB: 16384 batched tokens, 1024 seqs; >= 70 GiB and
    neither an A100 nor a GB10 (cc 12.1): 8192 / 1024; else (and when the memory is unknown) 2048 / 256."""
    if memory_gib >= 160:
        return Batching(max_running=1024, chunked_prefill_tokens=16384)
    if memory_gib >= 70 and "a100" not in gpu_name.lower() and arch != "sm_121":
        return Batching(max_running=1024, chunked_prefill_tokens=8192)
    return Batching(max_running=256, chunked_prefill_tokens=2048)


def graph_caps(arch: str, memory_gib: float, model: ModelSpec, phase: PhasePlan, query_len: int) -> tuple[int, int]:
    """vLLM's CUDA graphs, per engine (DP rank): (decode requests, prompt-carrying step tokens) that replay one. At
    its default sizes elsewhere than the 10.x family: the shared capture ceiling min(max_num_seqs x q x 2, 512)
    (vllm/config/vllm.py:2401-2407), within max_num_batched_tokens (:2451); decode graphs hold whole requests of q
    tokens under it (vllm/config/compilation.py:65). On 10.x (sm_100) the wide defaults (vllm/config/vllm.py:2604):
    prefill graphs to min(8192, max_num_batched_tokens) (:2639), decode to max_num_seqs within that token budget
    (:2681). The plan's batching.cuda_graph_max_bs is emitted as max_decode_cudagraph_capture_requests (not the
    deprecated shared --max-cudagraph-capture-size): the decode grid then runs to min(it, max_num_seqs)
    (vllm/config/vllm.py:2655-2659) within the decode token budget, max_num_batched_tokens off sm_100 and 8192 on it
    (vllm/config/compilation.py:65; vllm/config/vllm.py:2604-2611, :2681-2684), while the prefill sizes keep their
    own default (the shared sizes, :2645): the token ceiling of mixed steps does not move. A step above them runs
    without a graph: eager for the breakable-graph architectures, the torch.compile'd code for the rest, alike in
    host time (autotune/perf/eager_host.py, autotune/perf/efficiency.py EAGER_HOST_US_PER_LAUNCH)."""
    b = phase.batching
    if arch == "sm_100":
        tokens = min(8192, b.chunked_prefill_tokens)
        decode_tokens = tokens
    else:
        tokens = min(b.max_running * query_len * 2, 512, b.chunked_prefill_tokens)
        decode_tokens = b.chunked_prefill_tokens if b.cuda_graph_max_bs is not None else tokens
    requests = b.max_running if b.cuda_graph_max_bs is None else min(b.cuda_graph_max_bs, b.max_running)
    return min(requests, decode_tokens // query_len), tokens


# FP8 experts below cc 8.9 (sm_80 A100 / A800, sm_86): the FP8 MoE oracle walks its backends in order
# (vllm/model_executor/layers/fused_moe/oracle/fp8.py:94-110, :498-503); FlashInfer, DeepGEMM and CUTLASS need cc 9+
# (CUTLASS grouped GEMM: vllm/_custom_ops.py:828-829),
# Triton takes FP8 only where the platform supports FP8 (vllm/model_executor/layers/fused_moe/experts/triton_moe.py:197,
# vllm/platforms/cuda.py:628-629 `has_device_capability(89)`), so the first to accept is Marlin (cc >= 7.5,
# vllm/model_executor/layers/fused_moe/experts/marlin_moe.py:539-541, FP8 weights :548-565): weight-only, BF16 mma.sync
FP8_MARLIN_MOE_ARCHS = ("sm_80", "sm_86")
# Block FP8 (128 x 128 weight scales) experts on the SM100 family: FLASHINFER_TRTLLM heads the priority list on CUDA
# (vllm/model_executor/layers/fused_moe/oracle/fp8.py:94-110; AITER is ROCm's) and takes the scheme
# (kFp8Static128BlockSym x kFp8Dynamic128Sym: vllm/model_executor/layers/fused_moe/experts/trtllm_fp8_moe.py:396-406)
# on cc 10.x with FlashInfer's TRT-LLM MoE present (the same file :174-181): flashinfer.fused_moe.
# trtllm_fp8_block_scale_moe in its DeepSeekFp8 mode (:452-535). Its own value (efficiency.MOE_VARIANT_SPEED), not
# FlashInfer CUTLASS's, which takes block FP8 on cc 9.0 only
# (vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:170-178). Not a --moe-backend value the
# search emits: the auto pick only. Under DeepEP (deepep_high_throughput / _low_latency) the TRT-LLM experts refuse
# the parallel config (no all-to-all kernels but all-gather / reduce-scatter and DeepEP v2:
# vllm/model_executor/layers/fused_moe/experts/trtllm_fp8_moe.py:198-205, 220-227), FlashInfer CUTLASS refuses block
# FP8 off cc 9.0, and DeepGEMM is next (vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py:178-183).
# EPLB makes the TRT-LLM experts refuse too (the same lines, enable_eplb); the pick does not see EPLB (left as the
# TRT-LLM kernel).
BLOCK_FP8_SM100_MOE = "trtllm_fp8_block"


def auto_moe_kernel(expert_dtype: str, arch: str, deepep: bool, ep: int, expert_format: str = "") -> str:
    """kernels.moe = auto (the oracles in vllm/model_executor/layers/fused_moe/oracle/): block FP8 on SM90 Triton
    first for ep == 1 and FlashInfer CUTLASS for ep > 1 (vllm/model_executor/layers/fused_moe/oracle/fp8.py:127-139),
    on SM100 FlashInfer TRT-LLM (BLOCK_FP8_SM100_MOE), on SM120 DeepGEMM, else Triton. Per-tensor FP8 follows the
    activation scheme (nothing reorders the priority list for it:
    vllm/model_executor/layers/fused_moe/oracle/fp8.py:94-110, walked in order at :498-503): static scales
    (fp8_tensor) run FlashInfer on SM90/SM100/SM120 (TRT-LLM on SM100,
    vllm/model_executor/layers/fused_moe/experts/trtllm_fp8_moe.py:174-181,396-406; CUTLASS on cc 9.0/10.x/12.x,
    vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:135-168), Triton below; dynamic scales
    (fp8_tensor_dynamic, and online FP8 of a bf16/fp16 checkpoint,
    vllm/model_executor/layers/quantization/online/fp8.py:665-674) are refused by TRT-LLM, FlashInfer CUTLASS and
    DeepGEMM (vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py:178-188, which the DeepGEMM backend's
    class requires too: vllm/model_executor/layers/fused_moe/experts/fallback.py:81-89) and run Triton
    (vllm/model_executor/layers/fused_moe/experts/triton_moe.py:197-204) everywhere. MXFP4: DeepGEMM on SM100/SM120,
    else
    Marlin; NVFP4 (ModelOpt): the FlashInfer kernels first
    (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py:238-247; TRT-LLM and CuteDSL on the SM100 family only,
    vllm/model_executor/layers/fused_moe/experts/trtllm_nvfp4_moe.py:227-234; CUTLASS on SM90/100/120,
    vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:135-146), valued as flashinfer_cutlass
    (the TRT-LLM kernel has no value of its own here), Marlin below SM100; bf16: FlashInfer CUTLASS on SM100/SM120
    (vllm/model_executor/layers/fused_moe/oracle/unquantized.py:68-80), Triton on SM90 (FlashInfer moved back), SM89.
    An FP8 checkpoint on an arch without FP8 tensor cores (FP8_MARLIN_MOE_ARCHS; its experts compute in BF16
    there, precision.compute_dtype, so the format says it): Marlin, W8A16."""
    if arch in FP8_MARLIN_MOE_ARCHS and (expert_dtype == "fp8" or expert_format in rules.FP8_CHECKPOINT):
        return "marlin"
    if expert_dtype == "fp8":
        if expert_format == "fp8_tensor":
            return "flashinfer_cutlass" if arch in ("sm_90", "sm_100", "sm_120") else "triton"
        if expert_format in ("fp8_tensor_dynamic", "bf16", "fp16"):
            return "triton"
        if arch == "sm_90":
            return "triton" if ep == 1 else "flashinfer_cutlass"
        if arch == "sm_100":  # DeepEP's kernels are neither all-gather nor DeepEP v2: TRT-LLM refuses them
            return "deep_gemm" if deepep else BLOCK_FP8_SM100_MOE
        return "deep_gemm" if arch == "sm_120" else "triton"
    if expert_dtype == "fp4":
        blackwell = arch in ("sm_100", "sm_120")
        if expert_format == "nvfp4":
            return "flashinfer_cutlass" if blackwell else "marlin"
        return "deep_gemm" if blackwell else "marlin"
    return "flashinfer_cutlass" if arch in ("sm_100", "sm_120") else "triton"


KIB, MIB = 1024, 1024 * 1024
# vllm/distributed/device_communicators/custom_all_reduce.py:118 _SUPPORTED_WORLD_SIZES (16 is never taken on one
# box: should_custom_ar, vllm/distributed/device_communicators/custom_all_reduce.py:501 `world_size > 8`)
CUSTOM_WORLD_SIZES = (2, 4, 6, 8)
# vllm/distributed/device_communicators/custom_all_reduce.py:138 max_size=8192 * 1024; :514 `inp_size <
# self.max_size` with sizes a multiple of 16 bytes (:509-511): the largest message it takes is 8 MiB - 16
CUSTOM_MAX_BYTES = 8 * MIB - 16
# The custom kernel's launch: csrc/custom_all_reduce.cuh allreduce() (vLLM c9eabec) `threads = 512, block_limit = 36`,
# blocks = min(block_limit, packets / threads), packets of 16 bytes (packed_t: ld.128 / st.128); the vLLM binding
# passes no other limits (vllm/_custom_ops.py:3279-3286 all_reduce(fa, inp, out, reg_buffer, reg_buffer_sz_bytes)).
# cross_device_reduce_2stage walks a rank's part (size / ngpus packets) with a grid-stride loop in both rounds, so one
# pass of the grid covers 36 x 512 x 16 bytes of each rank's part.
CUSTOM_GRID_BYTES = 36 * 512 * 16
# FlashInfer's standalone all-reduce (on by default, vllm/envs.py:2070-2072): world sizes and per-rank input limits
# (MiB, inclusive: vllm/distributed/device_communicators/flashinfer_all_reduce.py:512) of
# vllm/compilation/passes/fusion/allreduce_rms_fusion.py:104-120 (read at
# vllm/distributed/device_communicators/flashinfer_all_reduce.py:442), raised for the MNNVL backend on one node by
# vllm/distributed/device_communicators/all_reduce_utils.py:87-94 (sm_100 / sm_103 at 8 ranks: 128 MiB). The MNNVL
# workspace's per-call slot check (vllm/distributed/device_communicators/flashinfer_all_reduce.py:541-549, "only ~1/3
# is usable per call") may lower it: not modelled.
FLASHINFER_MAX_MIB = {
    "sm_90": {2: 64, 4: 2, 8: 0.5},
    "sm_100": {2: 64, 4: 32, 8: 128},
    "sm_103": {2: 64, 4: 80, 8: 128},
}
# The custom kernel's limit once torch symmetric memory is on (VLLM_ALLREDUCE_USE_SYMM_MEM=1 by default,
# vllm/envs.py:2066-2068; vllm/distributed/device_communicators/custom_all_reduce.py:241-251):
# vllm/distributed/device_communicators/all_reduce_utils.py:31-49
CUSTOM_SYMM_MAX_BYTES = {
    "sm_90": {2: 64 * MIB, 4: 32 * MIB, 6: MIB // 2, 8: MIB // 4},
    "sm_100": {2: 2 * MIB, 4: 2 * MIB, 6: MIB, 8: MIB},
    "sm_103": {2: 4 * MIB, 4: 4 * MIB, 6: 8 * MIB, 8: 4 * MIB},
}
# torch symmetric memory all-reduce, per-rank input limits (inclusive,
# vllm/distributed/device_communicators/symm_mem.py:125):
# vllm/distributed/device_communicators/all_reduce_utils.py:58-76
SYMM_MEM_MAX_BYTES = {
    "sm_90": {2: 64 * MIB, 4: 32 * MIB, 6: 64 * MIB, 8: 64 * MIB},
    "sm_100": {2: 8 * MIB, 4: 32 * MIB, 6: 128 * MIB, 8: 128 * MIB},
    "sm_103": {2: 4 * MIB, 4: 32 * MIB, 6: 32 * MIB, 8: 64 * MIB},
}
# World sizes where the symmetric-memory path runs torch's multimem_all_reduce_, two_shot_all_reduce_ at the others
# (vllm/distributed/device_communicators/symm_mem.py:26-31, :143-155).
SYMM_MEM_MULTIMEM_WORLDS = {"sm_90": (4, 6, 8), "sm_100": (6, 8), "sm_103": (6, 8)}
# torch's two-shot kernel waits at a cross-rank barrier every block takes on entry and again on exit, after pushing
# its reduced slice into every peer's buffer (pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu
# two_shot_all_reduce_kernel_inplace: sync_remote_blocks<false, true> before the loop, sync_remote_blocks<true, true>
# after it): two fixed times, by the rule the custom kernel's two-stage count follows (a barrier all blocks wait on
# besides the entry one). The calibration check (tests/bench/calibration_check) shows it against the
# symm_mem_two_shot columns of vllm#24111 / #24532 (H100, 4 / 6 ranks) and vllm#42324 (B200, 2 ranks).
SYMM_MEM_TWO_SHOT_SYNCS = 2


def symm_mem_syncs(arch: str, world: int) -> int:
    """Fixed times of the symmetric-memory kernel vLLM runs on `world` ranks: SYMM_MEM_TWO_SHOT_SYNCS for
    two_shot_all_reduce_; multimem_all_reduce_ keeps the one-fixed-time prior. Its kernel has the same entry and exit
    barriers (CUDASymmetricMemoryOps.cu multimem_all_reduce_kernel), but its wire is NVSwitch's multicast reduce,
    which the model prices as the two-shot P2P wire; the pair is a prior, shown apart by the calibration check
    against vllm#24111 / #24532's symm_mem_multimem columns."""
    return 1 if world in SYMM_MEM_MULTIMEM_WORLDS.get(arch, ()) else SYMM_MEM_TWO_SHOT_SYNCS


def custom_one_stage_max_bytes(world: int, nvlink: bool) -> float:
    """The custom kernel's one-stage limit (csrc/custom_all_reduce.cuh allreduce(), vLLM c9eabec): 2 ranks always
    one-stage; on full NVLink one-stage while (world <= 4 and bytes < 512 KiB) or (world <= 8 and bytes < 256 KiB)."""
    if world == 2:
        return float("inf")
    if not nvlink:
        return 0.0
    return 512 * KIB - 16 if world <= 4 else 256 * KIB - 16


def allreduce_paths(arch: str, world: int, link: str) -> tuple[AllReducePath, ...]:
    """vLLM's tensor-parallel all-reduce dispatch,
    vllm/distributed/device_communicators/cuda_communicator.py:389-458: FlashInfer (:391-422), the custom kernel
    (:434-442), torch symmetric memory (:455-458), then NCCL.
    - FlashInfer and symmetric memory need NVSwitch multicast: FlashInfer's MNNVL backend on one node
      (vllm/distributed/device_communicators/flashinfer_all_reduce.py:174-185; its TRT-LLM fallback taken as
      NVLink-only too), symmetric memory off without a multicast pointer
      (vllm/distributed/device_communicators/symm_mem.py:106-111); both only on the archs their tables name (no
      sm_120 / sm_89: PCIe boxes run the custom kernel on 2 GPUs, NCCL otherwise).
    - The custom kernel: 2 P2P GPUs or a full-NVLink group ("not supported on more than two PCIe-only GPUs",
      vllm/distributed/device_communicators/custom_all_reduce.py:268-273), up to CUSTOM_MAX_BYTES, lowered where
      symmetric memory runs (CUSTOM_SYMM_MAX_BYTES). Its two-stage kernel synchronises twice (csrc/custom_all_reduce.cuh
      cross_device_reduce_2stage: start_sync, the reduce-scatter, an end_sync every block waits on, then the
      all-gather reading the peers' reduced parts): two fixed times; one-stage one (start_sync, the reads, a final
      end_sync on one block only). The two-stage kernel's grid is fixed (CUSTOM_GRID_BYTES): its passes over a rank's
      1/p part are counted (two_stage_grid_bytes, the model's p2p_allreduce._two_stage_wire_s).
    - FlashInfer: flashinfer allreduce_fusion with the plain all-reduce pattern on the fused op's workspace
      (vllm/distributed/device_communicators/flashinfer_all_reduce.py:551-566; mnnvl on one node, :174-180), no
      use_oneshot: FlashInfer's mnnvl kernels and split (capability.flashinfer_comm.mnnvl_fused_path: one-shot while
      world copies fit 1 MiB, one exchange; else two). Their fixed time per exchange: the custom kernel's (a prior,
      no public standalone FlashInfer figure is used).
    - Symmetric memory: two-shot wire plus the copies of the message into and out of the symmetric buffer
      (vllm/distributed/device_communicators/symm_mem.py:134, :155) and the fixed times of symm_mem_syncs."""
    nvlink = link == "nvlink"
    if world not in CUSTOM_WORLD_SIZES or (not nvlink and not (world == 2 and link == "p2p")):
        return ()
    one_stage = custom_one_stage_max_bytes(world, nvlink)
    paths = []
    flashinfer_mib = FLASHINFER_MAX_MIB.get(arch, {}).get(world, 0) if nvlink else 0
    if flashinfer_mib:
        mnnvl = mnnvl_fused_path(world)
        paths.append(AllReducePath("flashinfer", flashinfer_mib * MIB, mnnvl.one_shot_max_bytes, two_shot_syncs=2))
    symm_max = SYMM_MEM_MAX_BYTES.get(arch, {}).get(world, 0) if nvlink else 0
    custom_max = min(CUSTOM_MAX_BYTES, CUSTOM_SYMM_MAX_BYTES[arch][world] - 16) if symm_max else CUSTOM_MAX_BYTES
    paths.append(
        AllReducePath("custom", custom_max, one_stage, two_shot_syncs=2, two_stage_grid_bytes=CUSTOM_GRID_BYTES)
    )
    if symm_max:
        paths.append(AllReducePath("symm_mem", symm_max, 0.0, two_shot_syncs=symm_mem_syncs(arch, world), copies=2))
    return tuple(paths)


# The all-reduce + RMSNorm fusion pass's per-rank message limit (MiB by arch, then world size):
# vllm/compilation/passes/fusion/allreduce_rms_fusion.py:104-127 FI_ALLREDUCE_FUSION_MAX_SIZE_MB, read by
# flashinfer_max_size (vllm/config/compilation.py:258-271: world sizes 2, 4, 8, 16 only, else no fusion)
FUSION_MAX_MIB = {
    "sm_90": {2: 64, 4: 2, 8: 0.5},
    "sm_100": {2: 64, 4: 32, 8: 1},
    "sm_103": {2: 64, 4: 64, 8: 4},
}


def allreduce_rmsnorm_max_tokens(arch: str, world: int, row_bytes: int) -> int:
    """The largest step (tokens per rank) the fused all-reduce + RMSNorm runs on: the pass takes
    max_token_num = max_size // (hidden size x dtype bytes) (vllm/compilation/passes/fusion/allreduce_rms_fusion.py:
    1011-1027) and applies only to the compile range ending at or below it (:1128-1132); vllm/config/vllm.py:2739-2775
    splits the compile ranges there, so larger steps run the unfused all-reduce and norm."""
    return int(FUSION_MAX_MIB.get(arch, {}).get(world, 0) * MIB) // max(1, row_bytes)


# The fusion pass's kernel for the plain pattern (allreduce + residual add + RMSNorm) on sm_90 and the 10.x family at
# TP > 1 (allreduce_rmsnorm_default), one-shot up to this per-rank message when vLLM chooses (the trtllm backend:
# vllm/compilation/passes/fusion/allreduce_rms_fusion.py:132-153, :158-176; MiB by arch, then world size)
FUSED_TRTLLM_ONE_SHOT_MAX_MIB = {
    "sm_90": {2: 32, 4: 2, 8: 0.5},
    "sm_100": {2: 32, 4: 4, 8: 1},
    "sm_103": {2: 32, 4: 4, 8: 2},
}


def fused_allreduce_path(arch: str, world: int, link: str) -> AllReducePath | None:
    """The kernel vLLM's fused all-reduce + RMSNorm calls (flashinfer allreduce_fusion,
    vllm/compilation/passes/fusion/allreduce_rms_fusion.py:264-293) on its workspace's backend: on one node FlashInfer's
    mnnvl (vllm/distributed/device_communicators/flashinfer_all_reduce.py:174-180), whose one-shot / two-shot split
    vLLM leaves to FlashInfer (vllm/compilation/passes/fusion/allreduce_rms_fusion.py:164-167:
    capability.flashinfer_comm.mnnvl_fused_path); the trtllm fallback where no multicast workspace can be made (a
    P2P pair without NVLink: taken as the pairs the custom kernel runs on), one-shot up to vLLM's own table
    (FUSED_TRTLLM_ONE_SHOT_MAX_MIB)."""
    if link == "nvlink":
        return mnnvl_fused_path(world)
    one_shot_mib = FUSED_TRTLLM_ONE_SHOT_MAX_MIB.get(arch, {}).get(world)
    if link != "p2p" or world != 2 or one_shot_mib is None:
        return None
    return AllReducePath("fused_trtllm", float("inf"), one_shot_mib * MIB, two_shot_syncs=2)


def quantised_dp_dispatch(moe_kernel: str, expert_format: str, ep: int, dp: int) -> bool:
    """Attention DP's default all-gather dispatch (--all2all-backend allgather_reducescatter) quantises the local rows
    before it gathers them, with their top-k ids and weights and the scales
    (vllm/model_executor/layers/fused_moe/prepare_finalize/naive_dp_ep.py:192-225 ->
    vllm/distributed/device_communicators/all2all.py:118-160), unless the experts kernel quantises its own input
    (expects_unquantized_inputs): FlashInfer CUTLASS on block FP8
    (vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:130-132), vLLM's CUTLASS FP4 / MXFP4
    experts (vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py:720-721, 1055-1056) and b12x
    (vllm/model_executor/layers/fused_moe/b12x.py:551-553). Any EP and DP sizes."""
    if moe_kernel == "flashinfer_cutlass":
        return expert_format != "fp8_block"
    if moe_kernel == "cutlass":
        return expert_format not in ("nvfp4", "mxfp4")
    return moe_kernel != "b12x"


def gdn_flashinfer_prefill(arch: str, chunk_tokens: int, state_dtype: str) -> bool:
    """_resolve_gdn_prefill_backend (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:187-349) with
    gdn_prefill_backend "auto": FlashInfer on sm_90, and on the sm_100 / sm_120 families with CUDA 13 (:325-342),
    which the wheel's pins read as (METADATA: nvidia-cutlass-dsl[cu13], flashinfer-python 0.7.3); head_k_dim 128
    there, which linear_attention.prefill_path checks for every arch (FlashInfer's kernel takes head size 128 only).
    Neither the chunk nor the state dtype matters: the state is cast to fp32 for the kernel (:423)."""
    return arch in ("sm_90", "sm_100", "sm_120")


PROFILE = EngineProfile(
    engine="vllm",
    version=VERSION,
    install=f"pip install vllm=={VERSION}",
    server_command=("vllm", "serve"),
    vendors=("nvidia",),  # the CUDA wheel (vllm/platforms/cuda.py); ROCm/XPU builds are separate wheels
    vendor_source="vllm/platforms/__init__.py:57 (cuda_platform_plugin: the CUDA wheel, NVML)",
    visible_devices_env=CUDA_VISIBLE_DEVICES,
    rules=rules.RULES,
    default_batching=default_batching,
    # chunked prefill: prefill chunks share the step token budget with the running decodes (vllm/v1/core/sched)
    mixed_prefill_chunks=True,
    # async scheduling is on by default with the uniproc and multiproc executors, PP included
    # (vllm/config/vllm.py:1610-1637; vllm/v1/executor/multiproc_executor.py:700)
    overlap_under_pp=True,
    # async scheduling keeps max_concurrent_batches = pp + 1 batches in flight (vllm/config/vllm.py:560-566, pp without
    # it): run_busy_loop reads the input queue before every engine step (vllm/v1/engine/core.py:1794-1802, :1820-1853)
    # and step_with_batch_queue schedules and launches a batch without waiting while the queue has room, then waits for
    # the oldest (:777-833). A request read while step k runs is scheduled when step k ends, behind step k+1, which was
    # scheduled at step k's start: one batch ahead, at every pp (pp + 1 in flight, one waiting for the first stage)
    overlap_scheduled_ahead=lambda pp: 1,
    scheduler_cpu_ms=0.5,  # prior (the v1 figure)
    # vllm/v1/worker/utils.py:742-743 requested = total x utilization (autotune/perf/memory.py)
    memory_budget="gpu_memory_utilization",
    # DP ranks are separate engines each with its own TP group; only MoE layers span tp*dp
    # (vllm/config/parallel.py:155-157; vllm/model_executor/models/deepseek_v2.py:1339-1345)
    tp_spans_dp=False,
    # each DP engine core's scheduler takes up to max_num_batched_tokens itself (vllm/v1/core/sched/scheduler.py:738)
    chunk_split_over_dp=False,
    separate_state_pool=False,  # hybrid states come from the shared KV pool per request
    states_per_request=rules.MAMBA_STATES_PER_REQUEST,
    # Gated DeltaNet prefill (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py _forward_core,
    # :1917-2081): fused_post_conv_prep (split, L2 norm of q / k, gates: :1937-1954), gather_initial_states (:2052;
    # FlashInfer's path :2141) and scatter_states (:2073) around the scan on either path; the Triton scan is the six
    # kernels of vllm/third_party/flash_linear_attention/ops/chunk.py:37-81 (chunk_local_cumsum,
    # chunk_scaled_dot_kkt_fwd, solve_tril, recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h, chunk_fwd_o)
    gdn_chain_kernels=6,
    gdn_prefill_side_launches=(3, 3),
    gdn_flashinfer_prefill=gdn_flashinfer_prefill,
    # MLA on sm_12x: TRITON_MLA first (vllm/platforms/cuda.py:131-135); on sm_8x (FLASH_ATTN_MLA and FLASHMLA need
    # sm_90, FLASHINFER_MLA sm_100) TRITON_MLA is what remains of the list at vllm/platforms/cuda.py:146-151
    triton_mla_archs=("sm_120", "sm_89", "sm_80"),
    # sm_90: FLASH_ATTN (FA3, vllm/v1/attention/backends/fa_utils.py:99-101) for GQA and FLASH_ATTN_MLA for MLA lead
    # the lists (vllm/platforms/cuda.py:146-150, :167-179); both cap a captured batch's KV splits at
    # flash_attn_max_num_splits_for_cuda_graph = 32 (vllm/config/attention.py:66;
    # vllm/v1/attention/backends/flash_attn.py:773-779, vllm/v1/attention/backends/mla/flashattn_mla.py:155-175)
    fa3_graph_split_cap_archs=("sm_90",),
    # elsewhere below sm_100 FLASH_ATTN leads the non-MLA list (vllm/platforms/cuda.py:166-177) and runs FA2
    # (vllm/v1/attention/backends/fa_utils.py:99-107: FA3 on major 9, FA4 on major 10, else FA2)
    fa2_decode_archs=("sm_80", "sm_86", "sm_89", "sm_120"),
    # sm_90's FLASH_ATTN (FA3, above) reads the paged KV cache in blocks of 64 tokens by default
    # (vllm/config/cache.py:185 DEFAULT_BLOCK_SIZE; the backend takes any multiple of 16,
    # vllm/v1/attention/backends/flash_attn.py:357-367), shorter than FA3's 128-entry KV block at head dim 128
    # (80-128 at the others): FA3 runs its PagedKVNonTMA path (autotune tiles.FA3_PAGED_CTA_FIXED_US)
    fa3_paged_kv_non_tma_archs=("sm_90",),
    # forward_mha copies the prefill attention output into the layer output
    # (vllm/model_executor/layers/attention/mla_attention.py:3521-3526)
    mla_prefill_output_copy=True,
    # dynamic per-token activation scales where CUTLASS FP8 is supported
    # (vllm/model_executor/layers/quantization/fp8.py:279-284), which FlashInfer's FP8 kernel (sm_100 only) cannot
    # take: it needs per-tensor activation scales (vllm/model_executor/kernels/linear/scaled_mm/flashinfer.py:50-65),
    # so CutlassFP8ScaledMMLinearKernel runs on sm_89, sm_90 and sm_100 (cutlass_fp8_supported:
    # vllm/model_executor/kernels/linear/scaled_mm/cutlass.py:160-165; the CUDA list in order:
    # vllm/model_executor/kernels/linear/__init__.py:459-468)
    cutlass_fp8_tile_archs=("sm_89", "sm_90", "sm_100"),
    graph_caps=graph_caps,
    # NVFP4 linears on sm_10x: FlashInferCuteDslNvFp4LinearKernel leads the CUDA list
    # (vllm/model_executor/kernels/linear/__init__.py:593-596; is_supported: sm_10x family only,
    # vllm/model_executor/kernels/linear/nvfp4/flashinfer.py:113-127) and calls flashinfer mm_fp4 with
    # backend="cute-dsl" (vllm/model_executor/kernels/linear/nvfp4/flashinfer.py:171-179)
    cute_dsl_fp4_tile_archs=("sm_100",),
    allreduce_paths=allreduce_paths,
    # sm_90's FLASH_ATTN_MLA (first on the list, vllm/platforms/cuda.py:146-150) reorders requests of up to 512
    # query tokens into the decode batch ("process small prefills with decode pathway",
    # vllm/v1/attention/backends/mla/flashattn_mla.py:128-129, VARLEN): split_decodes_and_prefills then counts
    # every such request, short prompts and short chunks alike, as a decode
    # (vllm/v1/attention/backends/utils.py:957-979), run by forward_mqa on the latent KV. FLASHINFER_MLA (sm_100)
    # and TRITON_MLA (sm_12x, sm_8x) keep the builder's default threshold of 1
    # (vllm/model_executor/layers/attention/mla_attention.py:2505; raised only to the draft length under
    # speculative decoding, vllm/v1/attention/backend.py:659-671): a one-token prompt or chunk is a decode there
    mla_absorbed_prefill_rows=(("sm_90", 512),),
    mla_absorbed_prefill_rows_default=1,
    # TRITON_MLA decode: num_kv_splits = min(next_power_of_2(max_seq_len // 512), 2 x SMs)
    # (vllm/v1/attention/backends/mla/triton_mla.py:41-53); stage 1 writes fp32 partials of
    # (rows, heads, splits, kv_lora_rank + 1) that stage 2 reads (vllm/v1/attention/backends/mla/triton_mla.py:313-323,
    # vllm/v1/attention/ops/triton_decode_attention.py:527-533 grid (batch, heads / 16, splits))
    triton_mla_split_tokens=512,
    # forward_mqa of FLASHINFER_MLA, TRITON_MLA and FLASHMLA: torch.cat of the latent query and its rope part
    # (vllm/v1/attention/backends/mla/flashinfer_mla.py:327-329, vllm/v1/attention/backends/mla/triton_mla.py:287-288,
    # vllm/v1/attention/backends/mla/flashmla.py:270-271); FLASH_ATTN_MLA (auto on sm_90) passes them apart
    # (vllm/v1/attention/backends/mla/flashattn_mla.py:364-369)
    mla_decode_query_concat=True,
    mla_split_query_archs=("sm_90",),
    # forward_mha's _compute_prefill_context, per workspace-sized context chunk: gather_and_maybe_dequant_cache of the
    # prefix's latent KV, kv_b_proj over it, _concat_k_nope_k_pe, the context attention, accumulate / merge_attn_states
    # (vllm/model_executor/layers/attention/mla_attention.py:3174-3298; the algorithm at
    # vllm/model_executor/layers/attention/mla_attention.py:120-197)
    mla_prefill_prefix_up_projection=True,
    # sparse MLA (DSA): a step's prompt rows take forward_mha, the dense MLA prefill, while the batch's longest prompt
    # sequence is at most index_topk tokens (use_dense_mha: _use_dense_mha_prefill,
    # vllm/model_executor/layers/attention/sparse_mla_attention.py:138-147 and :451-456; forward_mha :1237-1247);
    # beyond it forward_mqa on the whole batch, the absorbed (576 / 512) form over each row's top-k
    # (vllm/model_executor/layers/attention/mla_attention.py:1100-1104, :1398-1426): on sm_90 with a bf16 KV cache
    # FLASH_ATTN_MLA_SPARSE, FA3's q_v path with the top-k as its block table
    # (vllm/v1/attention/backends/mla/flashattn_mla_sparse.py:215-258), then FLASHMLA_SPARSE; on sm_100
    # FLASHINFER_MLA_SPARSE with an FP8 cache, FLASHMLA_SPARSE (FA4 at <= 16 heads) with bf16
    # (vllm/platforms/cuda.py:94-148). Not modelled: the FA4 masked MHA that _use_masked_mha picks on sm_100 with a
    # bf16 cache at some (TP, length) cells (vllm/model_executor/layers/attention/mla_attention.py:1987-2103,
    # vllm/model_executor/layers/attention/sparse_mla_attention.py:101-135). Query heads
    # taken unpadded: FlashMLA's sm_90 small-head kernel runs 8 / 16 / 32 heads once the rows outnumber the SMs
    # (vllm/v1/attention/backends/mla/flashmla_sparse.py:1412-1424), ShardQ all heads on 1 / TP of the rows
    # (vllm/v1/attention/ops/shardq.py:1-12;
    # vllm/config/attention.py:150-160); FA3's and FlashInfer's row tiles not read
    dsa_mha_prefill_max_kv=DSA_MHA_PREFILL_TOPK,
    # sm_12x's FLASHINFER_MLA_SPARSE_SM120 has no dense MHA prefill (supports_dense_mha_prefill = False,
    # vllm/v1/attention/backends/mla/flashinfer_mla_sparse_sm120.py:38): prefill_backend None, every prompt row on
    # forward_mqa (vllm/model_executor/layers/attention/mla_attention.py:664-671;
    # vllm/model_executor/layers/attention/sparse_mla_attention.py:410)
    dsa_mha_prefill_archs=("sm_90", "sm_100"),
    # --kv-cache-dtype auto on GlmMoeDsaForCausalLM resolves to fp8_e4m3 on CUDA's sm_10x family
    # (vllm/model_executor/models/config.py:163-175, :1562; is_device_capability_family(100));
    # DeepseekV32ForCausalLM keeps its checkpoint's default (:81-95)
    dsa_fp8_kv_families=("glm_moe_dsa",),
    dsa_fp8_kv_archs=("sm_100", "sm_103"),
    # the indexer's scoring is DeepGEMM's FP8 MQA logits (fp8_fp4_mqa_logits for prompts, fp8_fp4_paged_mqa_logits for
    # decodes: vllm/model_executor/layers/sparse_attn_indexer.py:448-458, :921-929), built for SM90 / SM100 / SM120
    # (vllm/utils/deep_gemm.py:703-735; vllm/third_party/deep_gemm/include/deep_gemm/impls/sm120_fp8_mqa_logits.cuh;
    # support_deep_gemm, vllm/platforms/cuda.py:732-738); without DeepGEMM the indexer raises
    # (vllm/model_executor/layers/sparse_attn_indexer.py:1349-1353): no sm_80 / sm_89 path
    dsa_indexer_fp8_archs=("sm_90", "sm_100", "sm_103", "sm_120", "sm_121"),
    # V4.1's sparse-logits indexer, on by default (attention_config.indexer_sparse_logits None) where supported: the
    # 10.x family, no DCP / PCP (vllm/model_executor/models/config.py:709-760, vllm/config/attention.py:121-134;
    # vllm/models/deepseek_v41/attention.py:1478-1517); elsewhere dense logits masked to the candidates
    dsa_candidate_sparse_archs=("sm_100", "sm_103"),
    # fuse_allreduce_rms is on at the default -O2 (vllm/config/vllm.py:465 optimization_level, :325-345
    # OPTIMIZATION_LEVEL_02) where enable_allreduce_rms_fusion holds (:208-231: TP > 1, CUDA, FlashInfer, cc 9.0 or
    # the 10.x family): the conditions of the fusion.allreduce_rmsnorm rule (autotune/capability/vllm_0_34_0.py),
    # which adds the models that run without torch.compile (no compile pass)
    allreduce_rmsnorm_default=True,
    allreduce_rmsnorm_max_tokens=allreduce_rmsnorm_max_tokens,
    fused_allreduce_path=fused_allreduce_path,
    quantised_dp_dispatch=quantised_dp_dispatch,
    # EPLB's log_balancedness lines (vllm/distributed/eplb/eplb_state.py:716-736)
    expert_load_report="eplb_log",
    auto_moe_kernel=auto_moe_kernel,
    # the sorted-A TMA down projection runs only where the nearest key of its `_down` config sets USE_TMA
    # (vllm/model_executor/layers/fused_moe/experts/triton_moe.py:452-479); DeepSeek-R1 TP8 on H200
    # (fused_moe/configs/E=256,N=256,device_name=NVIDIA_H200,...,block_shape=[128,128]_down.json) sets it at the
    # 1024 and 3072 keys only, not at 4096, the key of every prefill above ~3.6K tokens
    triton_moe_tma_down=False,
    # vllm/model_executor/layers/fused_moe/fused_moe.py:1178-1191 get_config_file_name (block_shape without spaces,
    # the H200 family renamed NVIDIA_H200), 1194-1256 get_moe_configs ($VLLM_TUNED_CONFIG_FOLDER/<name>; the
    # "triton_version" key is dropped, 1245); vllm/utils/platform_utils.py:73-78 (whitespace and "/" -> "_")
    moe_configs=MoeConfigFiles(
        module="vllm",
        dir_env="VLLM_TUNED_CONFIG_FOLDER",
        device_name_separators=r"[\s/]+",
        device_renames=(("H200", "NVIDIA_H200"),),
        block_shape_spaces=False,
        per_channel_quant_suffix=False,
        triton_version_folder=False,
        triton_version_key=True,
        down_file=False,
    ),
)
