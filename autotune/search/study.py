"""Optuna study over the search space, scored by the performance model."""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from autotune import capability
from autotune.perf.precision import numerics_changes
from autotune.search.admit import Admission
from autotune.search.baseline import baseline_plan
from autotune.search.evaluate import evaluate
from autotune.search.explain import Alternative, alternatives, simplify
from autotune.search.refine import refine
from autotune.search.sampler import sample_plan
from autotune.search.space import Space, dynamic_requirements, effective_choices
from autotune.specs import HardwareProfile, MiTuneError, ModelSpec, Plan, Prediction, Workload, from_dict, to_dict


@dataclass(frozen=True)
class SearchRequest:
    model: ModelSpec
    hardware: HardwareProfile
    workload: Workload
    space: Space
    num_gpus: int
    trials: int = 200
    seed: int = 0
    storage: str = ""  # Optuna storage URL; empty = in memory
    study_name: str = "mi-tune"
    engine: str = "auto"
    mode: str = "auto"
    timeout_s: float | None = None
    workers: int = 1
    progress: bool = False
    keep_precision: bool = False  # only the checkpoint's own numerics: no online FP8 weights, no FP8 KV cache


@dataclass(frozen=True)
class TrialRecord:
    number: int
    plan: Plan | None
    prediction: Prediction
    value: float
    params: dict[str, Any]

    @property
    def reason(self) -> str:
        p = self.prediction
        if not p.feasible:
            return p.reason
        return "" if p.slo_met else "SLO missed at every operating point"


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

    def numerics(self, record: TrialRecord) -> tuple[str, ...]:
        """The numerics changes of a trial's plan (all phases)."""
        return plan_numerics(record.plan, self.request.model) if record.plan else ()

    @property
    def speedup(self) -> float:
        return self.best.value / self.baseline.total_tok_s if self.baseline.total_tok_s else float("inf")


def objective_value(prediction: Prediction) -> float:
    """Total tokens/s at the chosen operating point; 0 for infeasible plans or missed SLOs."""
    return prediction.total_tok_s if prediction.feasible and prediction.slo_met else 0.0


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
    return _prune_unreachable(req.space, choices)


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


def _evaluate(req: SearchRequest, plan: Plan | None, reason: str) -> Prediction:
    if plan is None:
        return Prediction(feasible=False, reason=reason)
    return evaluate(plan, req.model, req.hardware, req.workload)


TPE_SHARE = 0.75  # of the trial budget; the rest refines the incumbent (search/refine.py)


def _sampler(req: SearchRequest):
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=req.seed, multivariate=True, group=True, n_startup_trials=max(10, req.trials // 10)
        )


def _studies(req: SearchRequest):
    """(study to optimise, callbacks). A SQLite storage is mirrored: trials run against an in-memory study
    (Optuna's RDB reads dominate otherwise) and each finished trial is written through at once, so an
    interrupted search loses nothing. Other URLs (PostgreSQL, MySQL, journal files) are used directly so that
    several processes or machines can share the study."""
    import optuna

    storage = req.storage or None
    if storage is None or not storage.startswith("sqlite"):
        study = optuna.create_study(
            study_name=req.study_name, storage=storage, sampler=_sampler(req), direction="maximize", load_if_exists=True
        )
        _check_same_study(study, req)
        return study, []
    disk = optuna.create_study(study_name=req.study_name, storage=storage, direction="maximize", load_if_exists=True)
    _check_same_study(disk, req)
    memory = optuna.create_study(study_name=req.study_name, sampler=_sampler(req), direction="maximize")
    for trial in disk.get_trials(deepcopy=False):
        if trial.state.is_finished():
            memory.add_trial(trial)
    lock = threading.Lock()

    def write_through(_study, trial) -> None:
        with lock:
            disk.add_trial(trial)

    return memory, [write_through]


def run_study(req: SearchRequest) -> SearchResult:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    choices = study_choices(req)
    admission = Admission(capability.box_facts(req.hardware, req.model))
    study, callbacks = _studies(req)
    predicted: dict[int, Prediction] = {}  # trial number -> prediction, so results need not predict again

    def objective(trial: optuna.Trial) -> float:
        def suggest(name: str, options: tuple[Any, ...]) -> Any:
            return options[0] if len(options) == 1 else trial.suggest_categorical(name, list(options))

        plan, reason = sample_plan(req.space, choices, suggest, req.num_gpus, admission)
        prediction = predicted[trial.number] = _evaluate(req, plan, reason)
        trial.set_user_attr("plan", to_dict(plan) if plan else None)
        trial.set_user_attr("reason", prediction.reason)
        return objective_value(prediction)

    scored: dict[tuple, float] = {}  # successive incumbents share most of their neighbours

    def score(params: dict[str, Any]) -> float:
        """A candidate's objective without a trial: refinement moves to the best untried neighbour."""
        key = tuple(sorted((k, repr(v)) for k, v in params.items()))
        if key not in scored:

            def fixed(name: str, options: tuple[Any, ...]) -> Any:
                value = params.get(name, options[0])
                return value if value in options else options[0]

            plan, reason = sample_plan(req.space, choices, fixed, req.num_gpus, admission)
            scored[key] = objective_value(_evaluate(req, plan, reason))
        return scored[key]

    def explore(n: int) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.optimize(
                objective,
                n_trials=n,
                timeout=req.timeout_s,
                n_jobs=req.workers,
                callbacks=callbacks,
                show_progress_bar=req.progress,
            )

    done = sum(t.state.is_finished() for t in study.trials)
    tpe_trials = math.ceil(req.trials * TPE_SHARE)
    if done < tpe_trials:
        explore(tpe_trials - done)
        done = tpe_trials
    if done < req.trials:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            done += refine(study, objective, req.trials - done, callbacks, score)
    if done < req.trials:  # a local optimum was reached early: spend the rest exploring
        explore(req.trials - done)
    return _result(req, study, choices, predicted)


