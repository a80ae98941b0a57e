"""What the vllm-ascend platform options (PhasePlan.platform, search dimensions ascend_* / hccl_*) change in a step.

Pure functions over the plan's platform dict; perf/ops.py applies them. Every factor below is a labelled prior
(no public per-option NPU measurement was found) except FlashComm1's, which is arithmetic: norms run on the
rank's 1/tp share of the tokens between its reduce-scatter and all-gather.
"""

from __future__ import annotations

from collections.abc import Mapping

ENGINE = "vllm-ascend"
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
# HCCL_OP_EXPANSION_MODE=AIV expands collectives on the AI vector cores instead of the AI CPU scheduler: lower
# launch latency for small messages. Prior: 0.7x the time of a collective up to 1 MiB.
AIV_SMALL_BYTES = 1 << 20
AIV_SMALL_FACTOR = 0.7
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
    if kind == "norm" and platform.get("flashcomm1") == "on" and tp > 1:
        speed *= tp  # the norm sees only this rank's 1/tp of the tokens (sequence parallel)
    return speed


def collective_factor(platform: Mapping[str, str], nbytes: float) -> float:
    return AIV_SMALL_FACTOR if platform.get("hccl_op_expansion") == "AIV" and nbytes <= AIV_SMALL_BYTES else 1.0


def decode_launch_us(platform: Mapping[str, str]) -> float:
    """Per-layer launch cost of a vllm-ascend decode step under its graph mode."""
    return (
        FULL_GRAPH_DECODE_LAUNCH_US if platform.get("graph_mode") == "FULL_DECODE_ONLY" else PIECEWISE_DECODE_LAUNCH_US
    )


def overlaps_shared_experts(platform: Mapping[str, str]) -> bool:
    return platform.get("multistream_shared_expert") == "on"
