"""tests/bench/calibration_check.py pcie_source_rows (src22a): the boxes built for the second PCIe sources are the
ones their pages describe, and every row they add is an entry of autotune/catalog/calibration.yaml."""

from __future__ import annotations

from importlib.resources import files

import pytest
import yaml

from autotune.perf import comm_rates, efficiency
from tests.perf.calibration_check_module import cc


def test_tinybox_is_six_gen4_gpus_on_one_socket_without_switches():
    hw = cc.tinybox()
    topo = cc.comm.topology(hw)
    assert hw.num_gpus == 6 and {a.pcie_gen for a in hw.accelerators} == {4}
    assert set(topo.socket_of) == {0}  # one socket: no socket link in any ring
    assert len(set(topo.switch_of)) == 6  # a root port each: no shared switch uplink
    assert all(all(row) for row in hw.p2p)  # the patched driver's peer access


def test_tinybox_ring_is_link_bound_only_with_p2p_on_every_pair():
    """At 32 MB the 6-GPU ring is bound by the GPU links at PCIE_COLLECTIVE_EFFICIENCY when NCCL runs P2P on the
    NODE pairs (NCCL < 2.23.4 on an AMD host), and by the SHM path's share of it at today's default level."""
    six, raw = tuple(range(6)), cc.tinybox().accelerators[0].pcie_gbs
    p2p = cc.busbw(cc.tinybox(), six, 32 * cc.MIB, cc.nccl(NCCL_P2P_LEVEL="SYS"))
    shm = cc.busbw(cc.tinybox(), six, 32 * cc.MIB, cc.nccl())
    assert p2p == pytest.approx(raw * efficiency.PCIE_COLLECTIVE_EFFICIENCY, rel=0.05)
    assert shm / p2p == pytest.approx(comm_rates.NCCL_SHM_VS_P2P, rel=0.05)


def test_wrx90_box_is_two_switches_on_one_socket():
    topo = cc.comm.topology(cc.wrx90_cpayne())
    assert topo.switch_of == (0, 0, 0, 0, 4, 4, 4, 4)
    assert set(topo.socket_of) == {0}


def test_wrx90_two_flows_across_the_switches_each_take_one_uplink_direction():
    """The page's bidirectional cross-switch pair of flows moves twice one flow (each uplink carries one flow per
    direction), and a same-switch copy is bound by the GPU link alone, as the page measures (56.3 GB/s both)."""
    one = cc.copy_gbs([(0, 1)], cc.wrx90_cpayne)()
    across = cc.copy_gbs([(0, 4)], cc.wrx90_cpayne)()
    both = cc.copy_gbs([(0, 4), (5, 1)], cc.wrx90_cpayne)()
    assert across == pytest.approx(one, rel=1e-3)  # the uplink (63.0) vs the GPU link (16 x 3.938)
    assert both == pytest.approx(2 * one, rel=1e-3)


def test_every_added_row_names_a_calibration_entry():
    entries = {e["id"] for e in yaml.safe_load((files("autotune.catalog") / "calibration.yaml").read_text())["entries"]}
    added = cc.pcie_source_rows() + cc.pcie_source_apart_rows()
    assert {r.entry for r in added} <= entries
    assert {r.entry for r in added} == {"pcie-tinybox-4090-p2p-readme", "rtx6kpro-wrx90-cpayne-8gpu"}
    counted = {(r.entry, r.label) for r in cc.pcie_source_rows()}
    apart = {(r.entry, r.label) for r in cc.apart_rows()}
    assert counted.isdisjoint(apart)  # a row is counted or shown apart, not both
    assert {(r.entry, r.label) for r in cc.pcie_source_apart_rows()} <= apart  # apart_rows shows the WRX90 table
    assert counted <= {(r.entry, r.label) for r in cc.rows()}  # and rows() counts the others
