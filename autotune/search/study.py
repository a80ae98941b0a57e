"""Optuna study over the search space, scored by the performance model."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from autotune import capability
from autotune.perf.precision import numerics_changes
from autotune.search import interactive, objectives, ranking, storage
from autotune.search.baseline import baseline_plan
from autotune.search.diagnose import check_fits, slo_message
from autotune.search.explain import Alternative, alternatives
from autotune.search.refine import _key
from autotune.search.runner import Progress, Session, Stop
from autotune.search.sampler import layout_misfit
from autotune.search.space import Space, dynamic_requirements, effective_choices
from autotune.search.trial import TrialRecord, evaluate_or_reason, objective_value
from autotune.sim.serve import simulate_prediction
from autotune.specs import (
    HardwareProfile,
    MiTuneError,
    ModelSpec,
    Plan,
    Prediction,
    SpecError,
    Workload,
    from_dict,
)


@dataclass(frozen=True)
class SearchRequest:
    model: ModelSpec
    hardware: HardwareProfile
    workload: Workload
    space: Space
    num_gpus: int
    trials: int = 200
    seed: int = 0
    storage: str = ""  # Optuna storage URL (search/storage.py normalize); empty = in memory
    study_name: str = "mi-tune"
    engine: str = "auto"
    mode: str = "auto"
    timeout_s: float | None = None  # bounds the whole search (all workers)
    workers: int = 1  # processes (search/workers.py)
    progress: bool = False  # a progress line on stderr
    keep_precision: bool = False  # only the checkpoint's own numerics: no online FP8 weights, no FP8 KV cache
    run_id: str = ""  # tags this run's trials in a shared storage; `trials` then counts only them
    worker: int = 0  # index of this process among --workers (its sampler seed is seed + worker)
    stream: str = ""  # on a shared storage, the run id: each run's sampler streams derive from seed and run


@dataclass(frozen=True)
class SearchResult:
    request: SearchRequest
    records: tuple[TrialRecord, ...]
    best: TrialRecord
    baseline_plan: Plan
    baseline: Prediction
    choices: dict[str, tuple[Any, ...]]
    alternatives: tuple[Alternative, ...] = ()  # the best plan with one dimension changed (search/explain.py)
    best_same_numerics: TrialRecord | None = None  # the best plan that keeps the checkpoint's numerics
    new_trials: int = 0  # trials this call ran (0 when a finished search is run again)
    interrupted: bool = False  # stopped by SIGINT or SIGTERM: the result holds the trials done
    timed_out: bool = False  # stopped by --timeout
    strategy: str = ""  # which samplers ran, with their trial counts (search/runner.py)
    ranked: tuple[TrialRecord, ...] = ()  # the candidates on the best's scale, best first (search/ranking.py)
    interactive: Any = None  # search/interactive.py Interactive: the best plan meeting an interactive SLO
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds per part of the search

    def numerics(self, record: TrialRecord) -> tuple[str, ...]:
        """The numerics changes of a trial's plan (all phases)."""
        return plan_numerics(record.plan, self.request.model) if record.plan else ()

    @property
    def speedup(self) -> float:
        return self.best.value / self.baseline.total_tok_s if self.baseline.total_tok_s else float("inf")


def study_choices(req: SearchRequest) -> dict[str, tuple[Any, ...]]:
    engines = _engines(req)
    choices = {d.name: effective_choices(d, req.model, req.hardware, engines) for d in req.space.dimensions}
    choices["engine"] = engines
    if req.keep_precision:  # numerics-changing values leave the space
        for dim in req.space.dimensions:
            if dim.field in PRECISION_FIELDS and "auto" in choices[dim.name]:
                choices[dim.name] = ("auto",)
    if req.mode != "auto":
        if req.mode not in req.space.dimension("mode").choices:
            raise MiTuneError(f"--mode: '{req.mode}' is not a choice of the search space ({req.space.source})")
        choices["mode"] = (req.mode,)
    choices = _prune_unreachable(req.space, choices)
    misfit = layout_misfit(req.space, choices, req.num_gpus)
    if misfit:
        raise SpecError(f"{req.space.source}: {misfit}")
    return choices


PRECISION_FIELDS = ("kernels.gemm_dtype", "kernels.kv_cache_dtype")


def plan_numerics(plan: Plan, model: ModelSpec) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for phase in plan.phases.values() for c in numerics_changes(model, phase)))


