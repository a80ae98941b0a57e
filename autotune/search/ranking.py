"""One ranking scale for every plan a search shows as a candidate.

The best plan is chosen among the plans the simulator re-ranked (search/objectives.py): simulated total tokens/s
where the workload's SLO holds at its `slo_percentile`. Everything else a search shows beside it is put on that
same scale here:

- the top plans (`ranked`): the simulated plans, each returned to its simplest label (search/explain.py
  `simplify`: a setting whose default predicts the same is dropped, so two plans whose differences change nothing
  are one row) and simulated again when simplifying changed it; then ordered by `rank_key` (README "Ranking":
  higher objective, then lower mean end-to-end latency, then the earlier trial), one row per label. The best plan
  is the first row, so its label, its row and its stored speed-up agree;
- the best plan keeping the checkpoint's numerics (`same_numerics`): candidates screened, the best few
  simulated, and never below the engine default (which keeps them too): when nothing better keeps them, the
  engine default is the answer;
- `why_below`: for a row the screen scored above the best, what the simulation found instead.
"""

from __future__ import annotations

import dataclasses

from autotune.search.evaluate import evaluate
from autotune.search.explain import simplify

TOP_ROWS = 8  # simulated plans simplified and kept as ranked candidates (the tables show the first 5)
SAME_NUMERICS_SCREENED = 50  # best trials whose weights and KV return to the checkpoint's dtypes, screened
SAME_NUMERICS_SIMULATED = 4  # of the screened candidates keeping the numerics, the best few simulated


def rank_key(record, osl: int) -> tuple:
    """Higher objective first; equal objectives (every plan that serves a --rate, say) by lower mean end-to-end
    latency, then by trial order."""
    p = record.prediction
    latency_ms = p.ttft_ms.get("mean", 0.0) + p.tpot_ms.get("mean", 0.0) * osl
    return (round(record.value, 6), -latency_ms, -record.number)


def label(record) -> str:
    return record.plan.describe() if record.plan is not None else ""


def ranked(req, records: tuple, pool: tuple, choices: dict, value_fn, predict) -> tuple[tuple, tuple]:
    """(records with the top simulated plans simplified, the ranked distinct candidates best first).

    `predict(req, plan)` is the search's full prediction (steady state, then simulated)."""
    order = sorted(pool, key=lambda r: rank_key(r, req.workload.osl), reverse=True)
    firsts: dict[str, object] = {}
    for r in order:
        firsts.setdefault(label(r), r)
    replaced: dict[str, object] = {}  # original label -> simplified record
    for original, r in list(firsts.items())[:TOP_ROWS]:
        plan = simplify(req.space, r.plan, choices, req.model, req.hardware, req.workload)
        if plan == r.plan:
            replaced[original] = r
            continue
        prediction = predict(req, plan)
        screened = evaluate(plan, req.model, req.hardware, req.workload).total_tok_s
        simple = dataclasses.replace(
            r, plan=plan, prediction=prediction, value=value_fn(prediction), screened_tok_s=screened
        )
        replaced[original] = simple if simple.value >= r.value else r  # the simulator saw a difference: keep it
    by_label = {**{label(s): s for s in replaced.values()}, **replaced}  # a trial that ran the simplified plan too
    out = []
    for r in records:
        s = by_label.get(label(r)) if r.plan is not None else None
        out.append(r if s is None else dataclasses.replace(s, number=r.number, params=r.params))
    rows: list = []
    for r in sorted(replaced.values(), key=lambda r: rank_key(r, req.workload.osl), reverse=True):
        if r.value <= 0 or any(label(r) == label(o) for o in rows):
            continue  # simplified plans that became one: the better-ranked one stays
        same = next((i for i, o in enumerate(rows) if same_outcome(r, o)), None)
        if same is None:
            rows.append(r)
        elif len(label(r)) < len(label(rows[same])):  # the same outcome: one row, the simplest label
            rows[same] = r
    rest = [r for lab, r in firsts.items() if lab not in replaced]
    return tuple(out), (*rows, *rest)


def same_outcome(a, b) -> bool:
    """Two plans whose differences change nothing: same engine, mode and layouts, and the same outcome
    (screened and simulated throughput, every latency statistic, requests in flight). E.g. a cap of 64 or 1,024
    running requests where 7 are in flight: the launches differ by a flag, the served deployment does not."""
    pa, pb = a.prediction, b.prediction
    return (
        _layout(a.plan) == _layout(b.plan)
        and abs(_screen(a) - _screen(b)) <= SAME_REL * max(_screen(a), 1.0)  # the screen saw no difference
        and abs(pa.total_tok_s - pb.total_tok_s) <= SAME_REL * max(pa.total_tok_s, 1.0)
        and pa.ttft_ms == pb.ttft_ms
        and pa.tpot_ms == pb.tpot_ms
        and pa.concurrency == pb.concurrency
    )


