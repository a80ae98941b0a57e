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


def test_an_override_of_the_pcie_efficiency_reaches_the_nccl_ring():
    """PCIE_COLLECTIVE_EFFICIENCY changes a PCIe NCCL all-reduce under the check's override (topology.transfer_s
    bound it as a default argument at import, so the check's refits and its LOSO never moved it)."""
    hw = cc.box("rtx-pro-6000-x8")
    run = cc.us(lambda: hw, (0, 1, 2, 3), 32 * cc.MIB, cc.nccl(NCCL_P2P_LEVEL="SYS"))
    shipped = run()
    with cc.overrides({"PCIE_COLLECTIVE_EFFICIENCY": 0.31}):
        halved = run()
    assert halved == pytest.approx(2 * shipped, rel=0.1)
    assert run() == pytest.approx(shipped)


def test_a_constant_is_fitted_only_on_the_rows_it_sets():
    """A row takes part in fitting a constant only where that constant's elasticity is a real share of the row's
    largest: a latency row (bandwidth elasticity 0.02) does not set the bandwidth efficiency."""
    grid = (0.5, 1.0, 2.0)
    latency_row = [1.0, 2.0, 4.0]  # prediction ~ latency: elasticity 1
    tables = {
        "latency": {v: [latency_row[k], 100 * v] for k, v in enumerate(grid)},
        "bandwidth": {v: [1.0 * v**-0.02, 100.0 / v] for v in grid},
    }
    sets = cc.rows_set_by(tables, {"latency": 1.0, "bandwidth": 1.0})
    assert sets["latency"] == [0, 1]
    assert sets["bandwidth"] == [1]


def test_a_prior_can_name_another_fitted_constant(monkeypatch):
    """A constant with no row outside the held-out source takes the named constant's value from the same fit."""
    monkeypatch.setattr(
        cc,
        "FITTED",
        [
            ("mtp", "DRAFT_ACCEPTANCE[mtp]", (0.6, 0.7, 0.85, 0.9), 0.0),
            ("dspark", "DRAFT_ACCEPTANCE[dspark]", (0.6, 0.68, 0.7, 0.9), "DRAFT_ACCEPTANCE[mtp]"),
        ],
    )
    rows = [
        cc.Row("a", "mtp k=1", "tok", expected_length(0.7, 1), cc.accepted_tokens("mtp", 1)),
        cc.Row("b", "dspark k=5", "tok", expected_length(0.9), cc.accepted_tokens("dspark", 5)),
    ]
    loo, in_sample = cc.leave_one_out(rows, cc.evaluate(rows))
    assert in_sample["DRAFT_ACCEPTANCE[dspark]"] == 0.9
    assert loo[1] == pytest.approx(expected_length(0.7))  # b held out: dspark takes mtp's value fitted on a


def test_the_check_measures_its_own_checkout():
    """Run as a file from a worktree, the check imports that worktree's autotune, not the venv's checkout."""
    root = Path(cc.__file__).resolve().parents[2]
    assert str(root) in sys.path
    assert Path(cc.comm.__file__).resolve().is_relative_to(root)


def test_the_pcie_ipc_efficiency_falls_back_to_an_independent_all_pairs_figure():
    """Held out, the PCIe-IPC efficiency (fitted on sglang-pcie-ipc) falls back to another source's figure for
    all-pairs P2P traffic on a switchless dual-socket host (p2pmark dense interconnect, 173.1 GB/s over 8 GPUs),
    not to NCCL's ring efficiency, which is twice the PCIe-IPC kernel's measured share."""
    name, path, _, prior = next(f for f in cc.FITTED if f[0] == "ipc_eff")
    assert isinstance(prior, str) and prior != "PCIE_COLLECTIVE_EFFICIENCY"
    assert cc.read_constant(prior) == pytest.approx(173.1 / 8 / 63.0)
    assert cc.read_constant(prior) == pytest.approx(cc.read_constant(path), rel=0.1)
