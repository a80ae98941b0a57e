"""Accelerators of every vendor from the Linux PCI tree (`<sysfs_root>/bus/pci/devices/*`), without any driver.

The resolved device path (`/sys/devices/pci0000:4a/0000:4a:01.0/0000:4b:00.0/0000:4c:01.0/0000:4e:00.0`) is the
PCIe tree: `pciDDDD:BB` is the host bridge, the first BDF below it the root port, and below that switch ports
alternate upstream / downstream. Pair labels follow NVML's topology levels (hardware.md §2): a common switch
upstream port with one switch on the way = PIX, more switches = PXB, only the host bridge in common = PHB,
different host bridges on one NUMA node = NODE, else SYS.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from autotune.catalog.devices import VENDORS
from autotune.specs.hardware import PCIE_LANE_GBS

LINK_PCIE = ("PIX", "PXB", "PHB", "NODE", "SYS")  # labels of a path over PCIe (not NVLink, not self)
ACCELERATOR_CLASSES = (0x03, 0x12)  # display controller (VGA 0x0300, 3D 0x0302), processing accelerator 0x1200
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_GT_S_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}  # `max_link_speed` "32.0 GT/s PCIe" -> Gen5


@dataclass(frozen=True)
class PciLink:
    max_gen: int
    max_width: int
    current_gen: int
    current_width: int

    @property
    def gbs(self) -> float:
        """Raw bandwidth per direction of the trained link (the capability when the current one is unknown)."""
        gen, width = (self.current_gen, self.current_width) if self.current_gen else (self.max_gen, self.max_width)
        return round(PCIE_LANE_GBS.get(gen, 0.0) * width, 1)


@dataclass(frozen=True)
class PciDevice:
    bdf: str
    vendor_id: int
    device_id: int
    class_code: int
    root: str  # "pci0000:4a": the host bridge
    bridges: tuple[str, ...]  # BDFs from the root port down to the device's parent port
    numa_node: int  # -1 = not reported
    link: PciLink  # the device's own link, limited by its parent port's capability

    @property
    def upstream_ports(self) -> tuple[str, ...]:
        """Switch upstream ports on the way from the root port (index 0) down: every odd index."""
        return self.bridges[1::2]


@dataclass(frozen=True)
class PcieSwitch:
    upstream_port: str  # BDF of the switch upstream port
    uplink: PciLink  # the link from the upstream port towards the CPU
    members: tuple[str, ...]  # accelerator BDFs below it
    top_level: bool  # directly under a root port (its uplink carries the traffic that leaves the group)


@dataclass(frozen=True)
class SysfsScan:
    accelerators: tuple[PciDevice, ...]
    switches: tuple[PcieSwitch, ...]
    iommu_groups: int  # > 0: IOMMU on (P2P may be redirected through the root complex)


def parse_link_gen(text: str) -> int:
    match = re.match(r"\s*([\d.]+)\s*GT/s", text)
    return _GT_S_TO_GEN.get(float(match.group(1)), 0) if match else 0


def read_link(dev_dir: Path) -> PciLink:
    return PciLink(
        max_gen=parse_link_gen(_read(dev_dir / "max_link_speed")),
        max_width=_int(_read(dev_dir / "max_link_width"), 0),
        current_gen=parse_link_gen(_read(dev_dir / "current_link_speed")),
        current_width=_int(_read(dev_dir / "current_link_width"), 0),
    )


def read_device(sysfs_root: Path, bdf: str) -> PciDevice:
    real = _device_dir(sysfs_root, bdf)
    parts = real.parts
    root_at = next((i for i, p in enumerate(parts) if p.startswith("pci")), len(parts) - 1)
    bridges = tuple(p for p in parts[root_at + 1 : -1] if _BDF.match(p))
    link = read_link(real)
    if bridges:  # the trained link can be no better than the port above
        port = read_link(real.parent)
        link = PciLink(
            max_gen=_min_known(link.max_gen, port.max_gen),
            max_width=_min_known(link.max_width, port.max_width),
            current_gen=link.current_gen,
            current_width=link.current_width,
        )
    return PciDevice(
        bdf=bdf,
        vendor_id=_int(_read(real / "vendor"), 0),
        device_id=_int(_read(real / "device"), 0),
        class_code=_int(_read(real / "class"), 0),
        root=parts[root_at],
        bridges=bridges,
        numa_node=_int(_read(real / "numa_node"), -1),
        link=link,
    )


def is_accelerator(dev: PciDevice) -> bool:
    return dev.vendor_id in VENDORS and (dev.class_code >> 16) in ACCELERATOR_CLASSES


def scan(sysfs_root: str | Path = "/sys") -> SysfsScan:
    root = Path(sysfs_root)
    listing = root / "bus/pci/devices"
    bdfs = sorted(p.name for p in listing.iterdir()) if listing.is_dir() else []
    accelerators = tuple(d for d in (read_device(root, b) for b in bdfs) if is_accelerator(d))
    groups = root / "kernel/iommu_groups"
    return SysfsScan(
        accelerators=accelerators,
        switches=find_switches(root, accelerators),
        iommu_groups=len(list(groups.iterdir())) if groups.is_dir() else 0,
    )


def find_switches(sysfs_root: Path, devices: tuple[PciDevice, ...]) -> tuple[PcieSwitch, ...]:
    members: dict[str, list[str]] = {}
    top: dict[str, bool] = {}
    for dev in devices:
        for k, port in enumerate(dev.upstream_ports):
            members.setdefault(port, []).append(dev.bdf)
            top[port] = k == 0
    return tuple(
        PcieSwitch(port, read_link(_device_dir(sysfs_root, port)), tuple(bdfs), top[port])
        for port, bdfs in sorted(members.items())
    )


def _device_dir(sysfs_root: Path, bdf: str) -> Path:
    return Path(os.path.realpath(sysfs_root / "bus/pci/devices" / bdf))


def link_label(a: PciDevice, b: PciDevice) -> str:
    """`nvidia-smi topo -m` label of the PCIe path between two devices."""
    if a.bdf == b.bdf:
        return "X"
    if a.root != b.root:
        return "NODE" if a.numa_node == b.numa_node else "SYS"
    common = 0
    while common < min(len(a.bridges), len(b.bridges)) and a.bridges[common] == b.bridges[common]:
        common += 1
    if common == 0:
        return "PHB"
    below = set(_switches_from(a, common - 1)) | set(_switches_from(b, common - 1))
    return "PIX" if len(below) <= 1 else "PXB"


def link_matrix(devices: tuple[PciDevice, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(link_label(a, b) for b in devices) for a in devices)


def uplink_gbs(switches: tuple[PcieSwitch, ...], bdfs: set[str]) -> float:
    """Narrowest top-level switch uplink above the given accelerators; 0.0 when none sits behind a switch."""
    uplinks = [s.uplink.gbs for s in switches if s.top_level and bdfs & set(s.members) and s.uplink.gbs]
    return min(uplinks, default=0.0)


def _switches_from(dev: PciDevice, index: int) -> list[str]:
    """Upstream ports at bridge index >= `index` (odd indices are upstream ports)."""
    return [port for k, port in enumerate(dev.bridges) if k >= index and k % 2 == 1]


def _min_known(a: int, b: int) -> int:
    return min(x for x in (a, b) if x) if (a or b) else 0


def _int(text: str, default: int) -> int:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return default


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
