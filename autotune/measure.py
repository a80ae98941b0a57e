"""`mi-tune measure RUN_DIR --top K` (and `search --measure K`): launch the top-K plans of a search one after
another with `serve`'s launch, bench each with the search's workload, fit per-op-class corrections to the model
from what was measured, re-rank, and write best.yaml from the measurements.

Per plan: RUN_DIR/measure/<n>/best.yaml (the plan as `serve` takes it) and engine.log; a row of RUN_DIR/measured.csv
appended as soon as the plan is done (ok, or failed with the engine's last lines), and the same row as a study
user attribute "measured:<plan label>" when the storage is reachable (Optuna refuses to change a finished trial's
attributes, optuna/storages/_rdb/storage.py check_trial_is_updatable, so the study's attributes hold them). A rerun
skips plans measured ok.

Fit (`fit_corrections`): every measured mean TTFT and TPOT is a row; the unknowns are one time multiplier per op
class the measured plans use (Prediction.steps[*].rates_ms: gemm, grouped_moe, attention, norm, elementwise,
quant, sampling, collective; perf/rates.py applies them). The fit is the MAP estimate under a log-normal prior
centred on 1.0: minimise sum_rows (ln measured - ln predicted(m))^2 + LAMBDA * sum_classes (ln m)^2, by
Gauss-Newton, with each row's sensitivity to each class taken from the model itself (re-predicting with the class
5% slower). K plans give 2K rows for up to 8 multipliers: with K=2 the problem is underdetermined and the prior
decides how the error is shared, in proportion to how much each class moves each figure; classes the measured
plans barely use stay near 1. The error reported after the fit is in-sample (the plans it saw).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from autotune.specs import (
    BestConfig,
    HardwareProfile,
    HardwareRef,
    MiTuneError,
    ModelSpec,
    Plan,
    Prediction,
    Workload,
    from_dict,
    load_best,
    load_hardware,
    save,
)

MEASURED_CSV = "measured.csv"
MEASURE_DIR = "measure"
BEST_PREDICTED = "best-predicted.yaml"  # the search's own best.yaml, kept when `--apply` replaces best.yaml
BEST_MEASURED = "best-measured.yaml"  # the best measured plan; best.yaml becomes it only with `--apply`
HARDWARE_MEASURED = "hardware-measured.yaml"  # the run's hardware profile with the fitted corrections
RERANKED_CSV = "reranked.csv"
COLUMNS = (
    "plan",
    "trial",
    "status",
    "concurrency",
    "requests",
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
    "plan_file",
    "error",
    "measured_at",
)
# Prior on the log multipliers: N(0, SIGMA_PRIOR^2), i.e. the rates table is trusted to within about x/÷1.65 per op
# class before any run; a measured mean TTFT or TPOT is trusted to SIGMA_ROW in log terms (bench noise and what
# the serving model leaves out). LAMBDA = (SIGMA_ROW / SIGMA_PRIOR)^2.
SIGMA_PRIOR = 0.5
SIGMA_ROW = 0.1
LAMBDA = (SIGMA_ROW / SIGMA_PRIOR) ** 2
MULTIPLIER_RANGE = (0.2, 5.0)
FIT_ITERATIONS = 4  # Gauss-Newton steps (the model is close to linear in the log multipliers)
FD_STEP = math.log(1.05)  # finite-difference step of a log multiplier
OP_CLASSES = ("gemm", "grouped_moe", "attention", "norm", "elementwise", "quant", "sampling", "collective")
RERANK_PLANS = 20  # distinct plans of the study re-predicted with the corrections
# Before the timed bench, one untimed round of short requests (WARMUP_OSL output tokens) at the benched concurrency
# (WARMUP_REQUESTS for open-loop workloads): kernels JIT-compiled on first use, allocator growth and the like are
# paid before the clock starts, as the engines' own bench clients do with their warm-up requests.
WARMUP_OSL = 16
WARMUP_REQUESTS = 8
READY_TIMEOUT_S = 1800.0  # engines load large checkpoints for many minutes
HEALTH_POLL_S = 0.2


@dataclass(frozen=True)
class MeasureOptions:
    top: int = 2
    host: str = "127.0.0.1"
    port: int = 8000
    stand_in: str | None = None  # timing JSON: launch the stand-in engine instead of vLLM/SGLang (tests, CI)
    ready_timeout_s: float = READY_TIMEOUT_S
    num_requests: int = 0  # 0 = 4 rounds of the concurrency (at least 16) / the workload's burst
    grace_s: float = 15.0  # SIGTERM -> SIGKILL
    apply: bool = False  # replace best.yaml with the best measured plan (the search's kept as best-predicted.yaml)


@dataclass(frozen=True)
class Candidate:
    label: str
    plan: Plan
    trial: int


@dataclass(frozen=True)
class Fit:
    corrections: dict[str, float]  # op class -> multiplier on its time
    rows: int  # measured figures the fit used
    error_before: float  # mean |ln(predicted / measured)| over the measured plans' TTFT, TPOT and total tok/s
    error_after: float  # the same with the corrections (in-sample: the plans the fit saw)


@dataclass(frozen=True)
class MeasureOutcome:
    run_dir: Path
    rows: list[dict]  # the last row of every plan measured (this call or before)
    fit: Fit | None
    best_label: str  # the best measured plan ('' when none ran)
    reranked: list[dict]  # plan, predicted (prior) and corrected total tok/s, measured where there is one
    files: dict[str, Path]
    notes: tuple[str, ...]


# ------------------------------------------------------------------ inputs
def _prior_hardware(run_dir: Path, best: BestConfig) -> HardwareProfile:
    """The profile the search planned with, without any corrections (a rerun fits from the prior again)."""
    from autotune.inputs import recorded_hardware

    beside = run_dir / "hardware.yaml"
    hw = load_hardware(beside) if beside.is_file() else recorded_hardware(best, run_dir / "best.yaml")
    return dataclasses.replace(hw, corrections={}) if hw.corrections else hw


def _open_study(run_dir: Path, best: BestConfig):
    """The run's Optuna study, or (None, why) when its storage cannot be reached."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        try:
            from autotune.search.storage import open_storage, read_manifest
        except ImportError:
            open_storage, read_manifest = None, None
        manifest = read_manifest(run_dir) if read_manifest else None
        if manifest is not None:
            url, name = manifest.storage_url(run_dir), manifest.study
            storage = open_storage(url)
        else:
            url, name = best.provenance.storage, best.provenance.study
            storage = url
        return optuna.load_study(study_name=name, storage=storage), ""
    except Exception as exc:  # unreachable database, moved file: measure the best plan alone
        return None, f"study storage not reachable ({type(exc).__name__}: {exc}); measuring best.yaml's plan only"


