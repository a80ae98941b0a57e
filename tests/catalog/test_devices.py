import re

import pytest

from autotune.catalog.devices import DEVICES, DEVICES_BY_KEY, VENDORS, find_device, find_device_by_pci

# Names as NVML / nvidia-smi print them -> catalog row.
NVML_NAMES = {
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000-server",
    "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA L40S": "l40s",
    "NVIDIA L20": "l20",
    "NVIDIA L4": "l4",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb",
    "NVIDIA A100-PCIE-80GB": "a100-pcie-80gb",
    "NVIDIA A100-SXM4-80GB": "a100-sxm-80gb",
    "NVIDIA A800-SXM4-80GB": "a800-sxm-80gb",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H20": "h20",
    "NVIDIA H200": "h200-sxm",
    "NVIDIA H200 NVL": "h200-nvl",
    "NVIDIA B200": "b200",
}
# Names that must not borrow another part's datasheet.
NOT_IN_TABLE = [
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA L40",
    "NVIDIA A100-SXM4-40GB",  # 1,555 GB/s HBM2: not the 80GB part's 2,039
    "NVIDIA H100 NVL",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
]
REQUIRED = ["rtx-pro-6000-server", "l20", "l40s", "l4", "rtx-4090", "rtx-5090", "a100-pcie-80gb", "h100-pcie", "h20"]
REQUIRED += ["h200-sxm", "h100-sxm", "ascend-910b", "mlu370-x8", "mtt-s4000", "hygon-k100-ai", "metax-c500"]


@pytest.mark.parametrize(("name", "key"), NVML_NAMES.items())
def test_nvml_names_resolve(name, key):
    assert find_device(name).key == key
    assert find_device(name.upper()).key == key  # case-insensitive


@pytest.mark.parametrize("name", NOT_IN_TABLE)
def test_other_parts_do_not_match(name):
    assert find_device(name) is None


def test_required_rows_present():
    assert set(REQUIRED) <= set(DEVICES_BY_KEY)


@pytest.mark.parametrize("spec", DEVICES, ids=lambda s: s.key)
def test_row_is_complete_and_finds_itself(spec):
    assert find_device(spec.name, spec.vendor) is spec
    assert spec.source and spec.confidence in {"H", "M", "L", "M/L", "H/M"}
    assert spec.memory_gib > 0 and spec.mem_bw_gbs >= 0
    assert set(spec.peak_tflops) <= {"bf16", "fp8", "fp4", "int8"}
    assert all(v > 0 for v in spec.peak_tflops.values())
    f = spec.features
    assert (f.bf16, f.fp8, f.fp4, f.int8) == tuple(d in spec.peak_tflops for d in ("bf16", "fp8", "fp4", "int8"))
    for pci_id in spec.pci_ids:
        vendor_id = next(v.pci_vendor_id for v in VENDORS.values() if v.name == spec.vendor)
        assert find_device_by_pci(vendor_id, pci_id) is spec
    if spec.vendor == "nvidia":
        assert re.fullmatch(r"sm_\d+", spec.arch) and spec.pcie_gen in (4, 5, 6)


def test_dense_not_sparse():
    # hardware.md §4: third-party pages quote the with-sparsity H100/H200 numbers as dense; dense is half
    assert DEVICES_BY_KEY["h100-sxm"].peak_tflops["bf16"] == 989
    assert DEVICES_BY_KEY["h200-sxm"].peak_tflops["fp8"] == 1979


def test_geforce_has_no_p2p_by_default_and_datacenter_does():
    assert not DEVICES_BY_KEY["rtx-4090"].p2p_default and not DEVICES_BY_KEY["rtx-5090"].p2p_default
    assert DEVICES_BY_KEY["l40s"].p2p_default and DEVICES_BY_KEY["rtx-pro-6000-server"].p2p_default


def test_vendor_table_and_collective_libraries():
    assert {f"{k:04x}" for k in VENDORS} >= {"10de", "1002", "19e5", "cabc", "1d94", "1ed5", "9999", "1e3e", "1e36"}
    libs = {d.vendor: d.features.collective_library for d in DEVICES}
    assert libs["nvidia"] == "nccl" and libs["huawei"] == "hccl" and libs["cambricon"] == "cncl"
    assert libs["moorethreads"] == "mccl" and libs["hygon"] == "rccl"


def test_pci_lookup():
    assert find_device_by_pci(0x10DE, 0x2BB5).key == "rtx-pro-6000-server"
    assert find_device_by_pci(0x1ED5, 0x0327).key == "mtt-s4000"
    assert find_device_by_pci(0x10DE, 0x20B2).key == "a100-sxm-80gb"  # pci.ids: GA100 [A100 SXM4 80GB]
    assert find_device_by_pci(0x10DE, 0x1B06) is None and find_device_by_pci(0x1234, 0x2BB5) is None


def test_unpublished_figures_are_empty_not_invented():
    s60 = DEVICES_BY_KEY["enflame-s60"]
    assert s60.peak_tflops == {} and s60.mem_bw_gbs == 0.0 and not s60.features.bf16
