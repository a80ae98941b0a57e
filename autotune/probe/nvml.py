"""NVIDIA GPUs through NVML (`pynvml`, imported lazily): identity, memory, PCIe, NUMA, NVLink, topology, P2P.

Every NVML call is guarded: GeForce cards, vGPUs, MIG and WSL raise `NVMLError_NotSupported` for parts of the
API (hardware.md §1). A missing driver or any failure of `nvmlInit` yields no scan and a reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

# NVML_TOPOLOGY_* level -> `nvidia-smi topo -m` label (hardware.md §1; INTERNAL = same board).
TOPOLOGY_LABELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
P2P_CAPS_INDEX_READ = 0  # pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,) (trailing comma): pass the int
P2P_STATUS_OK = 0
NVLINK_DEVICE_TYPE_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
NVLINK_MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS
BRAND_GEFORCE = 5  # NVML_BRAND_GEFORCE: expect no P2P on the stock driver


@dataclass(frozen=True)
class NvmlGpu:
    index: int
    name: str
    bdf: str  # sysfs form: 0000:4e:00.0
    pci_device_id: int  # the device half of pciDeviceId (device << 16 | 0x10de)
    memory_bytes: int
    compute_capability: tuple[int, int] | None
    max_pcie_gen: int  # system-limited maximum (nvmlDeviceGetMaxPcieLinkGeneration)
    max_pcie_width: int
    current_pcie_gen: int
    current_pcie_width: int
    numa_node: int  # -1 = not reported
    brand: int
    nvlinks: int  # active NVLinks


@dataclass(frozen=True)
class NvmlScan:
    driver_version: str
    gpus: tuple[NvmlGpu, ...]
    links: tuple[tuple[str, ...], ...]
    p2p: tuple[tuple[bool, ...], ...]
    notes: tuple[str, ...] = ()


def normalize_bdf(bus_id: bytes | str) -> str:
    """NVML busId b'00000000:4E:00.0' -> sysfs '0000:4e:00.0'."""
    text = (bus_id.decode() if isinstance(bus_id, bytes) else bus_id).strip("\x00 ").lower()
    domain, bus, devfn = text.rsplit(":", 2)
    return f"{int(domain, 16):04x}:{bus}:{devfn}"


def probe_nvml() -> tuple[NvmlScan | None, str]:
    """(scan, "") when NVML answers, else (None, reason). Never raises."""
    try:
        import pynvml
    except ImportError as exc:
        return None, f"pynvml not importable ({exc})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ... or a broken library
        return None, f"{type(exc).__name__}: {exc}"
    try:
        return _scan(pynvml), ""
    except Exception as exc:  # a failure outside the guarded calls: report, do not crash the probe
        return None, f"NVML scan failed: {type(exc).__name__}: {exc}"
    finally:
        _guard(pynvml, pynvml.nvmlShutdown)


def _scan(nv: Any) -> NvmlScan:
    call = _Caller(nv)
    count = call(nv.nvmlDeviceGetCount, default=0)
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    gpus = [_gpu(nv, call, i, h) for i, h in enumerate(handles)]
    nvlink_peers = [_nvlink_peers(nv, call, h) for h in handles]
    bdf_index = {g.bdf: g.index for g in gpus}
    gpus = [_with_links(g, peers) for g, peers in zip(gpus, nvlink_peers, strict=True)]
    links = tuple(
        tuple(_label(nv, call, handles, nvlink_peers, bdf_index, i, j) for j in range(count)) for i in range(count)
    )
    p2p = tuple(
        tuple(
            i == j or call(nv.nvmlDeviceGetP2PStatus, handles[i], handles[j], P2P_CAPS_INDEX_READ) == P2P_STATUS_OK
            for j in range(count)
        )
        for i in range(count)
    )
    driver = call(nv.nvmlSystemGetDriverVersion, default="")
    return NvmlScan(_text(driver), tuple(gpus), links, p2p, tuple(call.notes))


def _gpu(nv: Any, call: _Caller, index: int, h: Any) -> NvmlGpu:
    pci = nv.nvmlDeviceGetPciInfo(h)
    memory = call(nv.nvmlDeviceGetMemoryInfo, h)
    cc = call(nv.nvmlDeviceGetCudaComputeCapability, h)
    return NvmlGpu(
        index=index,
        name=_text(call(nv.nvmlDeviceGetName, h, default="unknown")),
        bdf=normalize_bdf(pci.busId),
        pci_device_id=(pci.pciDeviceId >> 16) & 0xFFFF,
        memory_bytes=int(memory.total) if memory is not None else 0,
        compute_capability=(int(cc[0]), int(cc[1])) if cc is not None else None,
        max_pcie_gen=call(nv.nvmlDeviceGetMaxPcieLinkGeneration, h, default=0),
        max_pcie_width=call(nv.nvmlDeviceGetMaxPcieLinkWidth, h, default=0),
        current_pcie_gen=call(nv.nvmlDeviceGetCurrPcieLinkGeneration, h, default=0),
        current_pcie_width=call(nv.nvmlDeviceGetCurrPcieLinkWidth, h, default=0),
        numa_node=call("nvmlDeviceGetNumaNodeId", h, default=-1),
        brand=call(nv.nvmlDeviceGetBrand, h, default=-1),
        nvlinks=0,
    )


def _nvlink_peers(nv: Any, call: _Caller, h: Any) -> list[str]:
    """Remote end of each active NVLink: a GPU's BDF, or "switch" for an NVSwitch. [] without NVLink."""
    peers = []
    for link in range(NVLINK_MAX_LINKS):
        try:
            state = nv.nvmlDeviceGetNvLinkState(h, link)
        except nv.NVMLError:  # NotSupported: no NVLink at all; InvalidArgument: past the last link
            break
        if state != 1:
            continue
        if call("nvmlDeviceGetNvLinkRemoteDeviceType", h, link, quiet=True) == NVLINK_DEVICE_TYPE_SWITCH:
            peers.append("switch")
            continue
        remote = call(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
        if remote is not None:
            peers.append(normalize_bdf(remote.busId))
    return peers


def _with_links(gpu: NvmlGpu, peers: list[str]) -> NvmlGpu:
    return replace(gpu, nvlinks=len(peers))


def _label(nv: Any, call: _Caller, handles: list, peers: list[list[str]], bdf_index: dict, i: int, j: int) -> str:
    if i == j:
        return "X"
    direct = sum(bdf_index.get(p) == j for p in peers[i])
    via_switch = min(peers[i].count("switch"), peers[j].count("switch"))
    if direct or via_switch:
        return f"NV{direct + via_switch}"
    level = call(nv.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j])
    return TOPOLOGY_LABELS.get(level, "SYS") if level is not None else "SYS"


class _Caller:
    """Calls an NVML function; an NVMLError becomes `default` and, unless quiet, one note per function name.
    A function given by name may be missing from an older pynvml: that also gives `default`."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.notes: list[str] = []

    def __call__(self, fn: Callable | str, *args: Any, default: Any = None, quiet: bool = False) -> Any:
        name = fn if isinstance(fn, str) else fn.__name__
        fn = getattr(self.nv, fn, None) if isinstance(fn, str) else fn
        try:
            if fn is None:
                raise AttributeError
            return fn(*args)
        except (self.nv.NVMLError, AttributeError) as exc:
            note = f"{name}: {type(exc).__name__}" if fn else f"{name}: not in this pynvml"
            if not quiet and note not in self.notes:
                self.notes.append(note)
            return default


def _guard(nv: Any, fn: Callable) -> None:
    with contextlib.suppress(nv.NVMLError):
        fn()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
