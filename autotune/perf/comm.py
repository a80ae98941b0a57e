"""Collectives costed on the box's topology: latency + the most loaded link, per algorithm and NCCL setting.

A collective is turned into a traffic matrix on the box's links (perf/topology.py: every byte loads the links
on its path). Time = latency + max over links of (bytes / usable bandwidth). This is what makes 8 PCIe GPUs behind two
switches on two sockets cost differently from 8 NVLink GPUs with the same per-GPU bandwidth.

The plan's `Comm` selects the algorithm and the NCCL environment:
- nccl: a ring (NCCL's tuner picks LL or Simple per size unless NCCL_PROTO restricts it); NCCL_P2P_LEVEL
  decides per GPU pair whether NCCL uses P2P or host shared memory (SHM); NCCL_MIN_NCHANNELS lifts the
  channel-bound rate of rings that cross the socket link. Constants and sources: perf/comm_rates.py.
- custom: the engine's own dispatch (its profile's allreduce_paths: vLLM's FlashInfer / custom kernel / torch
  symmetric memory, SGLang's custom kernel; on 2 P2P GPUs or a full-NVLink group, up to each path's size limit by
  arch and world size), NCCL beyond it.
- pcie_ipc: FlashInfer's PCIe-IPC all-reduce for world 2/4/8 with P2P between all ranks, up to the
  engine's workspace limit (decode-width reductions); NCCL above it. A probed curve ("pcie_ipc_all_reduce/8")
  replaces the link model.
Measured curves (`hw.measured.collectives`, all-reduce / all-gather / reduce-scatter / all-to-all on the first p
GPUs) answer for the NCCL setting they were taken under: "all_reduce/8" at NCCL defaults, "all_reduce/8
NCCL_PROTO=LL" under that setting (`probe --bench`). A setting without its own curve scales the defaults curve by
the model's ratio to it, so a setting the model ranks faster stays faster.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from autotune.perf import comm_rates as cr
from autotune.perf import efficiency as eff
from autotune.perf.nccl_tuner import ring_search_fails, tuner_picks
from autotune.perf.p2p_allreduce import _path_s, _unit_wire_s, path_terms, terms_s
from autotune.perf.p2p_allreduce import allreduce_paths as allreduce_paths  # the comm API, as before the split
from autotune.perf.p2p_allreduce import custom_allreduce_applies as custom_allreduce_applies
from autotune.perf.p2p_allreduce import custom_latency_s as custom_latency_s
from autotune.perf.p2p_allreduce import path_s as path_s
from autotune.perf.p2p_allreduce import pcie_ipc_applies as pcie_ipc_applies
from autotune.perf.p2p_allreduce import pcie_ipc_max_bytes as pcie_ipc_max_bytes
from autotune.perf.topology import Topology as Topology  # comm.topology / transport / transfer_s: the comm API
from autotune.perf.topology import _Holder, _ring_edges
from autotune.perf.topology import ring_order as ring_order
from autotune.perf.topology import topology as topology
from autotune.perf.topology import transfer_s as transfer_s
from autotune.perf.topology import transport as transport
from autotune.specs import HardwareProfile

GB = 1e9


@dataclass(frozen=True)
class NcclEnv:
    """The NCCL_* settings the model reads; None / 0 / () = NCCL's own choice."""

    p2p_level: int | None = None  # NCCL path rank up to which P2P is used (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE)
    min_channels: int = 0  # NCCL_MIN_NCHANNELS
    protos: tuple[str, ...] = ()  # NCCL_PROTO: enabled protocols


NCCL_DEFAULTS = NcclEnv()
# The setting measured curves were taken under: the rtx-pro-6000-x8 preset's curves come from p2pmark's NCCL
# all-reduce with no NCCL_* variables set (voipmonitor/rtx6kpro asus-esc8000a-e13p-broadcom-switches.md), and
# `probe --bench` runs NCCL with the box's environment unset.
MEASURED_CURVE_ENV = NCCL_DEFAULTS


