from autotune.catalog.presets import load_preset
from autotune.probe import sysfs


def _labels(root):
    return sysfs.link_matrix(sysfs.scan(root).accelerators)


def test_esc8000a_labels_match_the_recorded_nvidia_smi_topo(box_tree):
    sys_root, _ = box_tree("esc8000a_rtx_pro_6000")
    assert _labels(sys_root) == load_preset("rtx-pro-6000-x8").links  # the preset holds the recorded matrix


def test_esc8000a_finds_eight_gpus_and_four_gen5_switches(box_tree):
    scan = sysfs.scan(box_tree("esc8000a_rtx_pro_6000")[0])
    assert [d.bdf for d in scan.accelerators][:3] == ["0000:13:00.0", "0000:14:00.0", "0000:73:00.0"]
    assert len(scan.accelerators) == 8  # the BMC's ASPEED VGA (class 0x0300, vendor 1a03) is not an accelerator
    assert [s.upstream_port for s in scan.switches] == ["0000:11:00.0", "0000:71:00.0", "0000:81:00.0", "0000:f1:00.0"]
    assert all(s.top_level and s.uplink.gbs == 63.0 and len(s.members) == 2 for s in scan.switches)
    assert sysfs.uplink_gbs(scan.switches, {d.bdf for d in scan.accelerators}) == 63.0


def test_switch_per_socket_box_pix_inside_sys_across(box_tree):
    scan = sysfs.scan(box_tree("icx_rtx4090_two_switches")[0])
    buses = [d.bdf[5:7] for d in scan.accelerators]
    assert buses == ["4e", "4f", "50", "51", "ce", "cf", "d0", "d1"]  # the NICs and the GPUs' audio functions are out
    labels = sysfs.link_matrix(scan.accelerators)
    assert labels[0] == ("X", "PIX", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS")
    assert labels[5] == ("SYS", "SYS", "SYS", "SYS", "PIX", "X", "PIX", "PIX")
    assert [(s.upstream_port, s.uplink.gbs) for s in scan.switches] == [("0000:4b:00.0", 31.5), ("0000:ca:00.0", 31.5)]
    assert scan.iommu_groups == 3


def test_direct_attach_box_node_inside_socket(box_tree):
    sys_root, _ = box_tree("genoa_rtx4090_direct")
    scan = sysfs.scan(sys_root)
    assert sysfs.link_matrix(scan.accelerators) == load_preset("rtx-4090-x8").links
    assert scan.switches == ()
    assert sysfs.uplink_gbs(scan.switches, {d.bdf for d in scan.accelerators}) == 0.0
    gpu = scan.accelerators[0]
    assert (gpu.link.max_gen, gpu.link.max_width) == (4, 16)  # Gen4 card in a Gen5 root port
    assert gpu.bridges == ("0000:00:01.1",) and gpu.root == "pci0000:00"


def test_nested_switches_give_pxb(box_tree):
    scan = sysfs.scan(box_tree("bdw_nested_switches")[0])
    assert sysfs.link_matrix(scan.accelerators) == load_preset("l40s-x8").links  # same two-level pattern
    top = [s for s in scan.switches if s.top_level]
    assert [s.upstream_port for s in top] == ["0000:02:00.0", "0000:82:00.0"]
    assert len(scan.switches) == 6 and all(len(s.members) == 4 for s in top)
    assert sysfs.uplink_gbs(scan.switches, {d.bdf for d in scan.accelerators}) == 15.8  # Gen3 x16


def test_domestic_vendor_ids_and_processing_accelerator_class(box_tree):
    scan = sysfs.scan(box_tree("kunpeng_ascend_910b")[0])
    assert [(d.vendor_id, d.device_id, d.class_code >> 16) for d in scan.accelerators] == [
        (0x19E5, 0xD802, 0x12),
        (0x19E5, 0xD8FF, 0x12),
    ]  # the Huawei NIC (class 0x0200) is left out
    assert sysfs.link_matrix(scan.accelerators) == (("X", "PHB"), ("PHB", "X"))  # one host bridge, two root ports


def test_missing_sysfs_is_an_empty_scan(tmp_path):
    scan = sysfs.scan(tmp_path / "nothing")
    assert scan.accelerators == () and scan.switches == () and scan.iommu_groups == 0


def test_link_speed_strings():
    assert sysfs.parse_link_gen("32.0 GT/s PCIe\n") == 5
    assert sysfs.parse_link_gen("8 GT/s") == 3  # older kernels
    assert sysfs.parse_link_gen("2.5 GT/s PCIe") == 1
    assert sysfs.parse_link_gen("Unknown") == 0
