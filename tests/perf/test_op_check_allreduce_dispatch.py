"""tests/bench/op_check.py prices AIConfigurator's vLLM all-reduce tables (vLLM <= 0.24) with the dispatch those
versions ran: FlashInfer's standalone all-reduce was opt-in until vllm-project/vllm#52998 (VLLM_ALLREDUCE_USE_FLASHINFER
defaults to "0" in vllm-0.23.0 envs.py:1764-1766), so the custom kernel, torch symmetric memory, then NCCL."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from autotune.capability.profiles import profile
from autotune.perf import comm

SPEC = importlib.util.spec_from_file_location("op_check", Path(__file__).parents[1] / "bench" / "op_check.py")
oc = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault(SPEC.name, oc)
SPEC.loader.exec_module(oc)

MIB = 1024 * 1024


def _path(hw, group, name):
    link = comm.transport(comm.topology(hw), group)
    return next(p for p in profile("vllm").allreduce_paths(hw.gpu.arch, len(group), link) if p.name == name)


def test_the_tables_vllm_runs_symmetric_memory_where_vllm_034_runs_flashinfer():
    """B200, 2 GPUs, 4 MiB: past the custom kernel's limit with symmetric memory on (2 MiB on sm_100), within
    symmetric memory's (8 MiB): the tables' vLLM runs torch symmetric memory, vLLM 0.34 FlashInfer (64 MiB)."""
    hw, group = oc.box("b200_sxm"), (0, 1)
    name, _ = comm.all_reduce(hw, group, 4 * MIB, "custom")
    assert name.endswith("flashinfer")
    symm = comm.path_s(hw, group, _path(hw, group, "symm_mem"), 4 * MIB)
    assert oc.table_dispatch_s(hw, group, 4 * MIB) == pytest.approx(symm)


def test_the_tables_vllm_runs_the_custom_kernel_below_its_limit_and_nccl_past_every_path():
    hw, eight = oc.box("b200_sxm"), tuple(range(8))
    custom = _path(hw, eight, "custom")
    assert oc.table_dispatch_s(hw, eight, 512 * 1024) == pytest.approx(comm.path_s(hw, eight, custom, 512 * 1024))
    big = 2 * _path(hw, eight, "symm_mem").max_bytes
    assert oc.table_dispatch_s(hw, eight, big) == pytest.approx(comm.all_reduce(hw, eight, big, "nccl")[1])
    assert math.isfinite(big)


def test_l40s_rows_at_four_and_eight_gpus_are_printed_apart(tmp_path, monkeypatch):
    """AIConfigurator's L40S table at 4-8 GPUs keeps p x busbw constant (one shared link, op_check APART
    'allreduce shared-link'): those rows are tagged apart, its 2-GPU rows and other systems' rows stay counted."""
    pd = pytest.importorskip("pandas")
    for system in ("l40s", "h200_sxm"):
        table = tmp_path / system / "comm" / "vllm" / "0.22.0" / "custom_allreduce_perf.parquet"
        table.parent.mkdir(parents=True)
        table.touch()
    frame = pd.DataFrame(
        {"kernel_source": ["vLLM_custom_graph"] * 3, "num_gpus": [2, 4, 8], "message_size": [2**20] * 3,
         "latency": [0.1, 0.2, 0.3]}
    )  # fmt: skip
    monkeypatch.setattr(pd, "read_parquet", lambda path: frame)
    assert "allreduce shared-link" in oc.APART
    for system in ("l40s", "h200_sxm"):
        rows = list(oc.allreduce_points(str(tmp_path), system, oc.box(system), None))
        tagged = ["allreduce shared-link" in row[3:] for row in rows]
        assert tagged == ([False, True, True] if system == "l40s" else [False, False, False])