def _level(value: str) -> int | None:
    value = value.strip().upper()
    if value.isdigit():
        return cr.NCCL_PATH_RANK[cr.NCCL_LEGACY_LEVELS[min(int(value), len(cr.NCCL_LEGACY_LEVELS) - 1)]]
    return cr.NCCL_PATH_RANK.get(value)


def _protos(value: str) -> tuple[str, ...]:
    """NCCL_PROTO: a comma list ("LL,Simple") or an exclusion ("^LL128"); names are case-insensitive."""
    names = {p.lower(): p for p in cr.NCCL_PROTO_BANDWIDTH}
    value = value.strip()
    exclude = value.startswith("^")
    listed = {names[p.strip().lower()] for p in value.lstrip("^").split(",") if p.strip().lower() in names}
    if exclude:
        return tuple(p for p in cr.NCCL_PROTO_BANDWIDTH if p not in listed)
    return tuple(p for p in cr.NCCL_PROTO_BANDWIDTH if p in listed)


@lru_cache(maxsize=256)
def _parse_env(items: tuple[tuple[str, str], ...]) -> NcclEnv:
    env = dict(items)
    level = _level(env["NCCL_P2P_LEVEL"]) if "NCCL_P2P_LEVEL" in env else None
    if env.get("NCCL_P2P_DISABLE", "0").strip() not in ("", "0"):
        level = cr.NCCL_PATH_RANK["LOC"]
    channels = env.get("NCCL_MIN_NCHANNELS", "").strip()
    return NcclEnv(
        p2p_level=level,
        min_channels=int(channels) if channels.isdigit() else 0,
        protos=_protos(env["NCCL_PROTO"]) if "NCCL_PROTO" in env else (),
    )


def nccl_env(setting=None) -> NcclEnv:
    """NcclEnv of a plan's `Comm`, of an NCCL_* dict, or of None (defaults)."""
    if setting is None:
        return NCCL_DEFAULTS
    if isinstance(setting, NcclEnv):
        return setting
    env = setting if isinstance(setting, dict) else getattr(setting, "nccl", None)
    if not env:
        return NCCL_DEFAULTS
    return _parse_env(tuple(sorted(env.items())))


def p2p_level(topo: Topology, group: tuple[int, ...], env: NcclEnv) -> int:
    """NCCL path rank up to which NCCL uses P2P in this communicator (paths.cc default rule unless set)."""
    if env.p2p_level is not None:
        return env.p2p_level
    if topo.amd_host and len(group) <= 2:
        return cr.NCCL_PATH_RANK[cr.NCCL_AMD_PAIR_P2P_LEVEL]
    return cr.NCCL_PATH_RANK[cr.NCCL_DEFAULT_P2P_LEVEL]


# --- NCCL ---------------------------------------------------------------------------------------------------


def _nccl_shape(topo: Topology, group: tuple[int, ...], env: NcclEnv) -> tuple[int, str, float, tuple[str, ...]]:
    """(P2P level, latency class, channel-bound fraction of the link rate, enabled protocols) of a ring."""
    level = p2p_level(topo, group, env)
    edges = _ring_edges(topo, group)
    nvlink = all(topo.labels[i][j].startswith("NV") for i, j in edges) and level >= cr.NCCL_PATH_RANK["NVL"]
    if nvlink:
        kind = "nvlink"
    elif any(not topo.p2p[i][j] for i, j in edges):
        kind = "no-p2p"
    elif any(topo.path_rank[i][j] > level for i, j in edges):
        kind = "shm"
    else:
        kind = "pcie"
    fraction = 1.0
    if not nvlink and len({topo.socket_of[g] for g in group}) > 1:
        fraction = max(cr.NCCL_CROSS_SOCKET_DEFAULT_FRACTION, min(1.0, env.min_channels / cr.NCCL_SATURATING_CHANNELS))
    protos = env.protos or (cr.NCCL_DEFAULT_PROTOS_NVLINK if nvlink else cr.NCCL_DEFAULT_PROTOS_PCIE)
    return level, kind, fraction, protos