def candidates(best: BestConfig, study, k: int) -> list[Candidate]:
    """best.yaml's plan, then the study's feasible trials by objective, one per distinct plan label and trial:
    best.yaml holds its trial's plan with moot settings dropped (another label), so that trial is not measured
    again under its stored label."""
    out = [Candidate(best.plan.describe(), best.plan, best.provenance.trial)]
    if study is not None:
        trials = [t for t in study.trials if t.state.is_finished() and t.value and t.user_attrs.get("plan")]
        for t in sorted(trials, key=lambda t: (-t.value, t.number)):
            if len(out) >= k:
                break
            plan = from_dict(Plan, t.user_attrs["plan"], f"trial {t.number}")
            label = plan.describe()
            if all(c.label != label and c.trial != t.number for c in out):
                out.append(Candidate(label, plan, t.number))
    return out[:k]


def bench_workload(workload: Workload, prediction: Prediction) -> tuple[Workload, int]:
    """The workload as benched, and its concurrency cap: a closed loop the search left open ('as many as fit')
    runs at the predicted operating point's concurrency, so measured and predicted describe the same point."""
    if workload.arrival != "closed":
        return workload, 0
    n = workload.concurrency or max(1, prediction.concurrency)
    return dataclasses.replace(workload, concurrency=n), n


