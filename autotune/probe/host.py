"""Host facts from /proc and /sys: CPU model, sockets, cores, NUMA nodes, memory, socket-interconnect bandwidth.

Every path hangs off `proc_root` / `sysfs_root`, so tests read recorded trees.
"""

from __future__ import annotations

import re
from pathlib import Path

from autotune.specs.hardware import HostInfo

# NCCL's model of the CPU-to-CPU link that SYS paths cross, GB/s: constants from NVIDIA/nccl src/graph/topo.h
# (hardware.md §5.1); Intel classes by cpuid family/model as in src/graph/topo.cc (ERP >= 0xCF, SRP >= 0x8F,
# SKL >= 0x55, else BDW); AMD classes by family (17h Zen1-2, 19h Zen3-4, 1Ah Zen5) for AMD_ZEN12/34/5_BW.
# Rows: (cpuinfo vendor_id, cpu family, lowest model, GB/s); the first match wins.
INTER_SOCKET_GBS: tuple[tuple[str, int, int, float], ...] = (
    ("GenuineIntel", 6, 0xCF, 40.0),  # ERP_QPI_BW (Emerald Rapids; Granite Rapids 0xAD falls to SRP as in NCCL)
    ("GenuineIntel", 6, 0x8F, 22.0),  # SRP_QPI_BW (Sapphire Rapids)
    ("GenuineIntel", 6, 0x55, 10.0),  # SKL_QPI_BW (Skylake / Cascade Lake / Ice Lake)
    ("GenuineIntel", 6, 0x00, 6.0),  # BDW_QPI_BW
    ("AuthenticAMD", 0x1A, 0, 32.0),  # AMD_ZEN5_BW (Turin)
    ("AuthenticAMD", 0x19, 0, 24.0),  # AMD_ZEN34_BW (Milan, Genoa)
    ("AuthenticAMD", 0x17, 0, 16.0),  # AMD_ZEN12_BW (Naples, Rome)
    ("CentaurHauls", 7, 0x5B, 9.0),  # YONGFENG_ZPI_BW (Zhaoxin)
    ("CentaurHauls", 7, 0x00, 6.0),  # ZPI_BW
    ("  Shanghai  ", 7, 0x5B, 9.0),  # Zhaoxin's other vendor string
    ("  Shanghai  ", 7, 0x00, 6.0),
)
ARM_INTER_SOCKET_GBS = 6.0  # ARM_BW, NVIDIA/nccl src/graph/topo.h


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """One dict per logical CPU (blocks separated by blank lines). Values keep their spacing (vendor ids do)."""
    cpus = []
    for block in re.split(r"\n\s*\n", text):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip(" \t") if key.strip() != "vendor_id" else value[1:]
        if fields:
            cpus.append(fields)
    return cpus


def parse_meminfo_gb(text: str) -> float:
    """MemTotal in GiB (the unit memory datasheets and `free -g` use)."""
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return round(int(match.group(1)) / 2**20, 1) if match else 0.0


def inter_socket_gbs(vendor_id: str, family: int, model: int, arm: bool = False) -> float:
    if arm:
        return ARM_INTER_SOCKET_GBS
    for vendor, fam, min_model, gbs in INTER_SOCKET_GBS:
        if vendor == vendor_id and fam == family and model >= min_model:
            return gbs
    return 0.0


def count_numa_nodes(sysfs_root: str | Path) -> int:
    nodes = Path(sysfs_root, "devices/system/node")
    found = [p for p in nodes.glob("node*") if p.name[4:].isdigit()] if nodes.is_dir() else []
    return max(len(found), 1)


def host_from_text(cpuinfo: str, meminfo: str, numa_nodes: int) -> HostInfo:
    cpus = parse_cpuinfo(cpuinfo)
    first = cpus[0] if cpus else {}
    sockets = {c.get("physical id", "0") for c in cpus} or {"0"}
    cores = {(c.get("physical id", "0"), c.get("core id", c.get("processor", ""))) for c in cpus}
    model = first.get("model name") or _arm_model(first) or "unknown"
    vendor = first.get("vendor_id", "")
    return HostInfo(
        cpu_model=model,
        sockets=len(sockets),
        cores=len(cores),
        numa_nodes=numa_nodes,
        memory_gib=parse_meminfo_gb(meminfo),
        inter_socket_gbs=inter_socket_gbs(
            vendor, _int(first.get("cpu family")), _int(first.get("model")), arm="CPU implementer" in first
        ),
    )


def read_host(proc_root: str | Path = "/proc", sysfs_root: str | Path = "/sys") -> HostInfo:
    return host_from_text(
        _read(Path(proc_root, "cpuinfo")), _read(Path(proc_root, "meminfo")), count_numa_nodes(sysfs_root)
    )


def _arm_model(cpu: dict[str, str]) -> str:
    """arm64 /proc/cpuinfo names no model: report the implementer and part ids (0x48/0xd01 = HiSilicon TSV110)."""
    if "CPU implementer" not in cpu:
        return ""
    return f"arm64 implementer {cpu['CPU implementer']} part {cpu.get('CPU part', '?')}"


def _int(text: str | None) -> int:
    try:
        return int(text or "", 0)
    except ValueError:
        return -1


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
