"""The measure loop: the top plans of a run directory measured one after another, then concluded (rerank.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from autotune.measure.records import MeasureOptions, MeasureOutcome
from autotune.measure.rerank import _conclude
from autotune.measure.rows import COLUMNS, append_row, latest_rows, read_rows
from autotune.measure.run import measure_plan
from autotune.measure.study import _open_study, _prior_hardware, candidates, ranked_plans
from autotune.specs import MiTuneError, load_best, rundir


def measure(run_dir: str | Path, opts: MeasureOptions, log: Callable[[str], None] | None = None) -> MeasureOutcome:
    from autotune.engines.supervisor import _sigterm_as_interrupt
    from autotune.inputs import resolve_model

    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    out = Path(run_dir)
    if opts.top < 1:
        raise MiTuneError(f"--top: expected a positive number of plans, got {opts.top}")
    if opts.num_requests < 0:
        raise MiTuneError(f"--num-requests: expected a count >= 0 (0 = 4 rounds), got {opts.num_requests}")
    if not opts.ready_timeout_s > 0:
        raise MiTuneError(f"--ready-timeout: expected seconds > 0, got {opts.ready_timeout_s:g}")
    if not (out / rundir.BEST).is_file():
        raise MiTuneError(f"{out}: no best.yaml (expected a run directory written by `mi-tune search`)")
    source = out / rundir.BEST_PREDICTED if (out / rundir.BEST_PREDICTED).is_file() else out / rundir.BEST
    best = load_best(source)
    model, _ = resolve_model(best.model.path or best.model.name)
    hw = _prior_hardware(out, best)
    study, note = _open_study(out, best)
    notes = [note] if note else []
    csv_path = out / rundir.MEASURED_CSV
    done = latest_rows(read_rows(csv_path))
    ranked, why = ranked_plans(out)
    notes += [why] if why else []
    cands = candidates(best, study, opts.top, ranked)
    restore = _sigterm_as_interrupt()  # a SIGTERM stops the running engine too (measure_plan's finally)
    try:
        for n, cand in enumerate(cands):
            if done.get(cand.label, {}).get("status") == "ok":
                log(f"[{n}] {cand.label}: measured before, kept")
                continue
            row = measure_plan(cand, n, best, model, hw, out, opts, log)
            append_row(csv_path, row)  # at once: an interrupted run keeps every finished plan
            done[cand.label] = row
            if row["status"] != "ok":
                log(f"[{n}] {cand.label}: {row['error'].splitlines()[0] if row['error'] else 'failed'}")
            if study is not None:
                try:
                    study.set_user_attr(f"measured:{cand.label}", {k: row.get(k, "") for k in COLUMNS})
                except Exception as exc:  # a read-only or vanished storage: measured.csv still has it
                    notes.append(f"study attribute not written: {type(exc).__name__}: {exc}")
    finally:
        restore()
    rows = [done[c.label] for c in cands if c.label in done]
    return _conclude(out, best, source, model, hw, study, cands, rows, notes, opts.apply)
