"""FlashInfer's fused all-reduce + residual add + RMSNorm kernels (flashinfer.comm.allreduce_fusion), which both
engines call for their default fusion.allreduce_rmsnorm: which kernel runs one-shot or two-shot at which size, and
whether the norm stays inside the all-reduce kernel. Read in FlashInfer fb28d72 (0.6.18; vLLM 0.34.0 pins 0.7.3 and
SGLang 0.5.23 0.7.2, taken to keep these rules). The engine profiles pick the backend (`fused_allreduce_path`).

- trtllm backend (IPC buffers; include/flashinfer/comm/trtllm_allreduce_fusion.cuh): one kernel either way, the norm
  in its epilogue (FusedOp after the sum). One-shot (allreduce_fusion_kernel_oneshot_lamport): each rank stores its
  whole message into every rank's Lamport buffer, then polls and sums the p copies in its own -- one exchange, (p - 1)
  x the message over the links. Two-shot (allreduce_fusion_kernel_twoshot_sync): reduce-scatter by token ranges, a
  barrier, the reduced part stored to every rank, a second barrier -- two exchanges. With use_oneshot unset
  (SGLang passes none) the size rule of flashinfer/comm/trtllm_ar.py _should_use_oneshot: one-shot while
  tokens x hidden x 2 x world x element bytes <= _use_oneshot_heuristics[world] MiB ({2: 512, 4: 64, 8: 42}, "based on
  all configs of trtllm_allreduce_fusion on B200"); other world sizes have no entry (no fused kernel).
- mnnvl backend (NVSwitch multicast; include/flashinfer/comm/trtllm_mnnvl_allreduce.cuh): one-shot
  (oneshotAllreduceFusionKernel) stores each token to the multicast buffer, then sums the p copies and runs the
  RMSNorm in the same kernel; two-shot is twoshotAllreduceKernel (scatter to the token's owner rank, reduce, broadcast
  through the multicast buffer: two exchanges) followed by a separate rmsNormLamport kernel -- the norm is a kernel
  of its own there. AUTO (use_oneshot unset: vLLM for this backend, vllm/compilation/passes/fusion/
  allreduce_rms_fusion.py _select_flashinfer_allreduce_use_oneshot; SGLang) takes one-shot while tokens x hidden x
  world x element bytes <= MNNVL_ONE_SHOT_THRESHOLD = 64 x 1024 x 8 x 2 = 1 MiB (flashinfer/comm/trtllm_mnnvl_ar.py
  MNNVLAllreduceFusionStrategy.select_strategy).
"""

from __future__ import annotations

from autotune.capability.engine_profile import AllReducePath

MIB = 1 << 20
TRTLLM_ONE_SHOT_MAX_COMM_MIB = {2: 512, 4: 64, 8: 42}  # trtllm_ar.py _use_oneshot_heuristics
MNNVL_ONE_SHOT_MAX_COMM_BYTES = 64 * 1024 * 8 * 2  # trtllm_mnnvl_ar.py MNNVL_ONE_SHOT_THRESHOLD


def trtllm_fused_path(world: int) -> AllReducePath | None:
    """The trtllm backend's fused kernel on `world` ranks: one-shot up to the message (per rank) whose
    2 x world copies fit the heuristic's MiB, two exchanges above it, the norm inside; None where FlashInfer has
    no heuristic for the world size."""
    comm_mib = TRTLLM_ONE_SHOT_MAX_COMM_MIB.get(world)
    if comm_mib is None:
        return None
    return AllReducePath("fused_trtllm", float("inf"), comm_mib * MIB / (2 * world), two_shot_syncs=2)


def mnnvl_fused_path(world: int) -> AllReducePath:
    """The mnnvl backend's fused kernel on `world` ranks: one-shot (norm inside) while world copies of the message
    fit MNNVL_ONE_SHOT_MAX_COMM_BYTES, else a two-exchange all-reduce and a norm kernel of its own."""
    return AllReducePath(
        "fused_mnnvl", float("inf"), MNNVL_ONE_SHOT_MAX_COMM_BYTES / world, two_shot_syncs=2, two_shot_norm_kernel=True
    )