def _step_latency_us(kind: str, proto: str) -> float:
    if kind == "nvlink":
        return cr.NCCL_STEP_LATENCY_US["nvlink"][proto]
    extra = {"pcie": 0.0, "shm": cr.NCCL_SHM_STEP_EXTRA_US, "no-p2p": cr.NO_P2P_STEP_EXTRA_US}[kind]
    step = cr.NCCL_PCIE_SIMPLE_STEP_US if proto == "Simple" else cr.NCCL_STEP_LATENCY_US["pcie"][proto]
    return step + extra


@dataclass(frozen=True)
class _NcclProfile:
    """A collective's NCCL cost on one group and environment, linear in its bytes: per enabled protocol, the
    fixed latency (s) and the seconds per byte on each ring edge (or pair). `tuner_picks`, when set: the protocol
    NCCL's tuner picks by its own rating, as (bytes per edge below which it applies, protocol index) segments in
    increasing size (a ring on NCCL's fallback graph: nccl_tuner.ring_search_fails, tuner_picks); else the fastest
    runs."""

    latency_s: tuple[float, ...]
    s_per_edge_byte: tuple[float, ...]
    tuner_picks: tuple[tuple[float, int], ...] = ()
    # (latency_s, s_per_edge_byte) per protocol, zipped once (time_s runs for every collective of every step)
    protocols: tuple[tuple[float, float], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocols", tuple(zip(self.latency_s, self.s_per_edge_byte, strict=True)))

    def time_s(self, bytes_per_edge: float) -> float:
        """The chosen protocol's time (a plain loop: this runs for every collective of every step)."""
        if self.tuner_picks:
            for below, k in self.tuner_picks:
                if bytes_per_edge < below:
                    return self.latency_s[k] + bytes_per_edge * self.s_per_edge_byte[k]
        best = None
        for lat, spb in self.protocols:
            t = lat + bytes_per_edge * spb
            if best is None or t < best:
                best = t
        return best


@lru_cache(maxsize=8192)
def _nccl_profile(holder: _Holder, group: tuple[int, ...], env: NcclEnv, steps: int, pattern: str) -> _NcclProfile:
    """The tuner's choice among the enabled protocols (latency + link-bound transfer / protocol bandwidth /
    channel fraction), for a unit load on the pattern's edges: `ring` (each ring edge), `all2all` (every ordered
    pair) or `pair` (group[0] -> group[1]). Cached: transfers are linear in bytes, so a step costs a lookup."""
    topo = topology(holder.hw)
    level, kind, fraction, protos = _nccl_shape(topo, group, env)
    if pattern == "ring":
        unit = dict.fromkeys(_ring_edges(topo, group), 1.0)
    elif pattern == "all2all":
        unit = {(i, j): 1.0 for i in group for j in group if i != j}
    else:
        unit = {(group[0], group[1]): 1.0}
    wire = transfer_s(topo, unit, level) / fraction
    picks = ()
    if pattern == "ring" and kind != "nvlink" and ring_search_fails(holder.hw, topo, group):
        # the tuner's time on the fallback graph: its latency table, and nBytes / (0.1 GB/s x protocol factor x
        # nRanks / nsteps), i.e. per ring-edge byte 1 / (0.1 GB/s x protocol factor) (comm_rates, tuning.cc:324-379)
        picks = tuner_picks(
            tuple((cr.NCCL_BASE_LATENCY_US[p] + steps * cr.NCCL_STEP_LATENCY_US["pcie"][p]) * 1e-6 for p in protos),
            tuple(1 / (cr.NCCL_FALLBACK_RING_GBS * GB * cr.NCCL_PROTO_BANDWIDTH[p]) for p in protos),
        )
    return _NcclProfile(
        latency_s=tuple((cr.NCCL_BASE_LATENCY_US[p] + steps * _step_latency_us(kind, p)) * 1e-6 for p in protos),
        s_per_edge_byte=tuple(wire / cr.NCCL_PROTO_BANDWIDTH[p] for p in protos),
        tuner_picks=picks,
    )


def _nccl_s(hw: HardwareProfile, group: tuple[int, ...], env: NcclEnv, steps: int, pattern: str, per_edge: float):
    """NCCL time of a collective with `steps` ring steps moving `per_edge` bytes on each edge of `pattern`."""
    return _nccl_profile(_Holder(hw), tuple(group), env, steps, pattern).time_s(per_edge)


# op list collective names -> the names probe --bench records curves under (probe/bench_comm.py); the
# all-reduce's PCIe-IPC kernel has its own curve, "pcie_ipc_all_reduce"
PROBED_NAMES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "dcp_allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "all2all": "all_to_all",
}


