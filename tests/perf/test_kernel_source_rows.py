"""tests/bench/calibration_check.py kernel_source_rows (src22b): each second-source row is set by the constant it was
added for (moving the constant moves the row), and the B200 rate row prices the B200's own datasheet peak."""

from __future__ import annotations

import pytest

from tests.perf.calibration_check_module import cc


def _rows() -> dict[str, cc.Row]:
    return {f"{row.entry} | {row.label}": row for row in cc.kernel_source_rows()}


def test_the_h100_flashmla_row_is_the_decode_attention_fraction_of_the_sxm_bandwidth():
    row = next(r for key, r in _rows().items() if "flashmla-h100" in key)
    assert row.predict() == pytest.approx(3350.0 * cc.read_constant("ATTENTION_DECODE_FRACTION"))
    with cc.overrides({"ATTENTION_DECODE_FRACTION": 0.5}):
        assert row.predict() == pytest.approx(3350.0 * 0.5)


@pytest.mark.parametrize("preset", ["l40s", "rtx-4090"])
def test_the_sm89_torch_mm_rows_move_with_the_sm89_large_gemm_fraction(preset):
    row = next(r for key, r in _rows().items() if key.startswith(f"kernel-torch-mm-bf16-crowd | {preset} "))
    shipped = row.predict()
    with cc.overrides({"LARGE_GEMM_FRACTION[sm_89]": 0.5}):
        lowered = row.predict()
    assert lowered < 0.8 * shipped


def test_the_b200_torch_mm_row_prices_the_b200_peak_not_the_h200_one():
    row = next(r for key, r in _rows().items() if key.startswith("kernel-torch-mm-bf16-crowd | b200 "))
    peak = cc.DEVICES_BY_KEY["b200"].peak_tflops["bf16"]
    assert 0.5 * peak < row.predict() <= peak  # the comm rows' b200_box keeps the H200's 989 TFLOPS


def test_the_rtx5090_one_token_norm_rows_are_the_minimum_kernel_times():
    rows = [r for key, r in _rows().items() if "rtx5090" in key]
    assert [r.predict() for r in rows] == [cc.read_constant("MIN_US[norm]"), cc.read_constant("FUSED_ADD_NORM_MIN_US")]
