"""The box's links as a model sees them, and the time a traffic matrix takes on them.

A collective or a copy is a traffic matrix (bytes from GPU i to GPU j); every byte loads the links on its path:
the sending GPU's link, the PCIe switch uplinks it crosses, the socket interconnect, or NVLink. Time = the most
loaded link's bytes / usable bandwidth. comm.py builds the matrices per algorithm and NCCL setting.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from autotune.perf import comm_rates as cr
from autotune.perf import efficiency as eff
from autotune.specs import HardwareProfile
from autotune.specs.hardware import on_fabric

GB = 1e9
_SYS = cr.NCCL_PATH_RANK["SYS"]


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
    path_rank: tuple[tuple[int, ...], ...]  # NCCL path type of each pair (comm_rates.NCCL_PATH_RANK)
    amd_host: bool  # NCCL's default P2P level depends on the CPU vendor
    nvlink_latency_factor: tuple[float, ...] = ()  # per GPU: its arch's P2P-kernel fixed-time factor on NVLink


def _groups(n: int, same) -> tuple[int, ...]:
    group = list(range(n))
    for i in range(n):
        for j in range(i):
            if same(i, j):
                group[i] = group[j]
                break
    return tuple(group)


def _path_rank(label: str) -> int:
    if on_fabric(label):
        return cr.NCCL_PATH_RANK["NVL"]
    if label == "X":
        return cr.NCCL_PATH_RANK["LOC"]
    return cr.NCCL_PATH_RANK[cr.NCCL_LABEL_PATH.get(label, "SYS")]


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
        path_rank=tuple(tuple(_path_rank(label) for label in row) for row in links),
        amd_host="AMD" in hw.host.cpu_model.upper(),
        nvlink_latency_factor=tuple(cr.NVLINK_P2P_LATENCY_FACTOR_BY_ARCH.get(a.arch, 1.0) for a in hw.accelerators),
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
    """What the hardware allows between all ranks: nvlink, p2p, or shm (some pair without peer access)."""
    pairs = [(i, j) for i in group for j in group if i != j]
    if pairs and all(on_fabric(topo.labels[i][j]) for i, j in pairs):
        return "nvlink"
    return "shm" if any(not topo.p2p[i][j] for i, j in pairs) else "p2p"


def transfer_s(
    topo: Topology,
    traffic: dict[tuple[int, int], float],
    level: int = _SYS,
    p2p_eff: float | None = None,
) -> float:
    """Seconds for a traffic matrix, bound by its most loaded link (loads weighted by path efficiency; `p2p_eff`
    defaults to efficiency.PCIE_COLLECTIVE_EFFICIENCY).
    A PCIe pair moves data P2P when the hardware allows it and its NCCL path rank is within `level`, else
    through host shared memory (slower where NCCL chose it, slowest where the hardware has no P2P)."""
    if p2p_eff is None:  # read at call time (a default bound at import would keep the value the module had then)
        p2p_eff = eff.PCIE_COLLECTIVE_EFFICIENCY
    load: dict[tuple, float] = defaultdict(float)
    capacity: dict[tuple, float] = {}
    shm_eff = p2p_eff * cr.NCCL_SHM_VS_P2P
    for (i, j), nbytes in traffic.items():
        if i == j or nbytes <= 0:
            continue
        if on_fabric(topo.labels[i][j]) and level >= cr.NCCL_PATH_RANK["NVL"]:
            eff_bytes = nbytes / eff.NVLINK_COLLECTIVE_EFFICIENCY
            for key, bw in ((("nv-out", i), topo.nvlink_gbs[i]), (("nv-in", j), topo.nvlink_gbs[j])):
                load[key] += eff_bytes
                capacity[key] = bw
            continue
        path_eff = p2p_eff if topo.path_rank[i][j] <= level else shm_eff
        if not topo.p2p[i][j]:
            path_eff = eff.SHM_EFFICIENCY
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


def _ring_edges(topo: Topology, group: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    ring = ring_order(topo, group)
    return tuple((ring[k], ring[(k + 1) % len(ring)]) for k in range(len(ring)))