def probed_curve(hw: HardwareProfile, name: str, group: tuple[int, ...], env: NcclEnv) -> tuple[tuple, tuple, bool]:
    """(points sorted by size, their sizes, exact) of collective `name` ("all_gather") on `group`: the curve
    measured under `env` itself (exact), else the NCCL-defaults curve (exact only when `env` is the defaults),
    else empty. Curves are measured on the first p GPUs. Remembered per box, name, group and environment (a
    Context's collective cost functions each read one: comm.nccl_cost_fn; sorting it was ~10 us)."""
    return _probed_curve(_Holder(hw), name, tuple(group), env)


@lru_cache(maxsize=1024)
def _probed_curve(holder: _Holder, name: str, group: tuple[int, ...], env: NcclEnv) -> tuple[tuple, tuple, bool]:
    hw, p = holder.hw, len(group)
    if not hw.measured or not hw.measured.collectives or tuple(group) != tuple(range(p)):
        return (), (), False
    curves, prefix = hw.measured.collectives, f"{name}/{p}"
    curve, exact = curves.get(prefix, ()), env == MEASURED_CURVE_ENV
    if not exact:
        for key, points in curves.items():
            if key.startswith(prefix + " ") and _key_env(key) == env:
                curve, exact = points, True
                break
    points = tuple(sorted(curve, key=lambda pt: pt.message_bytes))
    return points, tuple(pt.message_bytes for pt in points), exact and bool(points)


def _key_env(key: str) -> NcclEnv:
    """NcclEnv of a curve key's setting: "all_reduce/8 NCCL_PROTO=LL NCCL_MIN_NCHANNELS=8"."""
    return nccl_env(dict(item.split("=", 1) for item in key.split()[1:] if "=" in item))


def measured_time_s(hw: HardwareProfile, name: str, p: int, nbytes: float) -> float:
    """Time of a collective from the profile's measured curve (log-log interpolation between points;
    beyond the largest point, its bus bandwidth); 0 when no curve was measured for this group size."""
    curve = hw.measured.collectives.get(f"{name}/{p}", ()) if hw.measured else ()
    if not curve:
        return 0.0
    points = sorted(curve, key=lambda pt: pt.message_bytes)
    return _curve_time_s(points, [pt.message_bytes for pt in points], p, nbytes)


def _curve_time_s(points: list, sizes: list[float], p: int, nbytes: float, bus_factor: float = 0.0) -> float:
    """measured_time_s on a curve's points sorted by size (`sizes`: their message sizes). Beyond the largest
    point, bytes move at its bus bandwidth / `bus_factor` (nccl-tests' busbw factor: all-reduce 2(p-1)/p, the
    default; all-gather, reduce-scatter, all-to-all (p-1)/p)."""
    if nbytes <= sizes[0]:
        return points[0].latency_us * 1e-6
    if nbytes >= sizes[-1]:
        last = points[-1]
        factor = bus_factor or 2 * (p - 1) / p
        return last.latency_us * 1e-6 + (nbytes - last.message_bytes) * factor / (last.busbw_gbs * GB)
    k = bisect.bisect_right(sizes, nbytes)
    lo, hi = points[k - 1], points[k]
    frac = math.log(nbytes / lo.message_bytes) / math.log(hi.message_bytes / lo.message_bytes)
    return math.exp(math.log(lo.latency_us) + frac * math.log(hi.latency_us / lo.latency_us)) * 1e-6


def _ring_all_reduce(p: int, nbytes: float) -> tuple[int, float]:
    """(ring steps, bytes on each ring edge) of a ring all-reduce of `nbytes` over `p` ranks."""
    steps, per_edge = 2 * (p - 1), 2 * (p - 1) / p * nbytes
    return steps, per_edge


