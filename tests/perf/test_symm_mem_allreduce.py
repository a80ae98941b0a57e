"""vLLM's torch symmetric-memory all-reduce: torch's two-shot kernel pays its entry and exit barriers (two
fixed times), checked against vllm-project/vllm#42324's B200 two-shot timings in autotune/catalog/calibration.yaml."""

from __future__ import annotations

import dataclasses
from importlib.resources import files

import pytest
import yaml

from autotune.capability.profiles.vllm_0_34_0 import allreduce_paths
from autotune.catalog import load_preset
from autotune.catalog.devices import DEVICES_BY_KEY
from autotune.perf import p2p_allreduce

KIB = 1024


def symm_path(arch: str, world: int):
    return next(p for p in allreduce_paths(arch, world, "nvlink") if p.name == "symm_mem")


def b200_x8():
    """The h200-x8 preset's NVSwitch box with B200 parts (as tests/bench/calibration_check.py b200_box)."""
    hw = load_preset("h200-x8")
    spec = DEVICES_BY_KEY["b200"]
    gpus = tuple(
        dataclasses.replace(a, name=spec.name, arch=spec.arch, nvlink_gbs=spec.nvlink_gbs) for a in hw.accelerators
    )
    return dataclasses.replace(hw, accelerators=gpus)


def test_two_shot_worlds_pay_two_fixed_times_multimem_worlds_keep_one():
    # vllm symm_mem.py:26-31: multimem at 4 / 6 / 8 ranks on sm_90, 6 / 8 on sm_100; two-shot elsewhere
    assert symm_path("sm_100", 2).two_shot_syncs == 2
    assert symm_path("sm_100", 4).two_shot_syncs == 2
    assert symm_path("sm_90", 2).two_shot_syncs == 2
    assert symm_path("sm_100", 8).two_shot_syncs == 1
    assert symm_path("sm_90", 4).two_shot_syncs == 1


def test_b200_two_rank_two_shot_within_25_percent_of_vllm42324():
    entries = yaml.safe_load((files("autotune.catalog") / "calibration.yaml").read_text())
    entries = entries if isinstance(entries, list) else next(v for v in entries.values() if isinstance(v, list))
    table = next(e for e in entries if e["id"] == "symm-mem-allreduce-vllm42324")["metrics"]["b200_world_size_2_ms"]
    hw, path = b200_x8(), dataclasses.replace(symm_path("sm_100", 2), max_bytes=float("inf"))
    sizes = {"512 KiB": 512 * KIB, "1 MiB": 1024 * KIB, "1.5 MiB": 1536 * KIB}
    assert set(table) == set(sizes)
    for label, (_, _, two_shot_ms) in table.items():
        predicted_ms = p2p_allreduce.path_s(hw, (0, 1), path, sizes[label]) * 1e3
        assert predicted_ms == pytest.approx(two_shot_ms, rel=0.25), label
