"""A report is built from the run directory's own files: six figures, stored predictions, relocatable."""

import base64
import json
import re
import shutil
import struct

import pandas as pd
import pytest
import yaml

from autotune.cli import run
from autotune.specs import load_best

FIGURES = ("pareto", "breakdown", "topology", "memory", "concurrency", "history")


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_report_has_six_figures_as_files_and_inline(searched):
    report = (searched / "report.md").read_text()
    for name in FIGURES:
        width, height = _png_size((searched / "plots" / f"{name}.png").read_bytes())
        assert width >= 400 and height >= 200, name
        assert f"](plots/{name}.png)" in report, name
    html = (searched / "report.html").read_text()
    inline = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([^"]+)">', html)
    assert len(inline) == len(FIGURES)
    assert all(_png_size(base64.b64decode(data))[0] >= 400 for data in inline)


def _copy(searched, tmp_path, name="copy"):
    dest = tmp_path / name
    shutil.copytree(searched, dest)
    return dest


def test_a_moved_run_directory_reports_the_same_without_its_study(searched, tmp_path):
    original = (searched / "report.md").read_text()
    moved = tmp_path / "elsewhere" / "run"
    shutil.move(str(_copy(searched, tmp_path)), moved)
    for storage in moved.glob("study.*"):  # the report must not need the study storage
        storage.unlink()
    (moved / "report.md").unlink()
    assert run(["report", str(moved)]) == 0
    assert (moved / "report.md").read_text() == original
    elapsed = json.loads((moved / "summary.json").read_text())["elapsed_s"]
    assert elapsed > 0 and f"trials in {elapsed:.1f} s" in original


def _edit_yaml(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_report_shows_stored_predictions_and_repredicts_only_when_asked(searched, tmp_path):
    copy = _copy(searched, tmp_path)
    true_tok_s = load_best(copy / "best.yaml").prediction.total_tok_s

    def stored(data):
        data["prediction"]["total_tok_s"] = 1234567.0

    _edit_yaml(copy / "best.yaml", stored)
    assert run(["report", str(copy)]) == 0
    report = (copy / "report.md").read_text()
    assert "Predicted **1,234,567 tokens/s**" in report
    assert "Stored and re-predicted" not in report

    assert run(["report", str(copy), "--repredict"]) == 0
    report = (copy / "report.md").read_text()
    section = report.split("## Stored and re-predicted")[1].split("###")[0]
    best_row = next(line for line in section.splitlines() if line.startswith("| vllm") or line.startswith("| sglang"))
    cells = [c.strip() for c in best_row.strip("|").split("|")]
    assert cells[1] == "1,234,567" and cells[2] == f"{true_tok_s:,.0f}"
    assert "objective re-predicted (tok/s)" in report.split("## Top plans")[1]


def test_top_plans_come_from_trials_csv(searched, tmp_path):
    copy = _copy(searched, tmp_path)
    trials = pd.read_csv(copy / "trials.csv")
    trials.loc[trials["rank"] == 1, "objective"] = 9999999.0  # the search's ranking (1 = the best) orders the table
    trials.to_csv(copy / "trials.csv", index=False)
    assert run(["report", str(copy)]) == 0
    top_table = (copy / "report.md").read_text().split("## Top plans")[1].splitlines()
    first_row = top_table[next(i for i, line in enumerate(top_table) if line.startswith("| plan |")) + 2]
    assert "| 9,999,999 |" in first_row


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda d: (d / "best.yaml").unlink(), "best.yaml is missing"),
        (lambda d: (d / "trials.csv").write_text("x,y\n1,2\n"), "trials.csv: expected columns"),
        (lambda d: (d / "summary.json").write_text("{"), "summary.json: malformed JSON"),
    ],
)
def test_a_damaged_run_directory_is_one_line_exit_2(searched, tmp_path, capsys, damage, words):
    copy = _copy(searched, tmp_path)
    damage(copy)
    assert run(["report", str(copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


def test_report_of_a_missing_directory_is_exit_2(tmp_path, capsys):
    assert run(["report", str(tmp_path / "nowhere")]) == 2
    assert "expected a run directory" in capsys.readouterr().err


def test_model_snapshot_draws_the_curve_when_the_model_is_gone(searched, tmp_path):
    copy = _copy(searched, tmp_path)

    def gone(data):
        data["model"]["name"] = "no-such-model"
        data["model"]["path"] = str(tmp_path / "deleted" / "config.json")

    _edit_yaml(copy / "best.yaml", gone)
    (copy / "plots" / "concurrency.png").unlink()
    assert run(["report", str(copy)]) == 0
    assert (copy / "plots" / "concurrency.png").is_file()
    (copy / "model.json").unlink()
    assert run(["report", str(copy)]) == 0
    assert "Not drawn: model" in (copy / "report.md").read_text()
    assert run(["report", str(copy), "--repredict"]) == 2


def test_a_run_directory_from_before_the_report_files_still_reports(searched, tmp_path):
    """No alternatives.csv, model.json or pareto.csv, and a summary.json without choices/top plans/strategy."""
    copy = _copy(searched, tmp_path)
    for name in ("alternatives.csv", "model.json", "pareto.csv"):
        (copy / name).unlink()
    summary = json.loads((copy / "summary.json").read_text())
    for key in ("choices", "top_plans", "strategy"):
        del summary[key]
    (copy / "summary.json").write_text(json.dumps(summary))
    assert run(["report", str(copy), "--repredict"]) == 0
    report = (copy / "report.md").read_text()
    assert "alternatives.csv is missing" in report
    assert all(f"](plots/{name}.png)" in report for name in FIGURES)  # catalog model: the curve is drawn
    front = report.split("## Pareto front")[1].split("## Rejected")[0]
    assert front.count("\n| ") >= 2  # the front computed from trials.csv


def test_an_engine_default_that_cannot_run_still_gives_every_figure(searched, tmp_path):
    copy = _copy(searched, tmp_path)

    def infeasible(data):
        data["baseline"]["prediction"] = {"feasible": False, "reason": "out of memory (edited)"}

    _edit_yaml(copy / "best.yaml", infeasible)
    for png in (copy / "plots").glob("*.png"):
        png.unlink()
    assert run(["report", str(copy)]) == 0
    assert sorted(p.stem for p in (copy / "plots").glob("*.png")) == sorted(FIGURES)
    assert "The engine default cannot run here (out of memory (edited))." in (copy / "report.md").read_text()
