"""tests/bench/calibration_check.py's leave-one-source-out: a row's constants are fitted without any row of its
own source, and a constant only its own source moves falls back to the prior."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "calibration_check", Path(__file__).parents[1] / "bench" / "calibration_check.py"
)
cc = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault(SPEC.name, cc)  # dataclasses look their module up there
SPEC.loader.exec_module(cc)


def expected_length(a: float, k: int = 5) -> float:
    return (1 - a ** (k + 1)) / (1 - a)


def test_loso_fits_each_row_on_the_other_sources_only(monkeypatch):
    grid = (0.5, 0.6, 0.68, 0.75, 0.8)
    monkeypatch.setattr(
        cc,
        "FITTED",
        [
            ("dspark", "DRAFT_ACCEPTANCE[dspark]", grid, 0.0),
            ("mtp", "DRAFT_ACCEPTANCE[mtp]", (0.6, 0.85, 0.9), 0.0),
        ],
    )
    rows = [
        cc.Row("a", "dspark k=5", "tok", expected_length(0.6), cc.accepted_tokens("dspark", 5)),
        cc.Row("b", "dspark k=5", "tok", expected_length(0.8), cc.accepted_tokens("dspark", 5)),
        cc.Row("c", "mtp k=1", "tok", 1.9, cc.accepted_tokens("mtp", 1)),
    ]
    base = cc.evaluate(rows)
    loo, in_sample = cc.leave_one_out(rows, base)
    assert loo[0] == pytest.approx(expected_length(0.8))  # source a's row: the constant fitted on b alone
    assert loo[1] == pytest.approx(expected_length(0.6))  # and the other way round
    assert loo[2] == pytest.approx(1.0)  # only c moves the MTP constant: held out, the prior 0 (one token)
    assert in_sample["DRAFT_ACCEPTANCE[mtp]"] == 0.9
    assert cc.read_constant("DRAFT_ACCEPTANCE[dspark]") == 0.68  # the shipped value restored afterwards