def _nccl_all_reduce_s(hw: HardwareProfile, group: tuple[int, ...], nbytes: float, env) -> float:
    p = len(group)
    steps, per_edge = _ring_all_reduce(p, nbytes)
    model = _nccl_s(hw, group, env, steps, "ring", per_edge)
    points, sizes, exact = probed_curve(hw, "all_reduce", tuple(group), env)
    if points:
        measured = _curve_time_s(points, sizes, p, nbytes)
        if exact:
            return measured
        return measured * model / _nccl_s(hw, group, MEASURED_CURVE_ENV, steps, "ring", per_edge)
    return model


def _pcie_ipc_s(holder: _Holder, group: tuple[int, ...], nbytes: float) -> float:
    points, sizes, _ = probed_curve(holder.hw, "pcie_ipc_all_reduce", group, NCCL_DEFAULTS)
    if points:  # probe --bench timed FlashInfer's kernels on this box
        return _curve_time_s(points, sizes, len(group), nbytes)
    return _pcie_ipc_wire_s(nbytes, _unit_wire_s(holder, group, "two", cr.PCIE_IPC_EFFICIENCY), len(group))


def _pcie_ipc_wire_s(nbytes: float, unit_wire_s: float, p: int) -> float:
    """PCIe-IPC all-reduce time of `nbytes` over p ranks at `unit_wire_s` seconds per byte (two-shot, _unit_wire_s);
    its fixed time is the engines' P2P kernel latency (comm_rates.engine_ar_latency_us)."""
    return cr.engine_ar_latency_us(p) * 1e-6 + nbytes * unit_wire_s


@lru_cache(maxsize=65536)
def _all_reduce(
    holder: _Holder, group: tuple[int, ...], nbytes: float, algorithm: str, env: NcclEnv, ipc_max: float, engine: str
) -> tuple[str, float]:
    hw = holder.hw
    if algorithm == "custom":
        for path in allreduce_paths(engine, hw, group):
            if nbytes <= path.max_bytes:
                return path.name, _path_s(holder, group, path, nbytes)
    if algorithm == "pcie_ipc" and nbytes <= ipc_max and pcie_ipc_applies(topology(hw), group):
        return "pcie_ipc", _pcie_ipc_s(holder, group, nbytes)
    return "nccl", _nccl_all_reduce_s(hw, group, nbytes, env)


def all_reduce(
    hw: HardwareProfile,
    group: tuple[int, ...],
    nbytes: float,
    comm=None,
    ipc_max_bytes: float | None = None,
    engine: str = "vllm",
) -> tuple[str, float]:
    """(algorithm that ran, seconds) for an all-reduce of `nbytes` per rank. `comm` is the phase's `Comm`
    (its allreduce choice and NCCL env), an algorithm name, or None (engine default). `ipc_max_bytes` is the
    PCIe-IPC workspace limit (pcie_ipc_max_bytes); without it, SGLang's fallback width of 64 rows x 8192. `custom`
    runs `engine`'s dispatch (allreduce_paths) and NCCL beyond it."""
    p = len(group)
    if p <= 1 or nbytes <= 0:
        return "none", 0.0
    algorithm = comm if isinstance(comm, str) else getattr(comm, "allreduce", "custom")
    env = NCCL_DEFAULTS if isinstance(comm, str) else nccl_env(comm)
    if ipc_max_bytes is None:
        ipc_max_bytes = cr.PCIE_IPC_FALLBACK_ROWS * 8192 * 2.0
    return _all_reduce(_Holder(hw), tuple(group), float(nbytes), algorithm, env, float(ipc_max_bytes), engine)


