"""What the vllm-ascend platform options (PhasePlan.platform, search dimensions ascend_* / hccl_*) change in a step
(for engines whose profile has `ascend_platform`).

Pure functions over the plan's platform dict; perf/ops.py applies them. Every factor below is a labelled prior
(no public per-option NPU measurement was found) except FlashComm1's, which is arithmetic: norms run on the
rank's 1/tp share of the tokens between its reduce-scatter and all-gather.
"""

from __future__ import annotations

from collections.abc import Mapping

# Decode launch cost per layer, us. vllm-ascend's default cudagraph mode is vLLM's FULL_AND_PIECEWISE, which the
# platform runs as piecewise ACL graphs with attention launched between the pieces (vllm_ascend/platform.py:
# 593-640); FULL_DECODE_ONLY captures the whole decode step (platform.py:630-640). Priors: 25 us per layer for the
# eager attention launches between pieces, 4 us per layer for a full-graph replay.
PIECEWISE_DECODE_LAUNCH_US = 25.0
FULL_GRAPH_DECODE_LAUNCH_US = 4.0
# weight_nz_mode (vllm_ascend/ascend_config.py:247-255): 1 (default) keeps quantised weights in the cube unit's
# fractal NZ layout, 2 also bf16/fp16 weights, 0 none. Priors: a weight GEMM on ND-layout weights runs at 0.9 of NZ.
ND_WEIGHT_GEMM_SPEED = 0.9
WEIGHT_KINDS = ("gemm", "grouped_moe")
# --- HCCL collectives (vllm-ascend's device communicator, vllm_ascend/distributed/device_communicators/
# npu_communicator.py:23). Over an HCCS full mesh (Atlas 800I A2: every pair HCCS) HCCL runs mesh algorithms: each
# rank exchanges its 1/p shares with all p-1 peers at once, bound by the card's aggregate HCCS bandwidth
# (Accelerator.nvlink_gbs, per direction); over PCIe a ring bound by the slowest PCIe hop of the group.
# Latency per collective: a fixed launch part plus one part per algorithm step. Priors (no public HCCL latency
# table was found): 20 us launch through the AI CPU, 8 us with HCCL_OP_EXPANSION_MODE=AIV (expansion on the vector
# cores, the mode vllm-ascend's tutorials set: docs/source/tutorials/models/Qwen3-235B-A22B.md:347); 1 us per HCCS
# mesh step, 3 us per PCIe ring step.
HCCL_LAUNCH_US = {"default": 20.0, "AIV": 8.0}
HCCL_STEP_US = {"hccs": 1.0, "pcie": 3.0}
# data passes per rank (in units of the message) of each collective: all-reduce = reduce-scatter + all-gather
HCCL_PASSES = {"allreduce": 2.0, "allgather": 1.0, "dcp_allgather": 1.0, "reducescatter": 1.0, "all2all": 1.0}


def hccl_s(
    name: str, nbytes: float, ranks: int, fabric: bool, bottleneck_gbs: float, platform: Mapping[str, str]
) -> float:
    """Seconds of one HCCL collective of `nbytes` over `ranks` NPUs: on an HCCS mesh (`fabric`) or a PCIe ring whose
    slowest hop moves `bottleneck_gbs` per direction."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    launch = HCCL_LAUNCH_US["AIV" if platform.get("hccl_op_expansion") == "AIV" else "default"]
    if name == "pp_send":
        return (launch + HCCL_STEP_US["hccs" if fabric else "pcie"]) * 1e-6 + nbytes / (bottleneck_gbs * 1e9)
    passes = HCCL_PASSES.get(name, 1.0)
    share = (ranks - 1) / ranks
    steps = passes * (1 if fabric else ranks - 1)  # a mesh phase is one exchange; a ring phase p-1 hops
    step_us = HCCL_STEP_US["hccs" if fabric else "pcie"]
    return (launch + steps * step_us) * 1e-6 + passes * share * nbytes / (bottleneck_gbs * 1e9)


# multistream_overlap_shared_expert (ascend_config.py:139): shared experts on a second stream beside the routed
# ones; what stays exposed of the shorter of the two (stream sync, contention). Prior.
MULTISTREAM_RESIDUE = 0.2


def op_speed(platform: Mapping[str, str], kind: str, dtype: str, tp: int) -> float:
    """Speed multiplier of one op (1.0 = the platform default)."""
    speed = 1.0
    if kind in WEIGHT_KINDS:
        nz = platform.get("weight_nz")  # absent = mode 1
        in_nz = nz != "off" if dtype in ("int8", "int4") else nz == "all"
        speed *= 1.0 if in_nz else ND_WEIGHT_GEMM_SPEED
    return speed


def op_share(platform: Mapping[str, str], kind: str, tp: int) -> float:
    """Share of an op's tokens one rank processes (1.0 = all): under flashcomm1 the norm sees only this rank's 1/tp
    of the tokens (sequence parallel), so both its compute and its memory traffic shrink."""
    return 1.0 / tp if kind == "norm" and platform.get("flashcomm1") == "on" and tp > 1 else 1.0


def decode_launch_us(platform: Mapping[str, str]) -> float:
    """Per-layer launch cost of a vllm-ascend decode step under its graph mode."""
    return (
        FULL_GRAPH_DECODE_LAUNCH_US if platform.get("graph_mode") == "FULL_DECODE_ONLY" else PIECEWISE_DECODE_LAUNCH_US
    )


def overlaps_shared_experts(platform: Mapping[str, str]) -> bool:
    return platform.get("multistream_shared_expert") == "on"