def _num_requests(workload: Workload, concurrency: int, asked: int) -> int:
    if asked:
        return asked
    if workload.arrival == "burst":
        return workload.burst
    if workload.arrival == "poisson":  # about two minutes of arrivals, at least 16
        return max(16, min(workload.num_requests, int(workload.rate_rps * 120)))
    return max(16, 4 * concurrency)


# ------------------------------------------------------------------ measured.csv
def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def append_row(path: Path, row: dict) -> None:
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({c: row.get(c, "") for c in COLUMNS})


def latest_rows(rows: list[dict]) -> dict[str, dict]:
    """plan label -> its last row (a plan retried after a failure keeps the retry)."""
    return {r["plan"]: r for r in rows}


# ------------------------------------------------------------------ one plan
def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")[:60]


def _wait_healthy(url: str, started, timeout_s: float) -> str:
    """'' once GET url/health answers 200; else why not (an engine exited, or the timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        why = started.exited()
        if why:
            return why
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2.0) as resp:  # noqa: S310 (http to our engine)
                if resp.status == 200:
                    return ""
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(HEALTH_POLL_S)
    tail = started.last_lines()
    return f"not healthy after {timeout_s:.0f} s (GET {url}/health)" + (f"; last lines:\n{tail}" if tail else "")


def _row(cand: Candidate, prediction: Prediction, concurrency: int, plan_file: Path, run_dir: Path) -> dict:
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


def measure_plan(
    cand: Candidate,
    n: int,
    best: BestConfig,
    model: ModelSpec,
    hw: HardwareProfile,
    run_dir: Path,
    opts: MeasureOptions,
    log: Callable[[str], None],
) -> dict:
    """Launch, wait for health, bench, stop: the plan's measured.csv row (status ok or failed)."""
    from autotune import loadgen
    from autotune.engines import build_launch
    from autotune.engines.serve import serve_launch
    from autotune.engines.supervisor import Started
    from autotune.search import evaluate

    where = run_dir / MEASURE_DIR / f"{n:02d}-{_slug(cand.label)}"
    where.mkdir(parents=True, exist_ok=True)
    plan_file = where / "best.yaml"
    workload, concurrency = bench_workload(best.workload, evaluate(cand.plan, model, hw, best.workload))
    requests = _num_requests(workload, concurrency, opts.num_requests)
    if concurrency and requests < concurrency:  # the bench cannot hold the operating point's requests in flight
        log(f"[{n}] {cand.label}: {requests} requests cannot keep {concurrency} in flight: predicted again at "
            f"{requests} in flight, the point the bench measures")  # fmt: skip
        workload, concurrency = dataclasses.replace(workload, concurrency=requests), requests
    prediction = evaluate(cand.plan, model, hw, workload)  # at the workload the bench runs
    row = _row(cand, prediction, concurrency, plan_file, run_dir)
    if not prediction.feasible:
        return {**row, "status": "failed", "error": f"predicted infeasible: {prediction.reason}"}
    try:
        launch = build_launch(cand.plan, model, hw)
    except MiTuneError as exc:
        return {**row, "status": "failed", "error": f"cannot launch: {exc}"}
    save(dataclasses.replace(best, engine=cand.plan.engine, mode=cand.plan.mode, phases=cand.plan.phases,
                             prediction=prediction, launch=launch), plan_file)  # fmt: skip
    served = serve_launch(str(plan_file), opts.host, opts.port)
    launch = served.launch
    if opts.stand_in:
        from autotune.engines.standin import substitute

        launch = substitute(launch, opts.stand_in)
    log(f"[{n}] {cand.label}: starting ({launch.endpoint}, log {where / 'engine.log'})")
    with (where / "engine.log").open("w") as engine_log:
        try:
            started = Started(launch, engine_log, opts.ready_timeout_s)
        except MiTuneError as exc:
            return {**row, "status": "failed", "error": str(exc)}
        try:
            why = _wait_healthy(launch.endpoint, started, opts.ready_timeout_s)
            if why:
                log(f"[{n}] {cand.label}: failed to start")
                return {**row, "status": "failed", "error": why}
            warm_n = concurrency or WARMUP_REQUESTS  # one round at the benched batch size: JIT, graphs, caches
            warm = dataclasses.replace(workload, osl=min(workload.osl, WARMUP_OSL), concurrency=warm_n, rate_rps=0.0,
                                       burst=0)  # fmt: skip
            loadgen.bench(launch.endpoint, warm, num_requests=warm_n, concurrency=warm_n, seed=1)
            t0 = time.perf_counter()
            report = loadgen.bench(launch.endpoint, workload, num_requests=requests, concurrency=concurrency)
            bench_s = time.perf_counter() - t0
        finally:
            started.stop(opts.grace_s)
    log(f"[{n}] {cand.label}: {report.total_tok_s:,.0f} tok/s measured in {bench_s:.1f} s "
        f"(predicted {prediction.total_tok_s:,.0f})")  # fmt: skip
    ok = report.completed > 0 and not report.failed
    return {
        **row,
        "status": "ok" if ok else "failed",
        "requests": report.num_requests,
        "measured_total_tok_s": round(report.total_tok_s, 3),
        "measured_output_tok_s": round(report.output_tok_s, 3),
        "measured_ttft_ms": round(report.ttft_ms.get("mean", 0.0), 4),
        "measured_tpot_ms": round(report.tpot_ms.get("mean", 0.0), 4),
        "measured_ttft_p99_ms": round(report.ttft_ms.get("p99", 0.0), 4),
        "measured_tpot_p99_ms": round(report.tpot_ms.get("p99", 0.0), 4),
        "measured_goodput_tok_s": round(report.goodput_tok_s or 0.0, 3),
        "failed_requests": report.failed,
        "error": "" if ok else "; ".join(report.errors) or "no request completed",
    }