@lru_cache(maxsize=1024)
def _all_reduce_setup(holder: _Holder, group: tuple[int, ...], algorithm: str, env: NcclEnv, engine: str) -> tuple:
    """What all_reduce_fn's cost function reads besides the bytes and the PCIe-IPC size limit, resolved once per box,
    group, algorithm, NCCL environment and engine: the engine's P2P paths that apply (in dispatch order) and their
    terms, whether the PCIe-IPC kernel applies and its unit wire time, the measured curves and the NCCL ring
    profiles. Remembered across Contexts: plans that differ only in that limit (it follows their batching:
    pcie_ipc_max_bytes) share it, about two in three of the functions a V4.1 search builds (~30 us each)."""
    hw, p = holder.hw, len(group)
    paths = allreduce_paths(engine, hw, group) if algorithm == "custom" else ()
    ipc = algorithm == "pcie_ipc" and pcie_ipc_applies(topology(hw), group)
    resolved = tuple(path_terms(holder, group, x) for x in paths)  # the engine's paths, in dispatch order
    ipc_two = _unit_wire_s(holder, group, "two", cr.PCIE_IPC_EFFICIENCY) if ipc else 0.0
    points, sizes, exact = probed_curve(hw, "all_reduce", group, env)
    ipc_points, ipc_sizes, _ = probed_curve(hw, "pcie_ipc_all_reduce", group, NCCL_DEFAULTS) if ipc else ([], [], 0)
    ring = _nccl_profile(holder, group, env, 2 * (p - 1), "ring")
    curve_ring = _nccl_profile(holder, group, MEASURED_CURVE_ENV, 2 * (p - 1), "ring")
    return resolved, ipc, ipc_two, points, sizes, exact, ipc_points, ipc_sizes, ring, curve_ring


def all_reduce_fn(
    hw: HardwareProfile, group: tuple[int, ...], comm, ipc_max_bytes: float, engine: str = "vllm"
) -> Callable[[float], tuple[str, float]]:
    """`all_reduce` on one group as a function of its bytes: the engine's P2P paths that apply to the group, their
    unit wire times and fixed times, and the NCCL ring profile resolved once (a Context costs every step's
    all-reduces with it)."""
    group = tuple(group)
    p = len(group)
    if p <= 1:
        return lambda nbytes: ("none", 0.0)
    algorithm = comm if isinstance(comm, str) else getattr(comm, "allreduce", "custom")
    env = NCCL_DEFAULTS if isinstance(comm, str) else nccl_env(comm)
    setup = _all_reduce_setup(_Holder(hw), group, algorithm, env, engine)
    resolved, ipc, ipc_two, points, sizes, exact, ipc_points, ipc_sizes, ring, curve_ring = setup

    def cost(nbytes: float) -> tuple[str, float]:
        if nbytes <= 0:
            return "none", 0.0
        nbytes = float(nbytes)
        for terms in resolved:
            if nbytes <= terms.max_bytes:
                return terms.name, terms_s(terms, nbytes)
        if ipc and nbytes <= ipc_max_bytes:
            if ipc_points:  # probe --bench timed FlashInfer's kernels on this box
                return "pcie_ipc", _curve_time_s(ipc_points, ipc_sizes, p, nbytes)
            return "pcie_ipc", _pcie_ipc_wire_s(nbytes, ipc_two, p)
        per_edge = _ring_all_reduce(p, nbytes)[1]
        model = ring.time_s(per_edge)
        measured = _curve_time_s(points, sizes, p, nbytes) if points else 0.0
        if measured:  # as _nccl_all_reduce_s: the measured curve, scaled from its NCCL environment to the phase's
            return "nccl", measured if exact else measured * model / curve_ring.time_s(per_edge)
        return "nccl", model

    return cost


def all_reduce_s(
    hw: HardwareProfile,
    group: tuple[int, ...],
    nbytes: float,
    comm=None,
    ipc_max_bytes: float | None = None,
    engine: str = "vllm",
) -> float:
    """Seconds of an all-reduce (see `all_reduce`)."""
    return all_reduce(hw, group, nbytes, comm, ipc_max_bytes, engine)[1]


# --- other collectives (NCCL) ---------------------------------------------------------------------------------


def all_gather_s(hw: HardwareProfile, group: tuple[int, ...], out_bytes: float, comm=None) -> float:
    """All-gather producing `out_bytes` on every rank (a reduce-scatter of the same size costs the same)."""
    p = len(group)
    if p <= 1 or out_bytes <= 0:
        return 0.0
    return _nccl_s(hw, group, nccl_env(comm), p - 1, "ring", (p - 1) / p * out_bytes)