def _rank(record: TrialRecord, osl: int) -> tuple:
    """Higher objective first; equal objectives (every plan that serves a --rate, say) by lower end-to-end
    latency, then by trial order."""
    p = record.prediction
    latency_ms = p.ttft_ms.get("mean", 0.0) + p.tpot_ms.get("mean", 0.0) * osl
    return (round(record.value, 6), -latency_ms, -record.number)


SAME_NUMERICS_CANDIDATES = 50


def _best_same_numerics(req: SearchRequest, feasible: list[TrialRecord]) -> TrialRecord | None:
    """The best plan keeping the checkpoint's numerics: among the trials that keep them, and the best trials
    with their weight and KV dtypes returned to the checkpoint's (the search spends its trials where FP8 wins,
    so the trials alone understate what the checkpoint's own numerics reach)."""
    ranked = sorted(feasible, key=lambda r: (-r.value, r.number))
    candidates = [r for r in ranked if not plan_numerics(r.plan, req.model)]
    seen = [r.plan for r in candidates]  # plans hold dicts: compared by equality, not hashed
    for r in ranked[:SAME_NUMERICS_CANDIDATES]:
        plan = dataclasses.replace(r.plan, phases={k: _checkpoint_numerics(p) for k, p in r.plan.phases.items()})
        if plan in seen:
            continue
        seen.append(plan)
        prediction = evaluate(plan, req.model, req.hardware, req.workload)
        candidates.append(TrialRecord(r.number, plan, prediction, objective_value(prediction), r.params))
    candidates = [r for r in candidates if r.value > 0]
    return max(candidates, key=lambda r: (r.value, -r.number)) if candidates else None


def _checkpoint_numerics(phase):
    kernels = dataclasses.replace(phase.kernels, gemm_dtype="auto", kv_cache_dtype="auto")
    return dataclasses.replace(phase, kernels=kernels)


def _check_same_study(study, req: SearchRequest) -> None:
    """A resumed study must be the same search: same model, box, workload and space."""
    key = f"{req.model.name}|{req.hardware.fingerprint}|{to_dict(req.workload)}|{req.space.source}|{req.seed}"
    key += "|keep-precision" if req.keep_precision else ""
    stored = study.user_attrs.get("search_key")
    if stored is None:
        study.set_user_attr("search_key", key)
    elif stored != key:
        raise MiTuneError(
            f"--storage/--study: study '{req.study_name}' holds a different search; use a new --out or --study name"
        )


def _result(req: SearchRequest, study, choices, predicted: dict[int, Prediction]) -> SearchResult:
    """Records of every finished trial; trials resumed from storage are predicted again from their plan."""
    records = []
    for t in study.trials:
        if not t.state.is_finished() or t.value is None:
            continue
        raw = t.user_attrs.get("plan")
        plan = from_dict(Plan, raw, "storage") if raw else None
        prediction = predicted.get(t.number) or _evaluate(req, plan, t.user_attrs.get("reason", ""))
        records.append(TrialRecord(t.number, plan, prediction, objective_value(prediction), dict(t.params)))
    feasible = [r for r in records if r.value > 0]
    if not feasible:
        reasons = sorted({r.reason for r in records if r.reason})
        raise MiTuneError(
            f"no plan of '{req.model.name}' fits '{req.hardware.name}' in {len(records)} trials"
            + (f" (e.g. {reasons[0]})" if reasons else "")
        )
    best = max(feasible, key=lambda r: _rank(r, req.workload.osl))
    plan = simplify(req.space, best.plan, choices, req.model, req.hardware, req.workload)
    if plan != best.plan:
        best = dataclasses.replace(best, plan=plan, prediction=evaluate(plan, req.model, req.hardware, req.workload))
    engine = best.plan.engine
    base_plan = baseline_plan(engine, req.hardware, req.num_gpus)
    baseline = evaluate(base_plan, req.model, req.hardware, req.workload)
    compared = alternatives(req.space, best.plan, choices, req.model, req.hardware, req.workload)
    same = _best_same_numerics(req, feasible) if plan_numerics(best.plan, req.model) else None
    return SearchResult(req, tuple(records), best, base_plan, baseline, choices, tuple(compared), same)