# ------------------------------------------------------------------ fit
def used_classes(predictions: list[Prediction], share: float = 0.01) -> tuple[str, ...]:
    """Op classes carrying more than `share` of some predicted step (StepBreakdown.rates_ms keys are
    'class/dtype/bucket'): the multipliers a fit may move."""
    found = set()
    for p in predictions:
        for step in p.steps:
            for key, ms in step.rates_ms.items():
                if step.step_ms > 0 and ms > share * step.step_ms:
                    found.add(key.split("/", 1)[0])
    return tuple(c for c in OP_CLASSES if c in found)


def fit_corrections(
    predict: Callable[[dict[str, float]], list[float]],
    measured: list[float],
    classes: tuple[str, ...],
    lam: float = LAMBDA,
    iterations: int = FIT_ITERATIONS,
) -> dict[str, float]:
    """MAP multipliers m = exp(x): minimise sum_r (ln measured_r - ln predicted_r(m))^2 + lam * sum_c x_c^2, by
    Gauss-Newton from m = 1. `predict(corrections)` re-predicts every measured figure (a TTFT or TPOT of a plan);
    its sensitivity to each class is a finite difference of the model itself, so TPOT's mix of decode-only and
    mixed steps and the queueing in TTFT are weighed as the model weighs them."""
    import numpy as np

    targets = np.log(np.asarray(measured, dtype=float))
    x = np.zeros(len(classes))
    if not classes or not len(targets):
        return {}

    def logs(xs) -> np.ndarray:
        return np.log(np.asarray(predict({c: float(math.exp(v)) for c, v in zip(classes, xs, strict=True)})))

    for _ in range(iterations):
        base = logs(x)
        jac = np.empty((len(targets), len(classes)))
        for k in range(len(classes)):
            step = x.copy()
            step[k] += FD_STEP
            jac[:, k] = (logs(step) - base) / FD_STEP
        dx = np.linalg.solve(jac.T @ jac + lam * np.eye(len(classes)), jac.T @ (targets - base) - lam * x)
        x = np.clip(x + dx, *np.log(MULTIPLIER_RANGE))
        if np.max(np.abs(dx)) < 1e-4:
            break
    return {c: round(float(math.exp(v)), 4) for c, v in zip(classes, x, strict=True)}


