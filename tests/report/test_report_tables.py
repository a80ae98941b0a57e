"""Tables and figure data of a report: alignment, precision, fronts, best-so-far, the concurrency curve."""

import math

import pandas as pd
import pytest

from autotune.report.curves import concurrency_curve, concurrency_levels
from autotune.report.html import markdown_to_html
from autotune.report.rundata import load_run
from autotune.report.tables import best_so_far, latency_column, markdown_table, pareto_frame, trials_frame
from autotune.search import SearchResult, TrialRecord
from autotune.search.evaluate import evaluate
from autotune.specs import Prediction


def test_markdown_table_aligns_numbers_right_at_one_precision_per_column(tmp_path):
    frame = pd.DataFrame(
        {
            "plan": ["a", "b"],
            "tok/s": [75318.4, 13644.0],
            "TPOT (ms)": [8.123, float("nan")],
            "requests": [2048, 512],
            "change": ["+1.5%", "-"],
            "fp8": [True, False],
        }
    )
    lines = markdown_table(frame).splitlines()
    assert lines[1] == "|---|---:|---:|---:|---:|---|"
    assert lines[2] == "| a | 75,318 | 8.12 | 2,048 | +1.5% | yes |"
    assert lines[3] == "| b | 13,644 | - | 512 | - | no |"
    page = markdown_to_html("\n".join(lines), tmp_path, "t")
    assert "<td>a</td><td class='num'>75,318</td>" in page and "<th class='num'>tok/s</th>" in page
    assert "---" not in page  # the alignment row is not a table row


def test_markdown_table_renames_columns_and_says_none_when_empty():
    assert markdown_table(pd.DataFrame()) == "_none_\n"
    text = markdown_table(pd.DataFrame({"ttft_ms": [1.0]}), {"ttft_ms": "TTFT (ms)"})
    assert text.startswith("| TTFT (ms) |")


def _record(n, tok_s, ttft, tpot, p95=None):
    ttft_ms, tpot_ms = {"mean": ttft}, {"mean": tpot}
    if p95:
        ttft_ms["p95"], tpot_ms["p95"] = p95
    p = Prediction(feasible=True, total_tok_s=tok_s, total_tok_s_per_gpu=tok_s / 8, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
    return TrialRecord(n, None, p, tok_s, {"engine": "vllm", "mode": "aggregated"})


def test_trials_frame_carries_percentiles_and_the_latency_axis_uses_p95_when_present():
    base = Prediction(feasible=False)
    plain = SearchResult(None, (_record(0, 100.0, 5.0, 2.0),), None, None, base, {})
    assert latency_column(trials_frame(plain), "ttft") == "ttft_ms"
    records = (_record(0, 100.0, 5.0, 2.0, (9.0, 3.0)), _record(1, 50.0, 4.0, 1.0, (7.0, 1.5)))
    frame = trials_frame(SearchResult(None, records, None, None, base, {}))
    assert list(frame["ttft_p95_ms"]) == [9.0, 7.0] and list(frame["tpot_p95_ms"]) == [3.0, 1.5]
    assert latency_column(frame, "ttft") == "ttft_p95_ms" and latency_column(frame, "tpot") == "tpot_p95_ms"
    mixed = trials_frame(SearchResult(None, (*records, _record(2, 70.0, 3.0, 1.0)), None, None, base, {}))
    assert latency_column(mixed, "tpot") == "tpot_ms"  # P95 for some trials only: the means, for all


def _dominated(ok: pd.DataFrame, latency: str, row) -> bool:
    tok_s = "total_tok_s_per_gpu"
    better = ok[(ok[latency] <= row[latency]) & (ok[tok_s] >= row[tok_s])]
    return bool(((better[latency] < row[latency]) | (better[tok_s] > row[tok_s])).any())


def test_pareto_front_is_exactly_the_non_dominated_plans(searched):
    """On the front: dominated by no plan. Off it: dominated, or tied on both axes with a plan on it."""
    trials = load_run(searched).trials
    ok = trials[trials["feasible"]].drop_duplicates("plan")
    for latency in ("ttft_ms", "tpot_ms"):
        front = pareto_frame(trials, latency)
        assert len(front) >= 2
        points = set(zip(front[latency], front["total_tok_s_per_gpu"], strict=True))
        for _, row in ok.iterrows():
            if row["plan"] in set(front["plan"]):
                assert not _dominated(ok, latency, row), (latency, row["plan"])
            else:
                tied = (row[latency], row["total_tok_s_per_gpu"]) in points
                assert _dominated(ok, latency, row) or tied, (latency, row["plan"])


def test_best_so_far_is_the_running_maximum(searched):
    trials = load_run(searched).trials
    curve = best_so_far(trials)
    assert list(curve.index) == sorted(trials["trial"])
    assert (curve.diff().dropna() >= 0).all()
    assert curve.iloc[-1] == pytest.approx(trials["objective"].max())


def test_concurrency_curve_meets_the_steady_state_operating_point(searched):
    """At the concurrency the steady-state model picks for the workload, the curve gives its throughput."""
    run = load_run(searched)
    best = run.best
    steady = evaluate(best.plan, run.model, run.hardware, best.workload)
    point = concurrency_curve(best.plan, run.model, run.hardware, best.workload, [steady.concurrency])
    assert list(point["in_flight"]) == [steady.concurrency]
    assert point["total_tok_s"][0] == pytest.approx(steady.total_tok_s, rel=1e-9)

    levels = concurrency_levels(steady.concurrency)
    assert levels[0] == 1 and levels[-1] <= 2 * steady.concurrency < 2 * levels[-1]
    curve = concurrency_curve(best.plan, run.model, run.hardware, best.workload, levels)
    assert curve["in_flight"].is_monotonic_increasing and curve["in_flight"].iloc[-1] <= levels[-1]
    assert all(math.isfinite(v) and v > 0 for v in curve["total_tok_s"])


def test_html_joins_a_paragraph_s_lines_and_keeps_blocks_apart(tmp_path):
    page = markdown_to_html("first line\nsecond line\n\nnext\n## Head\n| a |\n|---|\n| 1 |\n", tmp_path, "t")
    assert "<p>first line second line</p>" in page and "<p>next</p>" in page
    assert "<h2>Head</h2>" in page and "<td>1</td>" in page
