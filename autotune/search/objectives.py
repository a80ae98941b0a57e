"""What a search optimises beyond the steady-state screen: the simulator's re-ranking of the screen's best plans,
and the multi-objective (Pareto) study.

Re-ranking: every trial is scored by the steady-state model (perf/serving.py, ~1 ms). After the trials, the
best distinct plans of that screen are simulated over the workload's trace (sim/, tens of ms each) and scored
again: simulated throughput if the workload's SLO holds at its `slo_percentile`, else 0. The screen's best
GROUP_TOP plans of each (engine, mode) go first, then the ranking, until SIM_TOP simulated plans meet the SLO
and no plan left scores within SIM_HEADROOM of the best simulated value (at most SIM_MAX plans). The best plan
is chosen among the simulated ones; the other trials keep their steady-state figures.

Pareto (`--objective pareto`): an Optuna NSGA-II study over three objectives of the simulated prediction:
total tokens/s per GPU (maximised), P95 TTFT and P95 TPOT (minimised); the workload's SLOs are its constraints
(NSGA-II's constrained domination). Every feasible trial is simulated. The front is the feasible simulated plans
no other plan beats on all three; best.yaml holds the plan with the most throughput that meets the SLO (the rule
of the single-objective search).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from typing import Any

from autotune.search.evaluate import evaluate
from autotune.specs import MiTuneError, Plan, Prediction, from_dict, to_dict

SIM_TOP = 8  # distinct plans meeting the SLO that the simulator ranks after the steady-state screen
SIM_MAX = 32  # at most this many distinct plans simulated
GROUP_TOP = 2  # the screen's best plans of each (engine, mode) simulated first
SIM_HEADROOM = 1.1  # a plan the screen scores within 10% above the best simulated value is still simulated
PARETO_POPULATION = 24  # NSGA-II population: a few generations fit a default budget of 200 trials


def predict(req, plan: Plan) -> Prediction:
    """Steady state, then the simulator over the workload's trace (a feasible plan's percentiles)."""
    from autotune.sim.serve import simulate_prediction

    steady = evaluate(plan, req.model, req.hardware, req.workload)
    return simulate_prediction(plan, req.model, req.hardware, req.workload, steady, seed=req.seed)


def rescore(req, records: tuple, value_fn) -> tuple[tuple, tuple]:
    """(records with the screen's best plans simulated, the records the best plan is chosen from)."""
    from autotune.sim.serve import simulate_prediction

    ranked, seen = [], set()
    for r in sorted((r for r in records if r.value > 0), key=lambda r: (-r.value, r.number)):
        label = r.plan.describe()  # plan labels show every non-default setting: one label per plan
        if label not in seen:
            seen.add(label)
            ranked.append((label, r))
    # the screen's best of each engine and mode first (the simulator runs each engine's scheduler, which the
    # steady state does not tell apart), then down the ranking
    firsts: dict[tuple[str, str], list] = {}
    for label, r in ranked:
        firsts.setdefault((r.plan.engine, r.plan.mode), []).append((label, r))
    order = [x for group in firsts.values() for x in group[:GROUP_TOP]]
    order += [x for x in ranked if x not in order]
    done: dict[str, Prediction] = {}
    met, best = 0, 0.0
    for i, (label, r) in enumerate(order):
        if len(done) >= SIM_MAX:
            break
        # past the groups' best: stop once SIM_TOP plans meet the SLO and no unsimulated plan's screen value
        # reaches the best simulated value (the simulator rarely finds more than the steady state)
        if i >= len(firsts) * GROUP_TOP and met >= SIM_TOP and r.value < best * SIM_HEADROOM:
            break
        p = r.prediction
        if not p.simulated_requests:
            p = simulate_prediction(r.plan, req.model, req.hardware, req.workload, p, seed=req.seed)
        done[label] = p
        value = value_fn(p)
        met += value > 0
        best = max(best, value)
    if not done:
        return records, ()
    out = []
    for r in records:
        p = done.get(r.plan.describe()) if r.plan is not None and r.value > 0 else None
        if p is not None:  # the steady-state figure stays beside the simulated one: tables show both scales
            screened = r.screened_tok_s or r.prediction.total_tok_s
            r = dataclasses.replace(r, prediction=p, value=value_fn(p), screened_tok_s=screened)
        out.append(r)
    pool = tuple(r for r in out if r.prediction.simulated_requests and r.value > 0)
    if not pool:
        raise MiTuneError(_missed(req, list(done.values())))
    return tuple(out), pool


def _missed(req, simulated: list[Prediction]) -> str:
    w = req.workload
    q = f"p{w.slo_percentile:g}"
    parts = []
    if w.ttft_ms:
        parts.append(f"P{w.slo_percentile:g} TTFT {min(p.ttft_ms.get(q, math.inf) for p in simulated):,.0f} ms "
                     f"at best (limit {w.ttft_ms:,.0f})")  # fmt: skip
    if w.tpot_ms:
        parts.append(f"P{w.slo_percentile:g} TPOT {min(p.tpot_ms.get(q, math.inf) for p in simulated):,.1f} ms "
                     f"at best (limit {w.tpot_ms:,.1f})")  # fmt: skip
    return (
        f"no plan of '{req.model.name}' meets the SLO on '{req.hardware.name}' in simulation of the "
        f"{len(simulated)} best plans of the steady-state screen: {'; '.join(parts)}"
    )


# ---------------------------------------------------------------- Pareto
def objectives_of(p: Prediction) -> tuple[float, float, float]:
    """(tokens/s per GPU, P95 TTFT ms, P95 TPOT ms) of a simulated prediction."""
    return p.total_tok_s_per_gpu, p.ttft_ms.get("p95", math.inf), p.tpot_ms.get("p95", math.inf)


def dominates(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """a is at least as good as b on every objective and better on one (throughput up, latencies down)."""
    no_worse = a[0] >= b[0] and a[1] <= b[1] and a[2] <= b[2]
    return no_worse and (a[0] > b[0] or a[1] < b[1] or a[2] < b[2])


def front(records) -> list:
    """The feasible simulated records no other one dominates, one per plan, by throughput per GPU."""
    by_plan = {}
    for r in records:
        p = r.prediction
        if r.plan is not None and p.feasible and p.simulated_requests:
            by_plan.setdefault(r.plan.describe(), r)
    points = list(by_plan.values())
    keep = [r for r in points if not any(dominates(objectives_of(o.prediction), objectives_of(r.prediction))
                                         for o in points if o is not r)]  # fmt: skip
    return sorted(keep, key=lambda r: -r.prediction.total_tok_s_per_gpu)


def run_pareto(req, choices, stop, value_fn):
    """The multi-objective study; returns (trial records, trials run). Optuna keeps it in memory: a Pareto
    search does not resume from --storage."""
    import optuna

    from autotune import capability
    from autotune.search.admit import Admission
    from autotune.search.sampler import sample_plan
    from autotune.search.trial import TrialRecord, compact

    admission = Admission(capability.box_facts(req.hardware, req.model))
    w = req.workload
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        native = hasattr(optuna.Trial, "set_constraint")  # Optuna 5 (4.x: a constraints_func)
        sampler = optuna.samplers.NSGAIISampler(
            population_size=PARETO_POPULATION, seed=req.seed, **({} if native else {"constraints_func": _constraints})
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    study = optuna.create_study(directions=["maximize", "minimize", "minimize"], sampler=sampler)
    seen: dict[str, Prediction] = {}

    def objective(trial):
        def suggest(name: str, options: tuple[Any, ...]) -> Any:
            return options[0] if len(options) == 1 else trial.suggest_categorical(name, list(options))

        plan, reason = sample_plan(req.space, choices, suggest, req.num_gpus, admission)
        if plan is None:
            p = Prediction(feasible=False, reason=reason)
        else:
            label = plan.describe()
            if label not in seen:
                seen[label] = predict(req, plan)
            p = seen[label]
        trial.set_user_attr("plan", to_dict(plan) if plan else None)
        trial.set_user_attr("prediction", compact(p))
        if not p.feasible:
            _constrain(trial, [1.0, 1.0], native)
            return 0.0, 1e12, 1e12  # dominated by every feasible plan, and marked infeasible
        q = f"p{w.slo_percentile:g}"
        ttft_over = p.ttft_ms.get(q, 0.0) - w.ttft_ms if w.ttft_ms else -1.0
        tpot_over = p.tpot_ms.get(q, 0.0) - w.tpot_ms if w.tpot_ms else -1.0
        _constrain(trial, [ttft_over, tpot_over], native)  # > 0: the SLO is missed by that much
        return objectives_of(p)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.optimize(objective, n_trials=req.trials, callbacks=[_stopper(stop)])
    records = []
    for t in study.get_trials(deepcopy=False):
        if not t.state.is_finished() or t.values is None:
            continue
        raw = t.user_attrs.get("plan")
        plan = from_dict(Plan, raw, "pareto study") if raw else None
        p = seen.get(plan.describe()) if plan is not None else None
        if p is None:
            p = from_dict(Prediction, t.user_attrs["prediction"], "pareto study")
        records.append(TrialRecord(t.number, plan, p, value_fn(p), dict(t.params)))
    return tuple(records), len(records)


def _constrain(trial, values: list[float], native: bool) -> None:
    if native:
        for name, value in zip(("ttft", "tpot"), values, strict=True):
            trial.set_constraint(name, value)
    else:
        trial.set_user_attr("constraints", values)


def _constraints(trial) -> list[float]:
    return trial.user_attrs.get("constraints", [1.0, 1.0])


def _stopper(stop):
    def callback(study, _trial) -> None:
        if stop is not None and stop():
            study.stop()

    return callback