def _helps_held_back(per_plan, priors, model, hw, classes) -> bool:
    """Leave-one-plan-out: for each measured plan, corrections fitted on the others lower its TTFT/TPOT error
    on the whole (mean |ln(predicted / measured)| over the held-back plans). False with one plan."""
    from autotune.search import evaluate

    if len(per_plan) < 2:
        return False
    before, after = [], []
    for i, (cand, row, w) in enumerate(per_plan):
        rest = [x for j, x in enumerate(per_plan) if j != i]

        def predict(corrections: dict[str, float], rest=rest) -> list[float]:
            corrected = dataclasses.replace(hw, corrections=corrections)
            return [v for c, _, wr in rest for v in _means(evaluate(c.plan, model, corrected, wr))]

        measured = [float(r[k]) for _, r, _ in rest for k in ("measured_ttft_ms", "measured_tpot_ms")]
        held = fit_corrections(predict, measured, classes)
        truth = [float(row["measured_ttft_ms"]), float(row["measured_tpot_ms"])]
        before += list(zip(_means(priors[i]), truth, strict=True))
        fitted = evaluate(cand.plan, model, dataclasses.replace(hw, corrections=held), w)
        after += list(zip(_means(fitted), truth, strict=True))
    return log_error(after) < log_error(before)


def _means(p: Prediction) -> list[float]:
    return [p.ttft_ms.get("mean", 0.0), p.tpot_ms.get("mean", 0.0)]


def log_error(pairs: list[tuple[float, float]]) -> float:
    """Mean |ln(predicted / measured)| over (predicted, measured) pairs with both positive."""
    logs = [abs(math.log(p / m)) for p, m in pairs if p > 0 and m > 0]
    return sum(logs) / len(logs) if logs else 0.0


def _pairs(prediction: Prediction, row: dict) -> list[tuple[float, float]]:
    return [
        (prediction.ttft_ms.get("mean", 0.0), float(row["measured_ttft_ms"] or 0)),
        (prediction.tpot_ms.get("mean", 0.0), float(row["measured_tpot_ms"] or 0)),
        (prediction.total_tok_s, float(row["measured_total_tok_s"] or 0)),
    ]


# ------------------------------------------------------------------ the loop
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
    if not (out / "best.yaml").is_file():
        raise MiTuneError(f"{out}: no best.yaml (expected a run directory written by `mi-tune search`)")
    source = out / BEST_PREDICTED if (out / BEST_PREDICTED).is_file() else out / "best.yaml"
    best = load_best(source)
    model, _ = resolve_model(best.model.path or best.model.name)
    hw = _prior_hardware(out, best)
    study, note = _open_study(out, best)
    notes = [note] if note else []
    csv_path = out / MEASURED_CSV
    done = latest_rows(read_rows(csv_path))
    cands = candidates(best, study, opts.top)
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


