"""Collectives on recorded topologies, checked against public measurements (shared/reference/calibration.yaml)."""

import dataclasses

import pytest

from autotune.catalog import load_preset
from autotune.perf import comm

MB = 1 << 20


def modelled(hw):
    """The same box without its measured curves, so the analytical model answers."""
    return dataclasses.replace(hw, measured=None)


def busbw_gbs(seconds, nbytes, p):
    return nbytes * 2 * (p - 1) / p / seconds / 1e9


def test_pcie_allreduce_busbw_matches_rtx6kpro_measurements():
    # pcie-rtx6kpro-nccl-allreduce-8gpu: 37.6-41.1 GB/s busbw at 8 MB - 2 GB with tuned channels
    hw = modelled(load_preset("rtx-pro-6000-x8"))
    nbytes = 512 * MB
    bw = busbw_gbs(comm.all_reduce_s(hw, tuple(range(8)), nbytes), nbytes, 8)
    assert 25 <= bw <= 45


def test_small_message_latency_is_tens_of_microseconds_on_pcie():
    hw = modelled(load_preset("rtx-pro-6000-x8"))
    t_us = comm.all_reduce_s(hw, tuple(range(8)), 256) * 1e6
    assert 15 <= t_us <= 35  # calibration: 24-25 us (NCCL, 8 GPUs behind switches)


def test_measured_curve_is_used_and_interpolated():
    hw = load_preset("rtx-pro-6000-x8")
    assert hw.measured and "all_reduce/8" in hw.measured.collectives
    at_point = comm.all_reduce_s(hw, tuple(range(8)), 262144)
    assert at_point == pytest.approx(86.2e-6)
    between = comm.all_reduce_s(hw, tuple(range(8)), 1 * MB)
    assert 86.2e-6 < between < 2976e-6
    # a group the curves do not cover falls back to the model
    assert comm.all_reduce_s(hw, (2, 3), MB) == comm.all_reduce_s(modelled(hw), (2, 3), MB)


def test_nvlink_is_much_faster_than_pcie_for_large_messages():
    pcie = modelled(load_preset("rtx-pro-6000-x8"))
    nvl = modelled(load_preset("h200-x8"))
    group = tuple(range(8))
    assert comm.all_reduce_s(nvl, group, 256 * MB) * 5 < comm.all_reduce_s(pcie, group, 256 * MB)


def test_crossing_sockets_costs_more_than_staying_on_one():
    hw = modelled(load_preset("rtx-pro-6000-x8"))
    slow = dataclasses.replace(hw, host=dataclasses.replace(hw.host, inter_socket_gbs=8.0))
    same_socket, cross = (0, 1, 2, 3), (0, 1, 4, 5)
    assert comm.all_reduce_s(slow, cross, 64 * MB) > 1.5 * comm.all_reduce_s(slow, same_socket, 64 * MB)


def test_disabled_p2p_goes_through_host_memory_and_is_slower():
    no_p2p = modelled(load_preset("rtx-4090-x8"))
    assert not no_p2p.p2p[0][1]
    enabled = dataclasses.replace(no_p2p, p2p=tuple(tuple(True for _ in r) for r in no_p2p.p2p))
    group = tuple(range(8))
    assert comm.all_reduce_s(no_p2p, group, 64 * MB) > 2 * comm.all_reduce_s(enabled, group, 64 * MB)
    assert comm.transport(comm.topology(no_p2p), group) == "shm"


def test_custom_allreduce_only_where_engines_enable_it():
    pcie = comm.topology(load_preset("rtx-pro-6000-x8"))
    assert comm.custom_allreduce_applies(pcie, (0, 1))
    assert not comm.custom_allreduce_applies(pcie, (0, 1, 2, 3))
    assert comm.custom_allreduce_applies(comm.topology(load_preset("h200-x8")), tuple(range(8)))
    assert not comm.custom_allreduce_applies(comm.topology(load_preset("rtx-4090-x8")), (0, 1))


def test_all_to_all_is_bound_by_shared_switch_uplinks():
    hw = modelled(load_preset("l20-x8"))
    per_rank = 64 * MB
    wide = comm.all_to_all_s(hw, tuple(range(8)), per_rank)
    narrow = comm.all_to_all_s(hw, (0, 1), per_rank)
    assert wide > narrow


def test_ring_order_keeps_switch_neighbours_together():
    topo = comm.topology(load_preset("rtx-pro-6000-x8"))
    ring = comm.ring_order(topo, (4, 0, 5, 1))
    assert ring == (0, 1, 4, 5)
