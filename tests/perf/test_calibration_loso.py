"""tests/bench/calibration_check.py's leave-one-source-out: a row's constants are fitted without any row of its
own source, and a constant only its own source moves falls back to the prior."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autotune.perf import comm_rates
from tests.perf.calibration_check_module import cc


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


def test_sglang2904_sizes_are_float32_element_counts():
    """sglang#2904's test sizes are element counts of a float32 tensor (test_trt_reduce.py builds torch.randint(...,
    (sz,), dtype=torch.float32)): read so, the PR's vLLM-kernel column at 4 GPUs (20.6 / 26.9 / 40.2 us at 262144 /
    524288 / 1048576) agrees with vLLM's own CUDA-graph ca_2stage timing at 1 / 2 / 4 MiB (vllm#24111 / #24532, the
    path vLLM takes there); read as bytes (0.5 / 1 MiB for the last two) it is far above even the one-stage kernel."""
    vllm_column_4gpu_us = {262144: 20.6, 524288: 26.9, 1048576: 40.2}
    sizes = dict(cc.VLLM_AR_SIZES)
    assert set(vllm_column_4gpu_us) <= set(cc.SGLANG2904_NUMEL)
    for entry, ranks, one_stage, two_stage, _ in cc.VLLM_AR_TABLES:
        if ranks != 4:
            continue
        by_bytes_1 = dict(zip(sizes, one_stage, strict=True))
        by_bytes_2 = dict(zip(sizes, two_stage, strict=True))
        for numel, t in vllm_column_4gpu_us.items():
            assert 0.8 <= t / by_bytes_2[4 * numel] <= 1.25, (entry, numel)
        for numel in (524288, 1048576):
            assert vllm_column_4gpu_us[numel] / by_bytes_1[numel] > 1.5, (entry, numel)


def test_sglang2904_rows_price_the_timed_kernels_two_barrier_two_shot():
    """The rows price sgl-kernel's TensorRT-LLM-derived kernel the PR timed at 4 bytes an element: one-shot below
    1,000,000 bytes at 4 ranks, two-shot above with two block_barrier rounds (one more fixed time than the one-round
    two-shot of SGLang 0.5.23's v2 kernel), each copying its input into the shared buffer first (COPY_INPUT outside
    CUDA graphs: one in-kernel copy)."""
    h200 = cc.box("h200-x8")
    group = (0, 1, 2, 3)
    v2 = cc.AllReducePath("custom", float("inf"), 0.0, in_kernel_copies=1)
    latency_us = comm_rates.engine_ar_latency_us(4)
    two_shot_us = cc.sglang2904_us(lambda: h200, group, 4 * 262144)()
    assert two_shot_us == pytest.approx(cc.comm.path_s(h200, group, v2, 4 * 262144) * 1e6 + latency_us)
    one_shot = cc.AllReducePath("custom", float("inf"), float("inf"), in_kernel_copies=1)
    below_us = cc.sglang2904_us(lambda: h200, group, 999_000)()
    assert below_us == pytest.approx(cc.comm.path_s(h200, group, one_shot, 999_000) * 1e6)


def test_a_constant_follows_the_rows_it_moves_not_the_middle_rows_error(monkeypatch):
    """The fit minimises the mean |log error| of the rows a constant sets, not their median. One row the acceptance
    rate sets ~1:1 wants 0.8; two rows it moves by ~5% are over-predicted by ~20% at every value (another term's
    misfit) and lean towards the grid's bottom. The median error is one of those two rows' own, so its argmin (0.5)
    follows their small slope; under the mean the row the constant really moves decides (0.8)."""
    path = "DRAFT_ACCEPTANCE[dspark]"
    grid = (0.5, 0.6, 0.68, 0.75, 0.8)
    monkeypatch.setattr(cc, "FITTED", [("dspark", path, grid, 0.0)])

    def weak() -> float:  # another term sets this row: the constant moves it by 10% of its own change
        return 10.0 * (1 + 0.1 * cc.read_constant(path))

    over = 1.2 / (1 + 0.1 * 0.8)  # over-predicted 1.2x at 0.8, 1.17x at 0.5
    rows = [
        cc.Row("a", "dspark k=5", "tok", expected_length(0.8), cc.accepted_tokens("dspark", 5)),
        cc.Row("b", "weak 1", "tok", 10.0 / over, weak),
        cc.Row("c", "weak 2", "tok", 10.0 / over, weak),
    ]
    _, in_sample = cc.leave_one_out(rows, cc.evaluate(rows))
    assert in_sample[path] == 0.8
