"""What a report is built from: files in the run directory only, so a moved or copied run directory reports the
same, and a report never predicts stored trials again.

    best.yaml          the best plan, its prediction, the engine default and its prediction (search time)
    trials.csv         one row per trial with the prediction it had when it ran (tables.trials_frame)
    pareto.csv         the front (written here, or by the search when --objective pareto)
    alternatives.csv   the best plan with one setting changed (tables.alternatives_frame)
    summary.json       headline figures, the search's elapsed time, the values searched and the top plans' specs
    model.json         the model as searched (used when the model can no longer be resolved by name or path)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from autotune.specs import (
    BestConfig,
    HardwareProfile,
    MiTuneError,
    ModelSpec,
    Plan,
    from_dict,
    load_best,
    load_hardware,
    read_document,
    rundir,
    save,
    to_dict,
)

TEXT_COLUMNS = ("plan", "engine", "mode", "reason")
ALTERNATIVE_TEXT = ("phase", "dimension", "value", "chosen", "vs chosen", "scale", "comm per step")


@dataclass(frozen=True)
class RunData:
    out: Path
    best: BestConfig
    trials: pd.DataFrame
    front: pd.DataFrame
    alternatives: pd.DataFrame | None  # None: not recorded by the search that wrote the run directory
    choices: dict[str, list]
    elapsed_s: float
    strategy: str  # the samplers the search ran (search/runner.py), as the search said
    top_specs: dict[str, Plan]  # plan label -> plan, for the top plans (re-prediction)
    hardware: HardwareProfile  # embedded in best.yaml, or (older runs) hardware.yaml
    model: ModelSpec | None  # None: the model cannot be resolved, and the run has no model.json
    interactive: dict | None = None  # summary.json: the best plan meeting an interactive SLO (search/interactive.py)


def write_summary(path: Path, summary: dict) -> Path:
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def save_model(model: ModelSpec, out: Path) -> Path:
    return save(model, out / rundir.MODEL)


TRIAL_COLUMNS = ("trial", "feasible", "objective", "plan", "total_tok_s_per_gpu", "ttft_ms", "tpot_ms", "reason")


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise MiTuneError(f"{path}: not a table written by `mi-tune search` ({exc})") from None
    return frame.fillna({c: "" for c in TEXT_COLUMNS if c in frame})


def read_trials(path: Path) -> pd.DataFrame:
    frame = _read_csv(path)
    missing = [c for c in TRIAL_COLUMNS if c not in frame]
    if missing:
        raise MiTuneError(f"{path}: expected columns {', '.join(missing)} (a trials table of `mi-tune search`)")
    return frame


def read_alternatives(path: Path) -> pd.DataFrame | None:
    """None when the run directory has no alternatives.csv (written by an older mi-tune)."""
    if not path.is_file():
        return None
    if not path.read_text().strip():
        return pd.DataFrame()
    frame = pd.read_csv(path, dtype={c: str for c in ALTERNATIVE_TEXT}, keep_default_na=False)
    for column in frame.columns:
        if column not in ALTERNATIVE_TEXT:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def _model(best: BestConfig, out: Path) -> ModelSpec | None:
    """The model as the current catalog (or its config.json) defines it; the run's snapshot when that is gone."""
    from autotune.catalog.models import load_model

    try:
        return load_model(best.model.path or best.model.name)
    except MiTuneError:
        snapshot = out / rundir.MODEL
        return from_dict(ModelSpec, read_document(snapshot), str(snapshot)) if snapshot.is_file() else None


def _summary(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise MiTuneError(f"{path}: malformed JSON") from None
    if not isinstance(data, dict):
        raise MiTuneError(f"{path}: expected a JSON object")
    return data


def _need(out: Path, name: str) -> Path:
    path = out / name
    if not path.is_file():
        raise MiTuneError(f"{out}: not a run directory of `mi-tune search` ({name} is missing)")
    return path


def load_run(run_dir: str | Path, model: ModelSpec | None = None) -> RunData:
    """Read a run directory's own files (relative to it; nothing outside it but the model catalog)."""
    out = Path(run_dir)
    if not out.is_dir():
        raise MiTuneError(f"{out}: expected a run directory written by `mi-tune search`")
    from autotune.report.tables import latency_column, pareto_frame

    best = load_best(_need(out, rundir.BEST))
    trials = read_trials(_need(out, rundir.TRIALS))
    summary = _summary(_need(out, rundir.SUMMARY))
    pareto = out / rundir.PARETO
    front = _read_csv(pareto) if pareto.is_file() and pareto.read_text().strip() else pd.DataFrame()
    if "plan" not in front:  # no front stored, or one in another shape: the front over the trials
        front = pareto_frame(trials, latency_column(trials, "tpot"))
    specs = {t["plan"]: from_dict(Plan, t["spec"], rundir.SUMMARY) for t in summary.get("top_plans", [])}
    return RunData(
        out=out,
        best=best,
        trials=trials,
        front=front,
        alternatives=read_alternatives(out / rundir.ALTERNATIVES),
        choices=summary.get("choices", {}),
        elapsed_s=float(summary.get("elapsed_s", float("nan"))),
        strategy=str(summary.get("strategy", "")),
        top_specs=specs,
        hardware=best.hardware.profile or load_hardware(_need(out, rundir.HARDWARE)),
        model=model or _model(best, out),
        interactive=summary.get("interactive") if isinstance(summary.get("interactive"), dict) else None,
    )


def top_plan_specs(records, plans: list[str]) -> list[dict]:
    """The full plan of each top plan label (the first trial that ran it), for summary.json: re-prediction."""
    first: dict[str, object] = {}
    for r in sorted(records, key=lambda r: r.number):
        if r.plan is not None:
            first.setdefault(r.plan.describe(), r)
    return [{"trial": first[p].number, "plan": p, "spec": to_dict(first[p].plan)} for p in plans if p in first]