def _conclude(out, best, source, model, hw, study, cands, rows, notes, apply: bool = False) -> MeasureOutcome:
    """Fit, re-predict, re-rank; best-measured.yaml from the best measured plan (best.yaml too with `apply`), the
    corrected profile beside it."""
    from autotune.search import evaluate

    files = {"measured": out / MEASURED_CSV}
    ok = [(c, r) for c in cands for r in rows if r["plan"] == c.label and r["status"] == "ok"]
    if not ok:
        notes.append("no plan was measured: nothing to fit; best.yaml unchanged")
        return MeasureOutcome(out, rows, None, "", [], files, tuple(notes))
    per_plan = []
    for cand, row in ok:
        workload = best.workload
        if workload.arrival == "closed":  # the concurrency it was benched at
            workload = dataclasses.replace(workload, concurrency=int(row["concurrency"]))
        per_plan.append((cand, row, workload))
    measured = [float(row[c]) for _, row, _ in per_plan for c in ("measured_ttft_ms", "measured_tpot_ms")]

    def predict(corrections: dict[str, float]) -> list[float]:
        corrected = dataclasses.replace(hw, corrections=corrections)
        figures = []
        for cand, _, w in per_plan:
            p = evaluate(cand.plan, model, corrected, w)
            figures += [p.ttft_ms.get("mean", 0.0), p.tpot_ms.get("mean", 0.0)]
        return figures

    priors = [evaluate(cand.plan, model, hw, w) for cand, _, w in per_plan]
    usable = all(v > 0 for v in measured) and all(v > 0 for v in predict({}))
    corrections = fit_corrections(predict, measured, used_classes(priors)) if usable else {}
    if not usable:
        notes.append("a measured or predicted TTFT/TPOT is zero: no corrections fitted")
    elif corrections and not _helps_held_back(per_plan, priors, model, hw, used_classes(priors)):
        corrections = {}
        notes.append(
            "corrections fitted on the other measured plans do not lower the error on the plan held back "
            "(leave-one-plan-out, or a single plan measured): none kept, the prior profile stands"
        )
    fitted = dataclasses.replace(
        hw,
        corrections=corrections,
        sources=(*hw.sources, f"measured-run: {MEASURED_CSV} ({len(ok)} plans)"),
    )
    before = [p for (_, row, _), prior in zip(per_plan, priors, strict=True) for p in _pairs(prior, row)]
    after = [p for cand, row, w in per_plan for p in _pairs(evaluate(cand.plan, model, fitted, w), row)]
    fit = Fit(corrections, len(measured), log_error(before), log_error(after))
    files["hardware"] = save(fitted, out / HARDWARE_MEASURED)
    column = "measured_goodput_tok_s" if best.workload.objective == "goodput" else "measured_total_tok_s"
    measured_value = {r["plan"]: float(r[column]) for _, r in ok}
    winner = max(ok, key=lambda cr: measured_value[cr[0].label])[0]
    reranked = _rerank(study, best, cands, model, hw, fitted, measured_value)
    files["reranked"] = _write_reranked(out / RERANKED_CSV, reranked)
    if reranked and reranked[0]["measured_tok_s"] == "":
        notes.append(
            f"with the corrections the top plan is one not measured ({reranked[0]['plan']}); "
            f"`mi-tune measure {out} --top {len(cands) + 1}` or more measures further down the ranking"
        )
    files["best_measured"] = save(_best_from(best, winner, model, fitted), out / BEST_MEASURED)
    if apply:
        if not (out / BEST_PREDICTED).is_file() and source.name == "best.yaml":
            (out / BEST_PREDICTED).write_text(source.read_text())
        files["best"] = save(_best_from(best, winner, model, fitted), out / "best.yaml")
    else:
        notes.append(
            f"best.yaml unchanged (the search's answer); the best measured plan is {BEST_MEASURED}: "
            f"`mi-tune serve {out / BEST_MEASURED}`, or `mi-tune measure {out} --apply` to make it best.yaml"
        )
    return MeasureOutcome(out, rows, fit, winner.label, reranked, files, tuple(notes))


def _rerank(study, best, cands, model, hw, fitted, measured_value) -> list[dict]:
    from autotune.search import evaluate
    from autotune.search.trial import objective_value

    pool = candidates(best, study, RERANK_PLANS)
    pool += [c for c in cands if all(c.label != p.label for p in pool)]
    out = []
    for c in pool:
        prior = evaluate(c.plan, model, hw, best.workload)
        corrected = evaluate(c.plan, model, fitted, best.workload)
        out.append(
            {
                "plan": c.label,
                "trial": c.trial,
                "predicted_tok_s": round(objective_value(prior), 3),
                "corrected_tok_s": round(objective_value(corrected), 3),
                "measured_tok_s": measured_value.get(c.label, ""),
            }
        )
    out.sort(key=lambda r: -r["corrected_tok_s"])
    return out


