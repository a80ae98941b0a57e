"""The measure files of a run directory and measured.csv's rows: one row per plan measured, appended as soon as
the plan is done (ok, or failed with the engine's last lines)."""

from __future__ import annotations

import csv
from datetime import datetime, timezone
from pathlib import Path

from autotune.measure.records import Candidate
from autotune.specs import Prediction

COLUMNS = (
    "plan",
    "trial",
    "status",
    "concurrency",
    "requests",
    "prediction_source",  # stored (the search's own figure) / re-simulated / steady: judge.py
    "predicted_total_tok_s",
    "measured_total_tok_s",
    "predicted_output_tok_s",
    "measured_output_tok_s",
    "predicted_ttft_ms",
    "measured_ttft_ms",
    "predicted_tpot_ms",
    "measured_tpot_ms",
    "measured_ttft_p99_ms",
    "measured_tpot_p99_ms",
    "measured_goodput_tok_s",
    "failed_requests",
    "measured_tokens_per_step",  # speculative decoding: tokens advanced per verify step, the engine's counters
    "measured_draft_acceptance",  # the per-draft-token acceptance they imply (measure/acceptance.py)
    "measured_expert_load_cv",  # the experts' popularity CV the engine's expert-load report implies (expert_load.py)
    "plan_file",
    "error",
    "measured_at",
)


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def append_row(path: Path, row: dict) -> None:
    """Append `row`; a measured.csv written with other columns (an older mi-tune) is first rewritten with these,
    its rows kept (columns it lacked left empty)."""
    new = not path.is_file()
    if not new and _header(path) != list(COLUMNS):
        old = read_rows(path)
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({c: r.get(c) or "" for c in COLUMNS} for r in old)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({c: row.get(c, "") for c in COLUMNS})


def _header(path: Path) -> list[str]:
    with path.open(newline="") as f:
        return next(csv.reader(f), [])


def latest_rows(rows: list[dict]) -> dict[str, dict]:
    """plan label -> its last row (a plan retried after a failure keeps the retry)."""
    return {r["plan"]: r for r in rows}


def plan_row(cand: Candidate, prediction: Prediction, concurrency: int, plan_file: Path, run_dir: Path) -> dict:
    """The row's predicted half (the measured half is added once the bench ran)."""
    return {
        "plan": cand.label,
        "trial": cand.trial,
        "concurrency": concurrency,
        "predicted_total_tok_s": round(prediction.total_tok_s, 3),
        "predicted_output_tok_s": round(prediction.output_tok_s, 3),
        "predicted_ttft_ms": round(prediction.ttft_ms.get("mean", 0.0), 4),
        "predicted_tpot_ms": round(prediction.tpot_ms.get("mean", 0.0), 4),
        "plan_file": str(plan_file.relative_to(run_dir)),
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def write_reranked(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
