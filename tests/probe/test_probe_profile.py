import pytest

from autotune.catalog.presets import load_preset
from autotune.probe import ProbeResult, format_probe, probe
from autotune.probe import sysfs as probe_sysfs


@pytest.mark.skipif(bool(probe_sysfs.scan("/sys").accelerators), reason="this machine has accelerators")
def test_this_machine_has_no_accelerators():
    result = probe()
    assert isinstance(result, ProbeResult) and result.profile is None
    text = format_probe(result)
    assert "no accelerators found" in text and text.startswith("host: ")


def test_sysfs_only_profile_equals_the_preset_of_the_same_box(box_tree):
    sys_root, proc_root = box_tree("genoa_rtx4090_direct")
    hw = probe(str(sys_root), str(proc_root), use_nvml=False).profile
    preset = load_preset("rtx-4090-x8")
    assert hw.accelerators == preset.accelerators  # datasheet figures, recorded bus ids, NUMA nodes, Gen4 x16
    assert hw.links == preset.links and hw.p2p == preset.p2p  # GeForce: P2P off by datasheet default
    assert hw.host.inter_socket_gbs == preset.host.inter_socket_gbs == 24.0


def test_sysfs_only_esc8000a(box_tree):
    sys_root, proc_root = box_tree("esc8000a_rtx_pro_6000")
    result = probe(str(sys_root), str(proc_root), use_nvml=False)
    hw = result.profile
    preset = load_preset("rtx-pro-6000-x8")
    assert hw.links == preset.links and hw.p2p == preset.p2p and hw.pcie_switch_uplink_gbs == 63.0
    assert hw.gpu.memory_gib == 96.0 and hw.gpu.features == preset.gpu.features
    assert "P2P from datasheet defaults (no NVML); confirm with a copy test (probe --bench)" in result.notes
    assert [s.upstream_port for s in result.switches][0] == "0000:11:00.0"


def test_unknown_device_keeps_zeros_and_says_so(box_tree):
    sys_root, proc_root = box_tree("bdw_nested_switches")
    result = probe(str(sys_root), str(proc_root), use_nvml=False)
    gpu = result.profile.gpu
    assert (gpu.name, gpu.peak_tflops, gpu.mem_bw_gbs, gpu.memory_gib) == ("nvidia device 0x1b06", {}, 0.0, 0.0)
    assert any("unknown device 'nvidia device 0x1b06' (10de:1b06)" in n for n in result.notes)
    assert result.profile.p2p[0][1] is False  # no datasheet, no P2P claim
    assert result.profile.name == "unknown-x8"


def test_domestic_accelerators_from_sysfs(box_tree):
    sys_root, proc_root = box_tree("kunpeng_ascend_910b")
    result = probe(str(sys_root), str(proc_root), use_nvml=False)
    hw = result.profile
    assert [a.name for a in hw.accelerators] == ["Huawei Ascend 910B", "huawei device 0xd8ff"]
    assert {a.features.collective_library for a in hw.accelerators} == {"hccl"}
    assert hw.gpu.peak_tflops == {"bf16": 280.0, "int8": 560.0} and hw.gpu.arch == "ascend910b"
    assert hw.name == "mixed-x2" and hw.links == (("X", "PHB"), ("PHB", "X"))
    assert any("GPU1 Gen3 x8" in n for n in result.notes)


def test_format_probe_prints_topo_matrix_and_summary(fake_nvml, box_tree):
    fake_nvml("esc8000a")
    sys_root, proc_root = box_tree("esc8000a_rtx_pro_6000")
    text = format_probe(probe(str(sys_root), str(proc_root)))
    lines = text.splitlines()
    assert lines[0].startswith("host: AMD EPYC 9575F 64-Core Processor; 2 socket(s), 128 cores, 2 NUMA node(s)")
    assert any(line.split() == ["GPU0", "X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS", "0"] for line in lines)
    assert any(line.split() == ["GPU7", "OK", "OK", "OK", "OK", "OK", "OK", "OK", "X"] for line in lines)
    assert any(line.startswith("interconnect: pcie; P2P: all pairs, switch uplink 63 GB/s") for line in lines)
    switch = "PCIe switch 0000:11:00.0: uplink Gen5 x16 (63 GB/s) above GPU0, GPU1"
    assert switch in lines
    assert "no accelerators found" not in text
