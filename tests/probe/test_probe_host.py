import pytest

from autotune.probe.host import inter_socket_gbs, parse_cpuinfo, parse_meminfo_gb, read_host

# Expected inter-socket figures are NCCL's constants (src/graph/topo.h); the ICX box's 10.0 is what NCCL printed
# for it (`SYS[10.0]` in NVIDIA/nccl-tests#307).
CASES = [
    ("esc8000a_rtx_pro_6000", "AMD EPYC 9575F 64-Core Processor", 2, 128, 2, 32.0),
    ("icx_rtx4090_two_switches", "Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz", 2, 64, 2, 10.0),
    ("genoa_rtx4090_direct", "AMD EPYC 9354 32-Core Processor", 2, 64, 2, 24.0),
    ("bdw_nested_switches", "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", 2, 28, 2, 6.0),
    ("kunpeng_ascend_910b", "arm64 implementer 0x48 part 0xd01", 1, 8, 1, 6.0),
]


@pytest.mark.parametrize(("box", "model", "sockets", "cores", "numa", "socket_gbs"), CASES)
def test_host_from_recorded_trees(box_tree, layout, box, model, sockets, cores, numa, socket_gbs):
    sys_root, proc_root = box_tree(box)
    host = read_host(proc_root, sys_root)
    assert (host.cpu_model, host.sockets, host.cores, host.numa_nodes) == (model, sockets, cores, numa)
    assert host.inter_socket_gbs == socket_gbs
    assert host.memory_gib == round(layout(box)["mem_total_kb"] / 2**20, 1)


def test_this_machine_reads():
    host = read_host()
    assert host.sockets >= 1 and host.cores >= 1 and host.numa_nodes >= 1 and host.memory_gib > 0


def test_missing_files_give_a_neutral_host(tmp_path):
    host = read_host(tmp_path, tmp_path)
    assert (host.cpu_model, host.sockets, host.numa_nodes, host.memory_gib, host.inter_socket_gbs) == (
        "unknown",
        1,
        1,
        0.0,
        0.0,
    )


def test_nccl_cpu_classes():
    assert inter_socket_gbs("GenuineIntel", 6, 0x8F) == 22.0  # Sapphire Rapids
    assert inter_socket_gbs("GenuineIntel", 6, 0xCF) == 40.0  # Emerald Rapids
    assert inter_socket_gbs("GenuineIntel", 6, 0xAD) == 22.0  # Granite Rapids: NCCL's SRP class (nccl#2107)
    assert inter_socket_gbs("AuthenticAMD", 0x19, 0x11) == 24.0
    assert inter_socket_gbs("  Shanghai  ", 7, 0x5B) == 9.0
    assert inter_socket_gbs("HygonGenuine", 0x18, 0) == 0.0  # not in NCCL's table: unknown


def test_cpuinfo_keeps_vendor_padding_and_meminfo_units():
    cpus = parse_cpuinfo("processor\t: 0\nvendor_id\t:   Shanghai  \nmodel name\t: ZHAOXIN KH-40000\n")
    assert cpus[0]["vendor_id"] == "  Shanghai  " and cpus[0]["model name"] == "ZHAOXIN KH-40000"
    assert parse_meminfo_gb("MemTotal:       24683584 kB\n") == 23.5