SAME_REL = 1e-9


def _layout(plan) -> tuple:
    phases = tuple((n, p.tp, p.dp, p.pp, p.ep, p.replicas) for n, p in sorted(plan.phases.items()))
    return plan.engine, plan.mode, phases


def same_numerics(req, records: tuple, baseline_plan, baseline, value_fn, predict, keeps):
    """The best plan keeping the checkpoint's numerics, on the best's scale: among the trials that keep them
    and the best trials with their weight and KV dtypes returned to the checkpoint's (the search spends its
    trials where FP8 wins, so the trials alone understate what the checkpoint's numerics reach), screened, the
    best SAME_NUMERICS_SIMULATED simulated; the engine default (which keeps them) when none beats it."""
    from autotune.search.trial import TrialRecord

    feasible = sorted((r for r in records if r.value > 0), key=lambda r: (-r.value, r.number))
    candidates, seen = [], set()
    for r in feasible:
        if not keeps(r.plan) or label(r) in seen:
            continue
        seen.add(label(r))
        candidates.append(r)
    for r in feasible[:SAME_NUMERICS_SCREENED]:
        plan = dataclasses.replace(r.plan, phases={k: checkpoint_numerics(p) for k, p in r.plan.phases.items()})
        if plan.describe() in seen:
            continue
        seen.add(plan.describe())
        steady = evaluate(plan, req.model, req.hardware, req.workload)
        candidates.append(TrialRecord(r.number, plan, steady, value_fn(steady), r.params))
    simulated = []
    screened = sorted((r for r in candidates if r.value > 0), key=lambda r: (-_screen(r), r.number))
    for r in screened[:SAME_NUMERICS_SIMULATED]:
        p = r.prediction if r.prediction.simulated_requests else predict(req, r.plan)
        simulated.append(dataclasses.replace(r, prediction=p, value=value_fn(p), screened_tok_s=_screen(r)))
    default = TrialRecord(-1, baseline_plan, baseline, value_fn(baseline), {})
    best = max(simulated, key=lambda r: rank_key(r, req.workload.osl), default=None)
    if best is None or best.value <= default.value:
        return default
    return best


def _screen(r) -> float:
    return r.screened_tok_s or r.prediction.total_tok_s


def checkpoint_numerics(phase):
    kernels = dataclasses.replace(phase.kernels, gemm_dtype="auto", kv_cache_dtype="auto")
    return dataclasses.replace(phase, kernels=kernels)


def why_below(row: dict, best: dict, percentile: float) -> str:
    """Why the best beat a top-plans row whose screened figure is higher (rows: trials_frame columns)."""
    screened, best_screened = row.get("screened_tok_s", 0.0), best.get("screened_tok_s", 0.0)
    if not (screened > best_screened) or row.get("plan") == best.get("plan"):
        return ""
    return (
        f"screen {screened:,.0f} > best's {best_screened:,.0f}, but simulated at P{percentile:g}: "
        f"{row.get('total_tok_s', 0.0):,.0f} < {best.get('total_tok_s', 0.0):,.0f}"
    )


CLIMB_ROUNDS = 3  # single-setting moves adopted after the simulation (each recomputes the alternatives)


def climb(req, best, compare, value_fn, rounds: int = CLIMB_ROUNDS):
    """(best, its alternatives, moves adopted): the search climbs on the screen, so a single-setting change of
    the simulated best can simulate higher (a different operating point under the SLO at its percentile). Such
    a change is adopted as the best, numbered after the trial it came from, until none beats it: no
    alternative shown beside the best is above it on the scale it was chosen by. `compare(plan, headline)`
    returns the alternatives (search/explain.py)."""
    compared = compare(best.plan, best.prediction)
    moves = 0
    while moves < rounds:
        better = [a for a in compared if not a.chosen and a.simulated and value_fn(a.prediction) > best.value]
        if not better:
            break
        top = max(better, key=lambda a: value_fn(a.prediction))
        plan = _moved(req.space, best.plan, top)
        if plan is None:
            break
        screened = evaluate(plan, req.model, req.hardware, req.workload).total_tok_s
        best = dataclasses.replace(best, plan=plan, prediction=top.prediction, value=value_fn(top.prediction),
                                   screened_tok_s=screened)  # fmt: skip
        compared = compare(best.plan, best.prediction)
        moves += 1
    return best, compared, moves


def _moved(space, plan, alternative):
    """The plan with the alternative's one setting changed (explain.with_value on the space's dimension)."""
    from autotune.search.explain import with_value

    return with_value(plan, alternative.phase, space.dimension(alternative.dimension), alternative.value)