def _write_reranked(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _best_from(best: BestConfig, winner: Candidate, model: ModelSpec, fitted: HardwareProfile) -> BestConfig:
    """best.yaml for the best measured plan: predicted with the corrections, the corrected profile embedded."""
    from autotune.engines import build_launch
    from autotune.inputs import hardware_summary
    from autotune.search import baseline_plan, evaluate
    from autotune.search.study import plan_numerics

    plan = winner.plan
    prediction = evaluate(plan, model, fitted, best.workload)
    base = evaluate(best.baseline.plan, model, fitted, best.workload)
    speedup = round(prediction.total_tok_s / base.total_tok_s, 4) if base.total_tok_s else float("inf")
    baseline = dataclasses.replace(best.baseline, prediction=base, speedup=speedup)
    if best.baseline.plan.engine != plan.engine:  # the engine default of the measured winner's engine
        base_plan = baseline_plan(plan.engine, fitted, fitted.num_gpus)
        base = evaluate(base_plan, model, fitted, best.workload)
        speedup = round(prediction.total_tok_s / base.total_tok_s, 4) if base.total_tok_s else float("inf")
        baseline = dataclasses.replace(best.baseline, label=base_plan.describe(), plan=base_plan, prediction=base,
                                       speedup=speedup)  # fmt: skip
    hardware = HardwareRef(fitted.name, fitted.fingerprint, hardware_summary(fitted), fitted.num_gpus, fitted)
    return dataclasses.replace(
        best,
        engine=plan.engine,
        mode=plan.mode,
        phases=plan.phases,
        hardware=hardware,
        prediction=prediction,
        baseline=baseline,
        launch=build_launch(plan, model, fitted),
        provenance=dataclasses.replace(best.provenance, trial=winner.trial),
        numerics=plan_numerics(plan, model),
        same_numerics=best.same_numerics if plan == best.plan else None,
    )


def format_outcome(outcome: MeasureOutcome) -> str:
    """Measured against predicted per plan, the fitted corrections, the re-ranking and the files written."""
    lines = [f"measured {len(outcome.rows)} plan(s) in {outcome.run_dir}:"]
    cols = ("plan", "status", "predicted_total_tok_s", "measured_total_tok_s", "predicted_ttft_ms",
            "measured_ttft_ms", "predicted_tpot_ms", "measured_tpot_ms")  # fmt: skip
    table = [cols] + [tuple(str(r.get(c, "")) for c in cols) for r in outcome.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in table]
    for r in outcome.rows:
        if r.get("status") != "ok" and r.get("error"):
            lines.append(f"{r['plan']}: {r['error']}")
    fit = outcome.fit
    if fit:
        shown = ", ".join(f"{k} x{v:.3f}" for k, v in fit.corrections.items()) or "none"
        lines.append(f"fitted corrections ({fit.rows} measured figures, prior lambda {LAMBDA:g}): {shown}")
        lines.append(
            f"prediction error on the measured plans, mean |ln(predicted/measured)| over TTFT, TPOT, tok/s: "
            f"{fit.error_before:.3f} -> {fit.error_after:.3f} (in-sample)"
        )
        lines.append("re-ranked with the corrections (objective, tok/s):")
        for r in outcome.reranked[:5]:
            measured = f", measured {r['measured_tok_s']:,.0f}" if r["measured_tok_s"] != "" else ""
            lines.append(f"  {r['plan']}: {r['corrected_tok_s']:,.0f} (was {r['predicted_tok_s']:,.0f}{measured})")
        lines.append(f"best measured: {outcome.best_label}")
    lines += [f"note: {n}" for n in outcome.notes]
    lines += [f"wrote {path}" for path in outcome.files.values()]
    return "\n".join(lines)
