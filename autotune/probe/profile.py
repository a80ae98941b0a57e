"""probe(): the box as a HardwareProfile. NVML first (NVIDIA), else the sysfs PCI tree (any vendor).

What a probe cannot measure (peak TFLOPS, memory bandwidth, dtype support) comes from catalog.devices. An
unknown device keeps 0.0 for those figures and says so in `notes`: perf refuses such a profile rather than
guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.catalog.devices import VENDORS, DeviceSpec, find_device, find_device_by_pci
from autotune.probe import npu_smi, sysfs
from autotune.probe.host import read_host
from autotune.probe.nvml import BRAND_GEFORCE, NvmlGpu, NvmlScan, probe_nvml
from autotune.specs import MiTuneError
from autotune.specs.hardware import Accelerator, Features, HardwareProfile, HostInfo

NVIDIA = 0x10DE
# Unknown NVIDIA parts: dtype support by compute capability (TransformerEngine support matrix, hardware.md §4).
CC_FEATURES = {"bf16": (8, 0), "fp8": (8, 9), "fp4": (10, 0)}


@dataclass(frozen=True)
class ProbeResult:
    host: HostInfo
    profile: HardwareProfile | None  # None when no accelerator was found
    notes: tuple[str, ...] = ()
    switches: tuple[sysfs.PcieSwitch, ...] = ()  # PCIe switches above the accelerators


def probe(sysfs_root: str = "/sys", proc_root: str = "/proc", use_nvml: bool = True) -> ProbeResult:
    host = read_host(proc_root, sysfs_root)
    scan = sysfs.scan(sysfs_root)
    notes: list[str] = []
    nvml = None
    if use_nvml:
        nvml, reason = probe_nvml()
        if nvml is None:
            notes.append(f"NVML unavailable: {reason}")
        elif not nvml.gpus:
            nvml = None
    if nvml is not None:
        accelerators, links, p2p, specs = _from_nvml(nvml, scan, notes)
        origin = f"probe: NVML (driver {nvml.driver_version or 'unknown'}) + sysfs PCI tree"
    else:
        accelerators, links, p2p, specs = _from_sysfs(scan, notes)
        origin = "probe: sysfs PCI tree (no NVML)"
        texts = (
            npu_smi.read_npu_smi(sysfs_root, live=use_nvml) if any(a.vendor == "huawei" for a in accelerators) else None
        )
        if texts is not None:
            fabric = {s.name: s.nvlink_gbs for s in specs if s is not None}
            accelerators, links, p2p = npu_smi.refine(accelerators, links, p2p, texts, fabric, notes)
            origin = "probe: sysfs PCI tree + npu-smi (no NVML)"
    if not accelerators:
        return ProbeResult(host, None, tuple(notes))
    bdfs = {a.pci_bdf for a in accelerators}
    _note_links(accelerators, scan, notes)
    if scan.iommu_groups and any(label in sysfs.LINK_PCIE for row in links for label in row):
        notes.append(
            f"IOMMU on ({scan.iommu_groups} groups): PCIe P2P may be redirected through the root complex (ACS); "
            "NCCL's troubleshooting guide advises iommu=pt or off on bare metal"
        )
    profile = HardwareProfile(
        name=_profile_name(specs, accelerators),
        source="probe",
        host=host,
        accelerators=accelerators,
        links=links,
        p2p=p2p,
        pcie_switch_uplink_gbs=sysfs.uplink_gbs(scan.switches, bdfs),
        sources=(origin, *sorted({f"datasheet: {s.source}" for s in specs if s is not None})),
    )
    return ProbeResult(host, profile, tuple(notes), tuple(s for s in scan.switches if bdfs & set(s.members)))


def probe_roots(sysfs_root: str | Path | None = None, proc_root: str | Path | None = None) -> ProbeResult:
    """`probe --sysfs-root/--proc-root`: a recorded tree probes exactly as a live machine. NVML answers for the
    live machine only, so it is bypassed when either root is given. A root that is not a directory is bad input."""
    for flag, root in (("--sysfs-root", sysfs_root), ("--proc-root", proc_root)):
        if root is not None and not Path(root).is_dir():
            raise MiTuneError(f"{flag} {root}: expected a directory (a recorded {flag[2:-5]} tree)")
    recorded = sysfs_root is not None or proc_root is not None
    return probe(str(sysfs_root or "/sys"), str(proc_root or "/proc"), use_nvml=not recorded)


def _from_nvml(nvml: NvmlScan, scan: sysfs.SysfsScan, notes: list[str]):
    by_bdf = {d.bdf: d for d in scan.accelerators}
    specs = [find_device(g.name, "nvidia") or find_device_by_pci(NVIDIA, g.pci_device_id) for g in nvml.gpus]
    accelerators = tuple(
        _nvml_accelerator(g, s, by_bdf.get(g.bdf), notes) for g, s in zip(nvml.gpus, specs, strict=True)
    )
    notes.extend(f"NVML {n}" for n in nvml.notes)
    off = sum(not ok for row in nvml.p2p for ok in row)
    if off:
        notes.append(f"P2P off for {off // 2} GPU pairs (NVML P2P READ status): NCCL stages through host memory")
    if any(g.brand == BRAND_GEFORCE for g in nvml.gpus) and all(all(row) for row in nvml.p2p):
        notes.append("NVML reports P2P on GeForce cards (patched driver?): confirm with a copy test (probe --bench)")
    others = [d for d in scan.accelerators if d.vendor_id != NVIDIA]
    if others:
        notes.append(f"{len(others)} non-NVIDIA accelerator(s) on the PCI bus left out of this NVML profile")
    return accelerators, nvml.links, nvml.p2p, specs


def _nvml_accelerator(gpu: NvmlGpu, spec: DeviceSpec | None, dev: sysfs.PciDevice | None, notes: list[str]):
    cc = gpu.compute_capability
    if spec is None:
        notes.append(_unknown_note(gpu.name, NVIDIA, gpu.pci_device_id))
    features = spec.features if spec else _cc_features(cc)
    return Accelerator(
        index=gpu.index,
        vendor="nvidia",
        name=gpu.name,
        pci_bdf=gpu.bdf,
        memory_gib=round(gpu.memory_bytes / 2**30, 1) if gpu.memory_bytes else (spec.memory_gib if spec else 0.0),
        mem_bw_gbs=spec.mem_bw_gbs if spec else 0.0,
        peak_tflops=dict(spec.peak_tflops) if spec else {},
        arch=f"sm_{cc[0]}{cc[1]}" if cc else (spec.arch if spec else "unknown"),
        numa_node=gpu.numa_node if gpu.numa_node >= 0 else (dev.numa_node if dev else -1),
        pcie_gen=gpu.max_pcie_gen or (dev.link.max_gen if dev else 0) or (spec.pcie_gen if spec else 0),
        pcie_width=gpu.max_pcie_width or (dev.link.max_width if dev else 0) or 16,
        features=features,
        nvlink_gbs=(spec.nvlink_gbs if spec else 0.0) if gpu.nvlinks else 0.0,
    )


def _from_sysfs(scan: sysfs.SysfsScan, notes: list[str]):
    devices = scan.accelerators
    specs = [find_device_by_pci(d.vendor_id, d.device_id) for d in devices]
    accelerators = tuple(
        _sysfs_accelerator(i, d, s, notes) for i, (d, s) in enumerate(zip(devices, specs, strict=True))
    )
    p2p = tuple(
        tuple(
            i == j or (a is not None and b is not None and a.p2p_default and b.p2p_default) for j, b in enumerate(specs)
        )
        for i, a in enumerate(specs)
    )
    if devices:
        notes.append("P2P from datasheet defaults (no NVML); confirm with a copy test (probe --bench)")
        if any(s is not None for s in specs):
            notes.append("memory sizes from the datasheet (sysfs does not report device memory)")
    return accelerators, sysfs.link_matrix(devices), p2p, specs


def _sysfs_accelerator(index: int, dev: sysfs.PciDevice, spec: DeviceSpec | None, notes: list[str]) -> Accelerator:
    vendor = VENDORS[dev.vendor_id]
    name = spec.name if spec else f"{vendor.name} device 0x{dev.device_id:04x}"
    if spec is None:
        notes.append(_unknown_note(name, dev.vendor_id, dev.device_id))
    return Accelerator(
        index=index,
        vendor=vendor.name,
        name=name,
        pci_bdf=dev.bdf,
        memory_gib=spec.memory_gib if spec else 0.0,
        mem_bw_gbs=spec.mem_bw_gbs if spec else 0.0,
        peak_tflops=dict(spec.peak_tflops) if spec else {},
        arch=spec.arch if spec else "unknown",
        numa_node=dev.numa_node,
        pcie_gen=dev.link.max_gen or (spec.pcie_gen if spec else 0),
        pcie_width=dev.link.max_width or 16,
        features=spec.features
        if spec
        else Features(bf16=False, fp8=False, fp4=False, int8=False, collective_library=vendor.collective_library),
        nvlink_gbs=0.0,
    )


def _cc_features(cc: tuple[int, int] | None) -> Features:
    ok = {dtype: cc is not None and cc >= need for dtype, need in CC_FEATURES.items()}
    return Features(bf16=ok["bf16"], fp8=ok["fp8"], fp4=ok["fp4"], int8=False, collective_library="nccl")


def _unknown_note(name: str, vendor_id: int, device_id: int) -> str:
    return (
        f"unknown device '{name}' ({vendor_id:04x}:{device_id:04x}): peak TFLOPS and memory bandwidth unknown (0.0); "
        "perf refuses this profile until they are measured (probe --bench) or written into a hardware file"
    )


def _note_links(accelerators: tuple[Accelerator, ...], scan: sysfs.SysfsScan, notes: list[str]) -> None:
    by_bdf = {d.bdf: d for d in scan.accelerators}
    slow = [
        f"GPU{a.index} Gen{d.link.current_gen} x{d.link.current_width}"
        for a in accelerators
        if (d := by_bdf.get(a.pci_bdf))
        and d.link.current_gen
        and (d.link.current_gen, d.link.current_width) < (a.pcie_gen, a.pcie_width)
    ]
    if slow:
        notes.append(
            f"PCIe links trained below their maximum ({', '.join(slow)}): idle GPUs down-train; re-check under load"
        )
    narrow = [f"GPU{a.index} x{a.pcie_width}" for a in accelerators if a.pcie_width and a.pcie_width < 16]
    if narrow:
        notes.append(f"PCIe slots narrower than x16: {', '.join(narrow)}")


def _profile_name(specs: list[DeviceSpec | None], accelerators: tuple[Accelerator, ...]) -> str:
    keys = {s.key if s else "unknown" for s in specs}
    return f"{keys.pop() if len(keys) == 1 else 'mixed'}-x{len(accelerators)}"
