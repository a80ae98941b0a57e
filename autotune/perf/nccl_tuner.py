"""NCCL's own tuner where it differs from the link model (perf/comm.py): the ring search that fails across the sockets
of an AMD host for newer GPUs, and the protocol its rating then picks. Constants and sources: perf/comm_rates.py."""

from __future__ import annotations

import math

from autotune.perf import comm_rates as cr
from autotune.perf.topology import Topology
from autotune.specs import HardwareProfile


def _compute_capability(arch: str) -> int:
    """120 for "sm_120", 90 for "sm_90a"; 0 for a non-CUDA arch."""
    digits = "".join(c for c in arch.removeprefix("sm_") if c.isdigit()) if arch.startswith("sm_") else ""
    return int(digits) if digits else 0


def ring_search_fails(hw: HardwareProfile, topo: Topology, group: tuple[int, ...]) -> bool:
    """NCCL's ring search finds no ring for a PCIe group and falls back to its 0.1 GB/s one-channel graph: the ring
    crosses the sockets of an AMD host, whose inter-CPU link NCCL rates below the last speed it searches for the
    group's GPUs (comm_rates.NCCL_AMD_INTER_CPU_GBS)."""
    if not topo.amd_host or len({topo.socket_of[g] for g in group}) < 2:
        return False
    cc = min(_compute_capability(hw.accelerators[g].arch) for g in group)
    floor = next(speed for start, speed in cr.NCCL_RING_SEARCH_MIN_GBS if cc >= start)
    return floor > cr.NCCL_AMD_INTER_CPU_GBS


def tuner_picks(latency_s: tuple[float, ...], s_per_byte: tuple[float, ...]) -> tuple[tuple[float, int], ...]:
    """The lower envelope of the lines latency + bytes x s_per_byte: (bytes below which, index) in increasing size,
    the last segment unbounded (each line's rating is linear, so the choice changes only where two lines cross)."""
    cuts = sorted(
        {(latency_s[j] - latency_s[i]) / (s_per_byte[i] - s_per_byte[j])
         for i in range(len(latency_s)) for j in range(len(latency_s))
         if s_per_byte[i] > s_per_byte[j] and latency_s[j] > latency_s[i]}
    )  # fmt: skip

    def best(x: float) -> int:
        rated = [lat + x * spb for lat, spb in zip(latency_s, s_per_byte, strict=True)]
        return rated.index(min(rated))

    picks: list[tuple[float, int]] = []
    for lo, hi in zip([0.0, *cuts], [*cuts, math.inf], strict=True):
        k = best(lo + 1.0 if hi == math.inf else (lo + hi) / 2)
        if picks and picks[-1][1] == k:
            picks[-1] = (hi, k)
        else:
            picks.append((hi, k))
    return tuple(picks)