reduce_scatter_s = all_gather_s


def all_to_all_s(hw: HardwareProfile, group: tuple[int, ...], send_bytes: float, comm=None) -> float:
    """All-to-all where each rank sends `send_bytes` in total, spread evenly over all ranks (itself included)."""
    p = len(group)
    if p <= 1 or send_bytes <= 0:
        return 0.0
    return _nccl_s(hw, group, nccl_env(comm), p - 1, "all2all", send_bytes / p)


def send_s(hw: HardwareProfile, src: int, dst: int, nbytes: float, comm=None) -> float:
    """Point-to-point copy (pipeline stage hand-off) over NCCL send/recv."""
    if src == dst or nbytes <= 0:
        return 0.0
    return _nccl_s(hw, (src, dst), nccl_env(comm), 1, "pair", nbytes)


def nccl_cost_fn(hw: HardwareProfile, name: str, group: tuple[int, ...], comm=None) -> Callable[[float], float]:
    """all_gather_s / reduce_scatter_s / all_to_all_s / send_s (name: allgather, dcp_allgather, reducescatter,
    all2all, pp_send) on one group as a function of its bytes, the NCCL profile resolved once."""
    p, env = len(group), nccl_env(comm)
    if name == "pp_send":
        if group[0] == group[1]:
            return lambda nbytes: 0.0
        pair = _nccl_profile(_Holder(hw), tuple(group[:2]), env, 1, "pair")
        return lambda nbytes: pair.time_s(nbytes) if nbytes > 0 else 0.0
    if p <= 1:
        return lambda nbytes: 0.0
    pattern, share = ("all2all", 1 / p) if name == "all2all" else ("ring", (p - 1) / p)
    prof = _nccl_profile(_Holder(hw), tuple(group), env, p - 1, pattern)
    points, sizes, exact = probed_curve(hw, PROBED_NAMES.get(name, name), tuple(group), env)
    if not points:
        return lambda nbytes: prof.time_s(share * nbytes) if nbytes > 0 else 0.0
    base = prof if exact else _nccl_profile(_Holder(hw), tuple(group), MEASURED_CURVE_ENV, p - 1, pattern)
    factor = (p - 1) / p  # nccl-tests' busbw factor of all-gather, reduce-scatter and all-to-all

    def probed(nbytes: float) -> float:  # the measured curve, scaled to the phase's setting when it has none
        if nbytes <= 0:
            return 0.0
        t = _curve_time_s(points, sizes, p, nbytes, factor)
        return t if exact else t * prof.time_s(share * nbytes) / base.time_s(share * nbytes)

    return probed


def kv_transfer_s(hw: HardwareProfile, src: tuple[int, ...], dst: tuple[int, ...], nbytes: float, comm=None) -> float:
    """Move `nbytes` of KV from prefill GPUs `src` to decode GPUs `dst`; shards travel in parallel, lane k from
    src[k] to dst[k]. Pairs go P2P or through host memory as the NCCL environment of `comm` allows. Both engines'
    P/D transfer is NIXL (engines/vllm.py NIXL_KV_TRANSFER, engines/sglang.py PD_TRANSFER_BACKEND), whose UCX
    cuda_ipc transport copies with cuMemcpyDtoDAsync on the copy engines (openucx/ucx
    src/uct/cuda/cuda_ipc/cuda_ipc_ep.c): a PCIe pair moves at the DMA copy efficiency
    (efficiency.PCIE_COPY_EFFICIENCY), not at an NCCL ring's."""
    lanes = min(len(src), len(dst))
    if lanes == 0 or nbytes <= 0:
        return 0.0
    topo = topology(hw)
    traffic = {(src[k], dst[k]): nbytes / lanes for k in range(lanes)}
    group = tuple(sorted({*src[:lanes], *dst[:lanes]}))
    return transfer_s(topo, traffic, p2p_level(topo, group, nccl_env(comm)), p2p_eff=eff.PCIE_COPY_EFFICIENCY)
