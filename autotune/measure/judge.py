"""Which prediction a measurement is compared with: the one the search stood behind.

The search screens every trial with the steady-state model and simulates its best plans over the workload's trace
at the SLO percentile, with its seed (search/objectives.py `rescore`, `predict`); best.yaml's prediction is that
simulated one, and each trial stores the prediction it had (user attr "prediction": steady-state, or simulated in
a Pareto search). A measurement is compared with the stored prediction when the bench ran the point it describes:
the searched workload itself, over as many requests as the stored prediction's trace. Otherwise (a closed loop
pinned to the operating point, concurrency capped by the request count, another request count, no stored figure)
the plan is predicted again at the benched workload the way the search judged it: `Judge`. The fit and the
re-ranking predict with the same `Judge`, so every figure measure prints is on the search's scale.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from autotune.measure.records import Candidate
from autotune.specs import BestConfig, HardwareProfile, ModelSpec, Plan, Prediction, Workload

STORED = "stored"  # the search's own figure for this plan at this workload
RESIMULATED = "re-simulated"  # the steady state, then the simulator over the benched trace with the search's seed
STEADY = "steady"  # the steady-state model alone (the search did not simulate)


@dataclass(frozen=True)
class Judge:
    """How the search judged a plan: the steady-state screen, then, when the search simulated, the simulator over
    the workload's trace with the search's seed."""

    model: ModelSpec
    simulated: bool
    seed: int

    @property
    def source(self) -> str:
        return RESIMULATED if self.simulated else STEADY

    def __call__(self, plan: Plan, hw: HardwareProfile, workload: Workload, num_requests: int | None = None):
        """The plan's prediction at `workload` (over `num_requests` simulated requests; None: the search's count)."""
        from autotune.search import evaluate
        from autotune.sim.serve import simulate_prediction

        steady = evaluate(plan, self.model, hw, workload)
        if not self.simulated or not steady.feasible:
            return steady
        return simulate_prediction(plan, self.model, hw, workload, steady, seed=self.seed, num_requests=num_requests)


def judge_of(best: BestConfig, model: ModelSpec) -> Judge:
    """The search's way of judging, read from best.yaml: its prediction is simulated when the search simulated."""
    return Judge(model, best.prediction.simulated_requests > 0, best.provenance.seed)


def _kind_matches(stored: Prediction | None, judge: Judge) -> bool:
    return stored is not None and stored.feasible and (stored.simulated_requests > 0) == judge.simulated


def operating_point(cand: Candidate, judge: Judge, hw: HardwareProfile, searched: Workload) -> Prediction:
    """The point the search stood behind for this plan (its stored prediction when it is of the search's kind,
    else predicted again the same way): a closed loop left at 'as many as fit' is benched at its concurrency."""
    return cand.stored if _kind_matches(cand.stored, judge) else judge(cand.plan, hw, searched)


def compared(
    cand: Candidate, judge: Judge, hw: HardwareProfile, searched: Workload, benched: Workload, requests: int
) -> tuple[Prediction, str, str]:
    """(prediction, its source, why not the stored one ('' when stored)) for a bench of `requests` requests at
    `benched`."""
    stored = cand.stored
    why = []
    if not _kind_matches(stored, judge):
        why.append(f"trial {cand.trial} stored no {'simulated' if judge.simulated else 'feasible'} prediction")
    elif judge.simulated and stored.simulated_requests != requests:
        why.append(f"{requests} requests (the search simulated {stored.simulated_requests})")
    if benched.concurrency != searched.concurrency:
        wanted = searched.concurrency or "as many as fit"
        why.append(f"{benched.concurrency} in flight (searched: {wanted})")
    elif benched != searched:
        why.append("another workload than the searched one")
    if not why:
        return stored, STORED, ""
    return judge(cand.plan, hw, benched, requests), judge.source, "; ".join(why)


def benched_of(searched: Workload, row: dict) -> Workload:
    """The workload a measured.csv row was benched at: a closed loop at the row's concurrency, and the speculative
    acceptance and the expert-popularity CV the engine counted when it counted them (so the fit corrects op times,
    not the acceptance or the expert skew)."""
    if searched.arrival == "closed" and row.get("concurrency"):
        searched = dataclasses.replace(searched, concurrency=int(row["concurrency"]))
    accepted = float(row.get("measured_draft_acceptance") or 0.0)
    searched = dataclasses.replace(searched, draft_acceptance=accepted) if accepted > 0 else searched
    skew = float(row.get("measured_expert_load_cv") or 0.0)  # the expert-popularity CV, where the engine reported it
    return dataclasses.replace(searched, expert_load_cv=skew) if skew > 0 else searched


def measured_acceptance(rows: list[dict], plans: list[Plan]) -> dict[str, float]:
    """Speculative method -> the mean per-draft-token acceptance measured over the rows of plans using it."""
    seen: dict[str, list[float]] = {}
    for row, plan in zip(rows, plans, strict=True):
        accepted = float(row.get("measured_draft_acceptance") or 0.0)
        if accepted > 0:
            seen.setdefault(plan.decoding.speculative.method, []).append(accepted)
    return {method: round(sum(v) / len(v), 4) for method, v in sorted(seen.items())}


def measured_expert_cv(rows: list[dict]) -> float:
    """The mean expert-popularity CV the engine reported over the rows (0: none reported). One value for the
    traffic: the popularity is the workload's (perf/ep_balance.py), whichever plan served it."""
    seen = [float(r.get("measured_expert_load_cv") or 0.0) for r in rows]
    seen = [v for v in seen if v > 0]
    return round(sum(seen) / len(seen), 4) if seen else 0.0


def with_measured(workload: Workload, plan: Plan, acceptance: dict[str, float], expert_cv: float = 0.0) -> Workload:
    """`workload` with the measured acceptance of the plan's speculative method, when one was measured, and the
    measured expert-popularity CV (measured_expert_cv), when there is one."""
    accepted = acceptance.get(plan.decoding.speculative.method, 0.0)
    workload = dataclasses.replace(workload, draft_acceptance=accepted) if accepted > 0 else workload
    return dataclasses.replace(workload, expert_load_cv=expert_cv) if expert_cv > 0 else workload
