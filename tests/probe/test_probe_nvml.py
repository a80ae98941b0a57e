import ctypes

import pytest

from autotune.catalog.presets import load_preset
from autotune.probe import probe
from autotune.probe.nvml import normalize_bdf, probe_nvml


def test_pcie_box_through_nvml(fake_nvml, box_tree):
    fake_nvml("esc8000a")
    sys_root, proc_root = box_tree("esc8000a_rtx_pro_6000")
    result = probe(str(sys_root), str(proc_root))
    hw = result.profile
    preset = load_preset("rtx-pro-6000-x8")
    assert hw.name == "rtx-pro-6000-server-x8" and hw.source == "probe" and hw.interconnect == "pcie"
    assert hw.links == preset.links and hw.p2p == preset.p2p
    assert hw.pcie_switch_uplink_gbs == 63.0  # from the sysfs switch walk, which NVML does not report
    gpu = hw.accelerators[0]
    assert (gpu.name, gpu.pci_bdf, gpu.memory_gib, gpu.arch) == (preset.gpu.name, "0000:13:00.0", 95.6, "sm_120")
    assert (gpu.pcie_gen, gpu.pcie_width) == (5, 16) and gpu.peak_tflops == preset.gpu.peak_tflops
    assert [a.numa_node for a in hw.accelerators] == [0, 0, 0, 0, 1, 1, 1, 1]  # NVML NotSupported -> sysfs
    assert "NVML nvmlDeviceGetNumaNodeId: NVMLError_NotSupported" in result.notes
    assert any("GPU0 Gen1 x16" in n for n in result.notes)  # idle down-training is reported, not hidden
    assert hw.sources[0] == "probe: NVML (driver 575.57.08) + sysfs PCI tree"


def test_geforce_box_has_no_p2p(fake_nvml, box_tree):
    fake_nvml("icx-4090")
    sys_root, proc_root = box_tree("icx_rtx4090_two_switches")
    hw = probe(str(sys_root), str(proc_root)).profile
    assert all(ok == (i == j) for i, row in enumerate(hw.p2p) for j, ok in enumerate(row))
    assert hw.links[0] == ("X", "PIX", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS")
    assert [a.numa_node for a in hw.accelerators] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert hw.host.inter_socket_gbs == 10.0 and hw.pcie_switch_uplink_gbs == 31.5


def test_nvlink_bridge_pair(fake_nvml, tmp_path):
    fake_nvml("a100-bridge")
    hw = probe(str(tmp_path), str(tmp_path)).profile
    assert hw.links == (("X", "NV12"), ("NV12", "X")) and hw.interconnect == "nvlink"
    assert [a.nvlink_gbs for a in hw.accelerators] == [300.0, 300.0]
    assert [a.pci_bdf for a in hw.accelerators] == ["0000:17:00.0", "0000:65:00.0"]
    assert hw.accelerators[0].features.fp8 is False  # A100: no FP8 (hardware.md §4)


def test_nvswitch_pair(fake_nvml, tmp_path):
    fake_nvml("hgx-h100-pair")
    hw = probe(str(tmp_path), str(tmp_path)).profile
    assert hw.links == (("X", "NV18"), ("NV18", "X"))
    assert hw.gpu.peak_tflops["bf16"] == 989.0 and hw.gpu.nvlink_gbs == 450.0


def test_missing_driver_falls_back_to_sysfs(fake_nvml, box_tree):
    fake_nvml("no-driver")
    sys_root, proc_root = box_tree("genoa_rtx4090_direct")
    result = probe(str(sys_root), str(proc_root))
    assert result.notes[0] == "NVML unavailable: NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    assert result.profile.sources[0] == "probe: sysfs PCI tree (no NVML)"
    assert result.profile.links == load_preset("rtx-4090-x8").links


def test_nvml_failure_mid_scan_is_a_reason_not_a_crash(fake_nvml):
    fake = fake_nvml("esc8000a")

    def broken(handle):
        raise fake.NVMLError(fake.NVML_ERROR_NOT_SUPPORTED)

    fake.nvmlDeviceGetPciInfo = broken
    scan, reason = probe_nvml()
    assert scan is None and reason == "NVML scan failed: NVMLError_NotSupported: Not Supported"


def test_p2p_read_constant_is_a_tuple_in_pynvml(fake_nvml):
    fake = fake_nvml("esc8000a")
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(ctypes.ArgumentError):
        fake.nvmlDeviceGetP2PStatus(handle, handle, fake.NVML_P2P_CAPS_INDEX_READ)
    scan, _ = probe_nvml()
    assert all(all(row) for row in scan.p2p)  # the probe passes the int 0


def test_bus_id_bytes_to_sysfs_form():
    assert normalize_bdf(b"00000000:4E:00.0") == "0000:4e:00.0"
    assert normalize_bdf("00000001:C1:00.1") == "0001:c1:00.1"


def test_function_missing_from_an_older_pynvml(fake_nvml, box_tree):
    fake = fake_nvml("icx-4090")
    del fake.nvmlDeviceGetNumaNodeId
    sys_root, proc_root = box_tree("icx_rtx4090_two_switches")
    result = probe(str(sys_root), str(proc_root))
    assert [a.numa_node for a in result.profile.accelerators] == [0, 0, 0, 0, 1, 1, 1, 1]  # from sysfs
    assert "NVML nvmlDeviceGetNumaNodeId: not in this pynvml" in result.notes
