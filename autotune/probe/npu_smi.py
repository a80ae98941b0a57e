"""Huawei Ascend boxes through `npu-smi` (NVML's role on NPUs): the NPU table of `npu-smi info` and the link
matrix of `npu-smi info -t topo`.

Formats, as npu-smi 24.1 prints them (recorded in the public ms-swift NPU guide for 8x Ascend 910B3 64G,
modelscope/ms-swift docs "NPU支持"; the topology legend is npu-smi's own, its labels are those of CANN's
aclrtGetDevicesTopo: HCCS, PIX, PHB, SYS, SIO, HCCS_SW, hiascend CANN 8.x API reference):

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    | 0     910B3               | OK            | 101.8       43                0    / 0             |
    | 0                         | 0000:C1:00.0  | 0           0    / 0          3318 / 65536         |

               NPU0       NPU1   ...   CPU Affinity
    NPU0       X          HCCS   ...   144-167

A recorded box keeps these outputs beside its trees: <box>/tools/npu-smi_info.txt and npu-smi_info_-t_topo.txt.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

COMMANDS = {"info": ["npu-smi", "info"], "topo": ["npu-smi", "info", "-t", "topo"]}
RECORDED = {"info": "npu-smi_info.txt", "topo": "npu-smi_info_-t_topo.txt"}
# npu-smi / aclrtGetDevicesTopo label -> HardwareProfile link label (specs/hardware.py LINK_LABELS)
TOPO_LABELS = {"X": "X", "HCCS": "HCCS", "HCCS_SW": "HCCS", "SIO": "HCCS", "PIX": "PIX", "PXB": "PXB", "PHB": "PHB",
               "SYS": "SYS", "NA": "SYS"}  # fmt: skip
_NPU_ROW = re.compile(r"^\|\s*(\d+)\s+(\S+)\s+\|\s*(\w+)\s*\|")
_CHIP_ROW = re.compile(r"^\|\s*(\d+)\s+\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*\|(.*)\|\s*$")


@dataclass(frozen=True)
class Npu:
    npu_id: int
    name: str  # as npu-smi prints it: 910B3, 310P3, ...
    chip: int
    bus_id: str  # lower-case, 0000:c1:00.0 (sysfs spelling)
    hbm_total_mb: int  # 0 when not printed


@dataclass(frozen=True)
class NpuTopology:
    npu_ids: tuple[int, ...]
    labels: tuple[tuple[str, ...], ...]  # HardwareProfile labels, npu_ids order
    cpu_affinity: tuple[str, ...]  # "144-167" per NPU ('' when absent)


def parse_info(text: str) -> tuple[Npu, ...]:
    """The NPU/chip rows of `npu-smi info` (the process table below them is ignored)."""
    npus, pending = [], None
    for line in text.splitlines():
        if m := _NPU_ROW.match(line):
            pending = (int(m.group(1)), m.group(2))
        elif pending and (m := _CHIP_ROW.match(line)):
            usage = re.findall(r"(\d+)\s*/\s*(\d+)", m.group(3))
            npus.append(
                Npu(pending[0], pending[1], int(m.group(1)), m.group(2).lower(), int(usage[-1][1]) if usage else 0)
            )
            pending = None
    return tuple(npus)


def parse_topo(text: str) -> NpuTopology:
    """The matrix of `npu-smi info -t topo`; unknown labels raise ValueError naming them."""
    rows = [line.split() for line in text.splitlines() if re.match(r"^\s*NPU\d+\s", line)]
    header = [c for c in rows[0] if c.startswith("NPU")] if rows else []
    body = [r for r in rows if r[1:2] and not r[1].startswith("NPU")]
    ids = tuple(int(r[0][3:]) for r in body)
    n = len(header)
    labels, affinity = [], []
    for r in body:
        cells = r[1 : 1 + n]
        unknown = [c for c in cells if c not in TOPO_LABELS]
        if len(cells) != n or unknown:
            raise ValueError(f"npu-smi topo row {r[0]}: expected {n} labels of {', '.join(TOPO_LABELS)}, got {cells}")
        labels.append(tuple(TOPO_LABELS[c] for c in cells))
        affinity.append(" ".join(r[1 + n :]))
    return NpuTopology(ids, tuple(labels), tuple(affinity))


def read_npu_smi(sysfs_root: str | Path, live: bool) -> tuple[str, str] | None:
    """(info, topo) texts: recorded beside a recorded tree, or from the live `npu-smi` when it is installed."""
    if not live:
        tools = Path(sysfs_root).parent / "tools"
        paths = [tools / RECORDED[k] for k in ("info", "topo")]
        return tuple(p.read_text() for p in paths) if all(p.is_file() for p in paths) else None  # type: ignore[return-value]
    if shutil.which("npu-smi") is None:
        return None
    try:
        out = [subprocess.run(COMMANDS[k], capture_output=True, text=True, timeout=30, check=True).stdout
               for k in ("info", "topo")]  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0], out[1]


def refine(
    accelerators: tuple, links: tuple, p2p: tuple, texts: tuple[str, str], fabric_gbs: dict[str, float], notes: list
):
    """The sysfs profile of an Ascend box corrected by npu-smi: NPU order and ids (the ids ASCEND_RT_VISIBLE_DEVICES
    takes), HBM size, and the HCCS/PCIe link matrix. Accelerators npu-smi does not list are kept as sysfs saw them.
    `fabric_gbs`: accelerator name -> HCCS GB/s per direction (catalog.devices)."""
    import dataclasses

    npus, topo = parse_info(texts[0]), parse_topo(texts[1])
    by_bus = {a.pci_bdf: a for a in accelerators}
    listed = [n for n in sorted(npus, key=lambda n: (n.npu_id, n.chip)) if n.bus_id in by_bus]
    if not listed or len(listed) != len(accelerators) or tuple(n.npu_id for n in listed) != topo.npu_ids:
        notes.append("npu-smi output does not match the PCI tree (NPU ids, bus ids): kept the sysfs topology")
        return accelerators, links, p2p
    row = {npu_id: i for i, npu_id in enumerate(topo.npu_ids)}
    ordered = []
    for index, npu in enumerate(listed):
        a = by_bus[npu.bus_id]
        on_hccs = any(label == "HCCS" for label in topo.labels[row[npu.npu_id]])
        memory = round(npu.hbm_total_mb / 1024, 1) if npu.hbm_total_mb else a.memory_gib
        ordered.append(
            dataclasses.replace(
                a, index=index, memory_gib=memory, nvlink_gbs=fabric_gbs.get(a.name, 0.0) if on_hccs else 0.0
            )
        )
    names = ", ".join(sorted({n.name for n in listed}))
    if all(n.hbm_total_mb for n in listed):
        notes[:] = [n for n in notes if not n.startswith("memory sizes from the datasheet")]
    affinity = "; ".join(f"NPU{i} {c}" for i, c in zip(topo.npu_ids, topo.cpu_affinity, strict=True) if c)
    notes.append(
        f"npu-smi: {len(listed)} NPUs ({names}); HBM and HCCS/PCIe links from npu-smi; CPU affinity {affinity}"
    )
    labels = tuple(tuple(topo.labels[row[a.npu_id]][row[b.npu_id]] for b in listed) for a in listed)
    old = [by_bus[n.bus_id].index for n in listed]  # sysfs order the datasheet P2P defaults were given in
    peer = tuple(
        tuple(p2p[old[i]][old[j]] or labels[i][j] == "HCCS" for j in range(len(listed))) for i in range(len(listed))
    )
    return tuple(ordered), labels, peer
