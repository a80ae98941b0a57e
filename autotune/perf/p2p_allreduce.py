"""The engines' P2P all-reduce kernels (custom all-reduce, FlashInfer, torch symmetric memory, PCIe-IPC wire):
which paths an engine's dispatch offers on a group (its profile's `allreduce_paths`) and what one path costs, a
fixed time per synchronised round plus one- or two-shot wire over the box's links. `perf/comm.py` picks among
them and NCCL (`all_reduce`, `all_reduce_fn`); this module does not import it."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from autotune.capability.engine_profile import AllReducePath
from autotune.capability.profiles import profile
from autotune.perf import comm_rates as cr
from autotune.perf import efficiency as eff
from autotune.perf.topology import GB, Topology, _Holder, topology, transfer_s, transport
from autotune.specs import HardwareProfile


def allreduce_paths(engine: str, hw: HardwareProfile, group: tuple[int, ...]) -> tuple[AllReducePath, ...]:
    """The engine's P2P all-reduce paths on `group` in its dispatch order (the engine profile's `allreduce_paths`,
    cited there: which kernels run on which interconnect, arch and world size, up to which size); () = NCCL only."""
    dispatch = profile(engine).allreduce_paths
    if dispatch is None or len(group) <= 1:
        return ()
    return dispatch(hw.gpu.arch, len(group), transport(topology(hw), group))


def custom_allreduce_applies(topo: Topology, group: tuple[int, ...]) -> bool:
    """The P2P all-reduce kernels need 2 P2P GPUs or a fully NVLinked group; engines disable them otherwise
    (vllm custom_all_reduce.py:268-273: "not supported on more than two PCIe-only GPUs"; the profiles' allreduce_paths
    say so per engine)."""
    kind = transport(topo, group)
    return kind == "nvlink" or (len(group) == 2 and kind == "p2p")


def pcie_ipc_applies(topo: Topology, group: tuple[int, ...]) -> bool:
    """FlashInfer PCIe-IPC all-reduce: world 2/4/8 with peer access between all ranks."""
    return len(group) in cr.PCIE_IPC_WORLD_SIZES and transport(topo, group) != "shm"


def pcie_ipc_max_bytes(phase, row_bytes: float) -> float:
    """Largest all-reduce the engines hand to PCIe-IPC for a phase plan: decode width (CUDA-graph max batch =
    max_running, x draft tokens per request when speculating) x one row. SGLang's rule; vLLM's capture sizes
    reach up to 2x that, rows a decode step never issues."""
    draft = getattr(getattr(phase, "speculative", None), "draft_tokens", 0)
    return float(max(1, phase.batching.max_running) * max(1, draft) * row_bytes)


def _one_shot(group: tuple[int, ...], nbytes: float) -> dict:
    return {(j, i): nbytes for i in group for j in group if i != j}  # every rank reads every peer's buffer


def _two_shot(topo: Topology, group: tuple[int, ...], nbytes: float) -> dict:
    """Reduce-scatter + all-gather over P2P. Split evenly over two sockets it runs as islands (FlashInfer's 4+4
    decomposition): reduce inside each socket, swap 1/k of the message with the same-index peer across, gather
    inside again, so the socket link carries the message once per direction."""
    p = len(group)
    sockets = sorted({topo.socket_of[g] for g in group})
    islands = [tuple(g for g in group if topo.socket_of[g] == s) for s in sockets]
    if len(islands) == 2 and len(islands[0]) == len(islands[1]) and p > 2:
        k = p // 2
        traffic = {(i, j): 2 * nbytes / k for isl in islands for i in isl for j in isl if i != j}
        for a, b in zip(*islands, strict=True):
            traffic[(a, b)] = traffic[(b, a)] = nbytes / k
        return traffic
    return {(i, j): 2 * nbytes / p for i in group for j in group if i != j}


@lru_cache(maxsize=1024)
def _unit_wire_s(holder: _Holder, group: tuple[int, ...], shot: str, p2p_eff: float) -> float:
    """Seconds per byte of message of a one- or two-shot all-reduce on `group` (traffic is linear in bytes)."""
    topo = topology(holder.hw)
    traffic = _one_shot(group, 1.0) if shot == "one" else _two_shot(topo, group, 1.0)
    return transfer_s(topo, traffic, p2p_eff=p2p_eff)


def path_s(hw: HardwareProfile, group: tuple[int, ...], path: AllReducePath, nbytes: float) -> float:
    """Seconds of an all-reduce of `nbytes` on one P2P path, whatever the engine's dispatch would pick (a kernel
    benchmarked on its own: tests/bench/calibration_check.py)."""
    return _path_s(_Holder(hw), tuple(group), path, float(nbytes))


class PathTerms(NamedTuple):
    """One P2P path on one group, resolved once (path_terms): its size limits and, per shot, the seconds per byte
    and the fixed seconds (synchronised rounds x the kernels' fixed time, plus its copies, _copy_terms)."""

    name: str
    max_bytes: float
    one_shot_max_bytes: float
    one_unit_s: float
    one_fixed_s: float
    two_unit_s: float
    two_fixed_s: float
    wave_bytes: float  # message bytes per pass of a two-stage kernel's fixed grid (0: not one, _two_stage_wire_s)
    two_wire_s: float  # the two-shot link time per byte, without the copies
    copy_unit_s: float


def path_terms(holder: _Holder, group: tuple[int, ...], path: AllReducePath) -> PathTerms:
    latency_s = custom_latency_s(topology(holder.hw), group)
    one = _unit_wire_s(holder, group, "one", eff.PCIE_COLLECTIVE_EFFICIENCY)
    two = _unit_wire_s(holder, group, "two", eff.PCIE_COLLECTIVE_EFFICIENCY)
    copy_fixed_s, copy_unit_s = _copy_terms(holder.hw, path)
    return PathTerms(
        path.name, path.max_bytes, path.one_shot_max_bytes,
        one + copy_unit_s, latency_s * path.one_shot_syncs + copy_fixed_s,
        two + copy_unit_s, latency_s * path.two_shot_syncs + copy_fixed_s,
        path.two_stage_grid_bytes * len(group), two, copy_unit_s,
    )  # fmt: skip


def terms_s(t: PathTerms, nbytes: float) -> float:
    """Time of a P2P all-reduce of `nbytes` on a resolved path: fixed time + one- or two-shot wire, a two-stage
    kernel's wire by the passes of its grid (_two_stage_wire_s)."""
    if nbytes <= t.one_shot_max_bytes:
        return _custom_wire_s(nbytes, t.one_unit_s, t.one_fixed_s)
    if t.wave_bytes:
        return t.two_fixed_s + nbytes * t.copy_unit_s + _two_stage_wire_s(nbytes, t.wave_bytes, t.two_wire_s)
    return _custom_wire_s(nbytes, t.two_unit_s, t.two_fixed_s)


def _path_s(holder: _Holder, group: tuple[int, ...], path: AllReducePath, nbytes: float) -> float:
    return terms_s(path_terms(holder, group, path), nbytes)


def _two_stage_wire_s(nbytes: float, wave_bytes: float, unit_wire_s: float) -> float:
    """Wire time of a two-stage kernel whose grid covers `wave_bytes` of the message per pass (AllReducePath
    .two_stage_grid_bytes x p): its passes, each a reduce-scatter pass and an all-gather pass taking at least
    comm_rates.CUSTOM_TWO_STAGE_WAVE_US, or its two-shot traffic at the link rate where that is longer."""
    waves = math.ceil(nbytes / wave_bytes)
    return max(waves * cr.CUSTOM_TWO_STAGE_WAVE_US * 1e-6, nbytes * unit_wire_s)


def _copy_terms(hw: HardwareProfile, path: AllReducePath) -> tuple[float, float]:
    """(fixed seconds, seconds per message byte) of a path's device copies of the message, each reading and writing
    the message at the GPU's memory bandwidth: `copies` each a kernel of comm_rates.DEVICE_COPY_MIN_US,
    `in_kernel_copies` inside the all-reduce kernel (no launch of their own)."""
    if not path.copies and not path.in_kernel_copies:
        return 0.0, 0.0
    copies = path.copies + path.in_kernel_copies
    return path.copies * cr.DEVICE_COPY_MIN_US * 1e-6, copies * 2.0 / (hw.gpu.mem_bw_gbs * GB)


def custom_latency_s(topo: Topology, group: tuple[int, ...]) -> float:
    """Fixed time of the engines' custom all-reduce on `group`: a launch part plus one flag exchange per peer, the
    same form on NVLink and PCIe (comm_rates.engine_ar_latency_us), longer on an NVLink group of parts whose
    small-message latency is (comm_rates.NVLINK_P2P_LATENCY_FACTOR_BY_ARCH: B200)."""
    latency_s = cr.engine_ar_latency_us(len(group)) * 1e-6
    factor = max((topo.nvlink_latency_factor[g] for g in group), default=1.0) if topo.nvlink_latency_factor else 1.0
    if factor != 1.0 and transport(topo, group) == "nvlink":  # the pair check only where a factor applies
        latency_s *= factor
    return latency_s


def _custom_wire_s(nbytes: float, unit_wire_s: float, latency_s: float) -> float:
    """Custom all-reduce time of `nbytes` at `unit_wire_s` seconds per byte (one- or two-shot, _unit_wire_s)."""
    return latency_s + nbytes * unit_wire_s
