"""Collectives costed on the box's topology: latency + the most loaded link.

A collective is turned into a traffic matrix (bytes from GPU i to GPU j); every byte loads the links on
its path: the sending GPU's link, the PCIe switch uplinks it crosses, the socket interconnect, or NVLink.
Time = latency + max over links of (bytes / usable bandwidth). This is what makes 8 PCIe GPUs behind two
switches on two sockets cost differently from 8 NVLink GPUs with the same per-GPU bandwidth.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from autotune.perf import efficiency as eff
from autotune.specs import HardwareProfile

GB = 1e9


@dataclass(frozen=True)
class Topology:
    gpu_link_gbs: tuple[float, ...]  # raw PCIe per direction, per GPU
    nvlink_gbs: tuple[float, ...]
    switch_of: tuple[int, ...]  # PCIe switch group of each GPU (its own index when directly attached)
    socket_of: tuple[int, ...]
    uplink_gbs: float
    socket_gbs: float
    labels: tuple[tuple[str, ...], ...]
    p2p: tuple[tuple[bool, ...], ...]


def _groups(n: int, same) -> tuple[int, ...]:
    group = list(range(n))
    for i in range(n):
        for j in range(i):
            if same(i, j):
                group[i] = group[j]
                break
    return tuple(group)


@lru_cache(maxsize=64)
def _topology(fingerprint: str, hw_holder: _Holder) -> Topology:
    hw = hw_holder.hw
    n = hw.num_gpus
    links = hw.links
    gpu_gbs = tuple(a.pcie_gbs for a in hw.accelerators)
    uplink = hw.pcie_switch_uplink_gbs or max(gpu_gbs)
    socket = hw.host.inter_socket_gbs or max(gpu_gbs)
    return Topology(
        gpu_link_gbs=gpu_gbs,
        nvlink_gbs=tuple(a.nvlink_gbs for a in hw.accelerators),
        switch_of=_groups(n, lambda i, j: links[i][j] in ("PIX", "PXB")),
        socket_of=_groups(n, lambda i, j: links[i][j] != "SYS"),
        uplink_gbs=uplink,
        socket_gbs=socket,
        labels=links,
        p2p=hw.p2p,
    )


class _Holder:
    """Lets lru_cache key a profile by its fingerprint (profiles hold dicts and are not hashable)."""

    def __init__(self, hw: HardwareProfile) -> None:
        self.hw = hw

    def __hash__(self) -> int:
        return hash(self.hw.fingerprint)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Holder) and other.hw.fingerprint == self.hw.fingerprint


def topology(hw: HardwareProfile) -> Topology:
    return _topology(hw.fingerprint, _Holder(hw))


def transport(topo: Topology, group: tuple[int, ...]) -> str:
    pairs = [(i, j) for i in group for j in group if i != j]
    if pairs and all(topo.labels[i][j].startswith("NV") for i, j in pairs):
        return "nvlink"
    return "shm" if any(not topo.p2p[i][j] for i, j in pairs) else "p2p"


def transfer_s(topo: Topology, traffic: dict[tuple[int, int], float]) -> float:
    """Seconds for a traffic matrix, bound by its most loaded link (loads weighted by path efficiency)."""
    load: dict[tuple, float] = defaultdict(float)
    capacity: dict[tuple, float] = {}
    for (i, j), nbytes in traffic.items():
        if i == j or nbytes <= 0:
            continue
        if topo.labels[i][j].startswith("NV"):
            eff_bytes = nbytes / eff.NVLINK_COLLECTIVE_EFFICIENCY
            for key, bw in ((("nv-out", i), topo.nvlink_gbs[i]), (("nv-in", j), topo.nvlink_gbs[j])):
                load[key] += eff_bytes
                capacity[key] = bw
            continue
        path_eff = eff.PCIE_COLLECTIVE_EFFICIENCY if topo.p2p[i][j] else eff.SHM_EFFICIENCY
        eff_bytes = nbytes / path_eff
        hops = [(("out", i), topo.gpu_link_gbs[i]), (("in", j), topo.gpu_link_gbs[j])]
        if topo.switch_of[i] != topo.switch_of[j]:
            hops += [(("up", topo.switch_of[i]), topo.uplink_gbs), (("down", topo.switch_of[j]), topo.uplink_gbs)]
        if topo.socket_of[i] != topo.socket_of[j]:
            hops.append((("socket", topo.socket_of[i], topo.socket_of[j]), topo.socket_gbs / path_eff))
        for key, bw in hops:
            load[key] += eff_bytes
            capacity[key] = bw
    if not load:
        return 0.0
    return max(load[key] / (capacity[key] * GB) for key in load)


def ring_order(topo: Topology, group: tuple[int, ...]) -> tuple[int, ...]:
    """Order a ring so that GPUs of one switch, then of one socket, are neighbours (as NCCL does)."""
    return tuple(sorted(group, key=lambda g: (topo.socket_of[g], topo.switch_of[g], g)))


def _ring_traffic(topo: Topology, group: tuple[int, ...], bytes_per_edge: float) -> dict:
    ring = ring_order(topo, group)
    return {(ring[k], ring[(k + 1) % len(ring)]): bytes_per_edge for k in range(len(ring))}


def _latency_s(topo: Topology, group: tuple[int, ...], steps: int) -> float:
    base_us, step_us = eff.COLLECTIVE_LATENCY_US[transport(topo, group)]
    return (base_us + steps * step_us) * 1e-6


def measured_time_s(hw: HardwareProfile, name: str, p: int, nbytes: float) -> float:
    """Time of a collective from the profile's measured curve (log-log interpolation between points;
    beyond the largest point, its bus bandwidth); 0 when no curve was measured for this group size."""
    curve = hw.measured.collectives.get(f"{name}/{p}", ()) if hw.measured else ()
    if not curve:
        return 0.0
    points = sorted(curve, key=lambda pt: pt.message_bytes)
    sizes = [pt.message_bytes for pt in points]
    if nbytes <= sizes[0]:
        return points[0].latency_us * 1e-6
    if nbytes >= sizes[-1]:
        last = points[-1]
        return last.latency_us * 1e-6 + (nbytes - last.message_bytes) * 2 * (p - 1) / p / (last.busbw_gbs * GB)
    k = bisect.bisect_right(sizes, nbytes)
    lo, hi = points[k - 1], points[k]
    frac = math.log(nbytes / lo.message_bytes) / math.log(hi.message_bytes / lo.message_bytes)
    return math.exp(math.log(lo.latency_us) + frac * math.log(hi.latency_us / lo.latency_us)) * 1e-6


def all_reduce_s(hw: HardwareProfile, group: tuple[int, ...], nbytes: float, algorithm: str = "nccl") -> float:
    """All-reduce of `nbytes` per rank. algorithm: nccl (ring) or custom (one-shot P2P kernel)."""
    p = len(group)
    if p <= 1 or nbytes <= 0:
        return 0.0
    topo = topology(hw)
    if algorithm == "custom" and custom_allreduce_applies(topo, group):
        # one-shot: every rank reads every peer's buffer once
        traffic = {(j, i): nbytes for i in group for j in group if i != j}
        return eff.CUSTOM_ALLREDUCE_LATENCY_US * 1e-6 + transfer_s(topo, traffic)
    if tuple(group) == tuple(range(p)):  # curves are measured on the first p GPUs
        measured = measured_time_s(hw, "all_reduce", p, nbytes)
        if measured:
            return measured
    latency = _latency_s(topo, group, 2 * (p - 1))
    return latency + transfer_s(topo, _ring_traffic(topo, group, 2 * (p - 1) / p * nbytes))


def custom_allreduce_applies(topo: Topology, group: tuple[int, ...]) -> bool:
    """vLLM/SGLang custom all-reduce runs on 2 P2P GPUs or a fully NVLinked group; engines disable it otherwise
    (vllm custom_all_reduce.py: "not supported on more than two PCIe-only GPUs")."""
    kind = transport(topo, group)
    return kind == "nvlink" or (len(group) == 2 and kind == "p2p")


def all_gather_s(hw: HardwareProfile, group: tuple[int, ...], out_bytes: float) -> float:
    """All-gather producing `out_bytes` on every rank (reduce-scatter of the same size costs the same)."""
    p = len(group)
    if p <= 1 or out_bytes <= 0:
        return 0.0
    topo = topology(hw)
    return _latency_s(topo, group, p - 1) + transfer_s(topo, _ring_traffic(topo, group, (p - 1) / p * out_bytes))


def all_to_all_s(hw: HardwareProfile, group: tuple[int, ...], send_bytes: float) -> float:
    """All-to-all where each rank sends `send_bytes` in total, spread evenly over all ranks (itself included)."""
    p = len(group)
    if p <= 1 or send_bytes <= 0:
        return 0.0
    topo = topology(hw)
    traffic = {(i, j): send_bytes / p for i in group for j in group if i != j}
    return _latency_s(topo, group, p - 1) + transfer_s(topo, traffic)


def send_s(hw: HardwareProfile, src: int, dst: int, nbytes: float) -> float:
    """Point-to-point copy (pipeline stage hand-off, KV transfer between prefill and decode)."""
    if src == dst or nbytes <= 0:
        return 0.0
    topo = topology(hw)
    return _latency_s(topo, (src, dst), 1) + transfer_s(topo, {(src, dst): nbytes})
