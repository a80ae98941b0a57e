"""`mi-tune measure RUN_DIR --top K` (and `search --measure K`): launch the top-K plans of a search one after
another with `serve`'s launch, bench each with the search's workload, fit per-op-class corrections to the model
from what was measured, re-rank, and write best-measured.yaml from the measurements.

Per plan: RUN_DIR/measure/<n>/best.yaml (the plan as `serve` takes it) and engine.log; a row of RUN_DIR/measured.csv
appended as soon as the plan is done (ok, or failed with the engine's last lines), and the same row as a study
user attribute "measured:<plan label>" when the storage is reachable (Optuna refuses to change a finished trial's
attributes, optuna/storages/_rdb/storage.py check_trial_is_updatable, so the study's attributes hold them). A rerun
skips plans measured ok.

Modules, by job: study (the profile and study the search used, the candidates), run (launch, health, bench of
one candidate), rows (measured.csv and the run directory's measure files), fit (the corrections,
leave-one-plan-out), rerank (re-predict the study's plans, best-measured.yaml / --apply), format (the text),
loop (`measure`).
"""

from autotune.measure.fit import LAMBDA, _helps_held_back, fit_corrections, log_error, used_classes
from autotune.measure.format import format_outcome
from autotune.measure.loop import measure
from autotune.measure.records import Candidate, Fit, MeasureOptions, MeasureOutcome
from autotune.measure.rows import (
    COLUMNS,
    append_row,
    latest_rows,
    read_rows,
)
from autotune.measure.run import bench_workload, measure_plan
from autotune.measure.study import _open_study, candidates

__all__ = [
    "COLUMNS",
    "LAMBDA",
    "Candidate",
    "Fit",
    "MeasureOptions",
    "MeasureOutcome",
    "_helps_held_back",
    "_open_study",
    "append_row",
    "bench_workload",
    "candidates",
    "fit_corrections",
    "format_outcome",
    "latest_rows",
    "log_error",
    "measure",
    "measure_plan",
    "read_rows",
    "used_classes",
]
