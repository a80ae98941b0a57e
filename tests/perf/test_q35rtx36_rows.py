"""tests/bench/calibration_check.py q35rtx36_rows: the 4-GPU NCCL all-reduce table of the rtx-pro-6000-x8 box's page
is counted, names its calibration entry, and is the table the preset records as measured."""

from __future__ import annotations

from importlib.resources import files

import pytest
import yaml

from autotune.catalog import load_preset
from tests.perf.calibration_check_module import cc


def test_rows_name_their_entries_and_are_counted():
    entries = {
        e["id"]: e for e in yaml.safe_load((files("autotune.catalog") / "calibration.yaml").read_text())["entries"]
    }
    added = cc.q35rtx36_rows()
    assert {r.entry for r in added} == {"rtx6kpro-asus-nccl-allreduce-4gpu"}
    assert "rtx6kpro-qwen35-decode-workload" in entries
    assert "rtx6kpro-qwen35-decode-workload" in {entry for entry, _ in cc.NOT_EXPRESSIBLE}
    assert {(r.entry, r.label) for r in added} <= {(r.entry, r.label) for r in cc.rows()}
    # the rows' figures are the entry's, and the preset's measured 4-GPU block records the same table
    table = entries["rtx6kpro-asus-nccl-allreduce-4gpu"]["metrics"]["nccl_us"]
    assert sorted(r.measured for r in added) == sorted(v for k, v in table.items() if k != "32 MB")
    measured = {
        p.message_bytes: p.latency_us for p in load_preset("rtx-pro-6000-x8").measured.collectives["all_reduce/4"]
    }
    assert all(measured[size] == value for size, _, value in cc.ASUS_AR4_NCCL_US)


def test_rows_price_nccl_on_gpus_0_to_3():
    """Each row is the model's NCCL all-reduce on GPUs 0-3 of the box (the model, not the preset's measured curve)."""
    (row,) = [r for r in cc.q35rtx36_rows() if r.label.startswith("AR 4 GPU 4 KB")]
    assert row.predict() == pytest.approx(cc.us(lambda: cc.box("rtx-pro-6000-x8"), (0, 1, 2, 3), 4096, cc.nccl())())
