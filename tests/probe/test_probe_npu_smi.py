"""Ascend boxes through npu-smi: the recorded 8x 910B3 outputs (public ms-swift NPU guide) parsed, and `probe
--sysfs-root` on the recorded tree reporting the NPUs, their HCCS links and the NUMA layout."""

import shutil
from pathlib import Path

import pytest

from autotune.cli import run
from autotune.probe import npu_smi
from autotune.probe.profile import probe_roots

TOOLS = Path(__file__).parent / "fixtures" / "atlas_800i_a2_tools"
BUSES = ["c1", "c2", "81", "82", "01", "02", "41", "42"]


def test_info_table_gives_ids_names_bus_ids_and_hbm():
    npus = npu_smi.parse_info((TOOLS / npu_smi.RECORDED["info"]).read_text())
    assert [n.npu_id for n in npus] == list(range(8)) and {n.name for n in npus} == {"910B3"}
    assert [n.bus_id for n in npus] == [f"0000:{b}:00.0" for b in BUSES]
    assert {n.hbm_total_mb for n in npus} == {65536}


def test_topology_matrix_and_cpu_affinity():
    topo = npu_smi.parse_topo((TOOLS / npu_smi.RECORDED["topo"]).read_text())
    assert topo.npu_ids == tuple(range(8))
    assert all(topo.labels[i][j] == ("X" if i == j else "HCCS") for i in range(8) for j in range(8))
    assert topo.cpu_affinity[:3] == ("144-167", "144-167", "96-119")


def test_unknown_topology_label_is_refused():
    text = "   NPU0  NPU1  CPU Affinity\nNPU0  X  QPI  0-23\nNPU1  QPI  X  0-23\n"
    with pytest.raises(ValueError, match="QPI"):
        npu_smi.parse_topo(text)


def test_pcie_labels_map_to_the_profile_labels():
    text = "   NPU0  NPU1  NPU2  CPU Affinity\nNPU0 X PIX SYS 0-23\nNPU1 PIX X NA 0-23\nNPU2 SYS NA X 24-47\n"
    assert npu_smi.parse_topo(text).labels[1] == ("PIX", "X", "SYS")


def _recorded_box(box_tree, with_tools=True):
    sys_root, proc_root = box_tree("atlas_800i_a2_910b3")
    if with_tools:
        shutil.copytree(TOOLS, sys_root.parent / "tools")
    return sys_root, proc_root


def test_probe_reads_the_recorded_ascend_box(box_tree):
    sys_root, proc_root = _recorded_box(box_tree)
    hw = probe_roots(sys_root, proc_root).profile
    assert hw.num_gpus == 8 and {a.vendor for a in hw.accelerators} == {"huawei"}
    assert [a.pci_bdf for a in hw.accelerators] == [f"0000:{b}:00.0" for b in BUSES]  # npu-smi's NPU order
    assert [a.numa_node for a in hw.accelerators] == [6, 6, 4, 4, 0, 0, 2, 2]
    assert {a.memory_gib for a in hw.accelerators} == {64.0} and hw.gpu.arch == "ascend910b"
    assert hw.interconnect == "nvlink" and all(all(row) for row in hw.p2p)  # every pair on HCCS
    assert hw.gpu.nvlink_gbs > 0 and hw.gpu.features.collective_library == "hccl"


def test_without_npu_smi_the_pcie_tree_alone_is_reported(box_tree):
    sys_root, proc_root = _recorded_box(box_tree, with_tools=False)
    hw = probe_roots(sys_root, proc_root).profile
    assert hw.interconnect == "pcie" and hw.links[0][1] == "PHB" and hw.gpu.nvlink_gbs == 0.0


def test_probe_cli_prints_cards_links_and_numa(box_tree, capsys):
    sys_root, proc_root = _recorded_box(box_tree)
    assert run(["probe", "--sysfs-root", str(sys_root), "--proc-root", str(proc_root)]) == 0
    out = capsys.readouterr().out
    assert out.count("Huawei Ascend 910B") == 8 and "HCCS" in out and "npu-smi: 8 NPUs (910B3)" in out
    row = next(line for line in out.splitlines() if line.startswith("GPU0 ") and "HCCS" in line)
    assert row.split()[-1] == "6"  # the NUMA column of the topology matrix
