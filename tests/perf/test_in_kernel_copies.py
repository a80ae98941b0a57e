"""A P2P all-reduce kernel that copies its input into the shared buffer itself (TensorRT-LLM's kernels with
COPY_INPUT, as sglang#2904 timed them outside CUDA graphs) pays that copy at memory bandwidth, without the launch a
separate copy kernel pays."""

from __future__ import annotations

import dataclasses
import math

import pytest

from autotune.capability.engine_profile import AllReducePath
from autotune.catalog import load_preset
from autotune.perf import comm_rates, p2p_allreduce

MIB = 1024 * 1024


@pytest.mark.parametrize(("ranks", "nbytes"), [(2, 4 * MIB), (4, 2 * MIB), (8, 1 * MIB)])
def test_an_in_kernel_copy_costs_the_message_read_and_written_once_at_memory_bandwidth(ranks, nbytes):
    hw = load_preset("h200-x8")
    group = tuple(range(ranks))
    plain = AllReducePath("custom", math.inf, math.inf if ranks <= 2 else 1e6, two_shot_syncs=2)
    copying = dataclasses.replace(plain, in_kernel_copies=1)
    extra_s = p2p_allreduce.path_s(hw, group, copying, nbytes) - p2p_allreduce.path_s(hw, group, plain, nbytes)
    assert extra_s == pytest.approx(2 * nbytes / (hw.gpu.mem_bw_gbs * 1e9), rel=1e-9)


def test_an_in_kernel_copy_has_no_launch_of_its_own_where_a_copy_kernel_does():
    hw = load_preset("h200-x8")
    group, tiny = (0, 1), 16.0
    plain = AllReducePath("custom", math.inf, math.inf)
    in_kernel = p2p_allreduce.path_s(hw, group, dataclasses.replace(plain, in_kernel_copies=1), tiny)
    kernel = p2p_allreduce.path_s(hw, group, dataclasses.replace(plain, copies=1), tiny)
    assert in_kernel == pytest.approx(p2p_allreduce.path_s(hw, group, plain, tiny), abs=1e-9)
    assert kernel - in_kernel == pytest.approx(comm_rates.DEVICE_COPY_MIN_US * 1e-6, rel=1e-6)