def _engines(req: SearchRequest) -> tuple[str, ...]:
    """The engines to search: the space's (or --engine), less those whose rules refuse this model on this box."""
    offered = req.space.dimension("engine").choices
    if req.engine != "auto":
        if req.engine not in offered:
            raise MiTuneError(f"--engine: '{req.engine}' is not a choice of the search space ({req.space.source})")
        offered = (req.engine,)
    able = capability.serving_engines(tuple(offered), req.model, req.hardware)
    unserved = capability.unserved_vendor(req.hardware.gpu.vendor, tuple(offered))
    if unserved:
        raise MiTuneError(f"{req.hardware.gpu.name}: {unserved}")
    if not able:
        why = "; ".join(capability.refusal(e, req.model, req.hardware) for e in offered)
        raise MiTuneError(f"no engine can serve {req.model.name} on {req.hardware.gpu.name}: {why}")
    return able


def _prune_unreachable(space: Space, choices: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """Drop values whose requirement on another dimension can never hold (e.g. two-batch overlap when
    DeepEP is not available on this box), until nothing changes."""
    changed = True
    while changed:
        changed = False
        for dim in space.dimensions:
            kept = tuple(
                v
                for v in choices[dim.name]
                if all(
                    wanted in choices.get(other, (wanted,))
                    for other, wanted in dynamic_requirements(dim.value_requires.get(v, {})).items()
                )
            )
            if kept and kept != choices[dim.name]:
                choices[dim.name] = kept
                changed = True
    return choices


def run_study(req: SearchRequest) -> SearchResult:
    entered = time.perf_counter()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    choices = study_choices(req)
    check_fits(req, choices)  # a model the box cannot hold fails here, with the arithmetic, not after the trials
    stop = Stop(None if req.timeout_s is None else time.monotonic() + req.timeout_s)
    if req.workload.objective == "pareto":  # a multi-objective study of simulated plans (search/objectives.py)
        with _interrupts(stop):
            records, ran = objectives.run_pareto(req, choices, stop, objective_value)
        return _finish(req, records, choices, ran, stop, f"NSGA-II, {ran} trials, every feasible plan simulated")
    started = time.perf_counter()
    prepared = {"prepare_s": started - entered}  # the engines' rules over the space, the fit check
    with _interrupts(stop):
        if req.workers > 1 and req.trials:
            return _timed(_run_workers(req, choices, stop), started, prepared=prepared)
        session = Session(req, choices, storage.open_study(req), stop)
        session.run()
    trials_s = time.perf_counter() - started
    study = session.memory if session.persistent is None else session.persistent
    predicted = {key: hit[0] for key, hit in session.memo.items()}
    result = _result(req, study, choices, predicted, session.new, stop, session.strategy())
    return _timed(result, started, trials_s, prepared)


def _timed(result: SearchResult, started: float, trials_s: float | None = None, prepared=None) -> SearchResult:
    """The result with the seconds its trials took (and the whole study call) in timings_s."""
    total = time.perf_counter() - started
    spent = sum(result.timings_s.values())
    trials = total - spent if trials_s is None else trials_s
    timings = {**(prepared or {}), "trials_s": trials, **result.timings_s, "study_s": total}
    return dataclasses.replace(result, timings_s=timings)


def _run_workers(req: SearchRequest, choices, stop: Stop) -> SearchResult:
    """--workers N: forked processes on the request's storage (a temporary journal when it has none)."""
    import tempfile

    from autotune.search.workers import run_workers

    with tempfile.TemporaryDirectory(prefix="mi-tune-") as tmp:
        url = req.storage or f"journal:{tmp}/study.journal"
        req = dataclasses.replace(req, storage=url, run_id=req.run_id or "workers")
        before = sum(_mine(t, req) for t in storage.open_study(req).get_trials(deepcopy=False) if t.state.is_finished())
        budget = max(0, req.trials - before)
        progress = Progress(budget, req.progress, stop.deadline)

        def count() -> int:
            return sum(_mine(t, req) for t in storage.open_study(req).get_trials(deepcopy=False)) - before

        try:
            run_workers(req, choices, url, budget, stop, lambda done: progress.update(done, 0.0), count)
        finally:
            progress.close()
        study = storage.open_study(req)
        new = sum(_mine(t, req) for t in study.get_trials(deepcopy=False) if t.state.is_finished()) - before
        strategy = f"{req.workers} worker processes, each TPE then refinement + elite mutation"
        return _result(req, study, choices, {}, new, stop, strategy if new else "no new trials")


def _mine(trial, req: SearchRequest) -> bool:
    return trial.user_attrs.get("run") == req.run_id


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _interrupts(stop: Stop):
    """SIGINT (Ctrl-C) or SIGTERM stops the search after the current trial; the trials done are written and
    reported. A second signal interrupts at once. Only the main thread can install a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if stop.interrupted.is_set():
            raise KeyboardInterrupt
        stop.signum = signum
        stop.interrupted.set()

    previous = {signum: signal.signal(signum, handler) for signum in INTERRUPTS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _result(
    req: SearchRequest, study, choices, predicted: dict[tuple, Prediction], new: int = 0, stop=None, strategy=""
) -> SearchResult:
    """Records of every finished trial of the study (all processes and runs), numbered as in the storage. A
    trial's prediction is the one this process made, else the one stored with the trial (no re-prediction
    with a newer model), else (older storages) predicted again from its plan."""
    records = []
    for t in study.get_trials(deepcopy=False):
        if not t.state.is_finished() or t.value is None or t.user_attrs.get("repeat"):
            continue
        raw = t.user_attrs.get("plan")
        plan = from_dict(Plan, raw, "storage") if raw else None
        prediction = predicted.get(_key(t.params)) or stored_prediction(t)
        if prediction is None:
            prediction = evaluate_or_reason(req, plan, t.user_attrs.get("reason", ""))
        records.append(TrialRecord(t.number, plan, prediction, objective_value(prediction), dict(t.params)))
    return _finish(req, tuple(records), choices, new, stop, strategy)


def _finish(req: SearchRequest, records: tuple, choices, new: int = 0, stop=None, strategy="") -> SearchResult:
    """The best plan of the trials (simulated: search/objectives.py), simplified, against the engine default."""
    feasible = [r for r in records if r.value > 0]
    if not feasible:
        if not records and stop is not None and stop.interrupted.is_set():
            raise MiTuneError("interrupted before the first trial finished: nothing to write; run the command again")
        if not records and stop is not None and stop.timed_out():
            raise MiTuneError(
                f"--timeout {req.timeout_s:g}: the search stopped before its first trial finished; allow more seconds"
            )
        missed = [(r.plan, r.prediction) for r in records if r.prediction.feasible and not r.prediction.slo_met]
        if slo := slo_message(req, missed):
            raise MiTuneError(f"no plan of '{req.model.name}' meets the SLO on '{req.hardware.name}': {slo}")
        reasons = sorted({r.reason for r in records if r.reason})
        raise MiTuneError(
            f"no plan of '{req.model.name}' fits '{req.hardware.name}' in {len(records)} trials"
            + (f" (e.g. {reasons[0]})" if reasons else "")
        )
    started = time.perf_counter()
    records, pool = objectives.rescore(req, records, objective_value)  # the screen's best plans, simulated
    simulated = time.perf_counter()
    records, ranked = ranking.ranked(req, records, pool, choices, objective_value, objectives.predict)
    best = ranked[0]
    engine = best.plan.engine
    rank = time.perf_counter()
    base_plan = baseline_plan(engine, req.hardware, req.num_gpus, req.model)
    baseline = objectives.predict(req, base_plan)
    based = time.perf_counter()
    best, compared, moved = ranking.climb(req, best, _comparer(req, choices), objective_value)
    climbed = time.perf_counter()
    if moved:  # a single-setting move simulated higher: it heads the ranking (not a trial: records stay the trials)
        ranked = (best, *ranked)
    same = (
        ranking.same_numerics(
            req,
            records,
            base_plan,
            baseline,
            objective_value,
            objectives.predict,
            lambda plan: not plan_numerics(plan, req.model),
        )  # fmt: skip
        if plan_numerics(best.plan, req.model)
        else None
    )
    numerics = time.perf_counter()
    latency = interactive.find(req, records, best, objectives.predict)
    timings = {
        "simulate_s": simulated - started,  # the screen's best plans over the workload's trace
        "rank_s": rank - simulated,
        "baseline_s": based - rank,
        "alternatives_s": climbed - based,  # each choice of the best against its alternatives, simulated
        "same_numerics_s": numerics - climbed,
        "interactive_s": time.perf_counter() - numerics,
    }
    interrupted = bool(stop and stop.interrupted.is_set())
    timed_out = bool(stop and not interrupted and stop.timed_out())
    return SearchResult(
        req,
        tuple(records),
        best,
        base_plan,
        baseline,
        choices,
        tuple(compared),
        same,
        new_trials=new,
        interrupted=interrupted,
        timed_out=timed_out,
        strategy=strategy,
        ranked=ranked,
        interactive=latency,
        timings_s=timings,
    )


def _comparer(req: SearchRequest, choices):
    """alternatives(plan, headline) on the search's space, box and workload; changes simulated like the best."""

    def simulate(plan: Plan, steady: Prediction) -> Prediction:
        return simulate_prediction(plan, req.model, req.hardware, req.workload, steady, seed=req.seed)

    def compare(plan: Plan, headline: Prediction):
        return alternatives(req.space, plan, choices, req.model, req.hardware, req.workload, headline, simulate)

    return compare


def stored_prediction(trial) -> Prediction | None:
    """A trial's stored prediction (user attr "prediction"), or None when it has none or an unreadable one."""
    raw = trial.user_attrs.get("prediction")
    if not isinstance(raw, dict):
        return None
    try:
        return from_dict(Prediction, raw, "storage")
    except (SpecError, TypeError, ValueError):
        return None
