"""What a trial is, shared by the study, its runner, the simulator re-ranking and the ranking: the record of one
scored plan, the objective it is ranked by, and the prediction a trial stores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.search.evaluate import evaluate
from autotune.specs import Plan, Prediction, to_dict


@dataclass(frozen=True)
class TrialRecord:
    number: int
    plan: Plan | None
    prediction: Prediction
    value: float
    params: dict[str, Any]
    screened_tok_s: float = 0.0  # the steady-state screen's figure of a plan since simulated (0: not simulated)

    @property
    def reason(self) -> str:
        p = self.prediction
        if not p.feasible:
            return p.reason
        return "" if p.slo_met else "SLO missed at every operating point"


def objective_value(prediction: Prediction) -> float:
    """Total tokens/s at the chosen operating point; 0 for infeasible plans or missed SLOs."""
    return prediction.total_tok_s if prediction.feasible and prediction.slo_met else 0.0


def compact(prediction: Prediction) -> dict[str, Any]:
    """The prediction stored with each trial: everything a report's tables read, without the per-step
    breakdown and rate provenance (those are recomputed for the plans a report draws)."""
    raw = to_dict(prediction)
    raw.pop("steps", None)
    raw.pop("rates", None)
    return raw


def evaluate_or_reason(req, plan: Plan | None, reason: str) -> Prediction:
    if plan is None:
        return Prediction(feasible=False, reason=reason)
    return evaluate(plan, req.model, req.hardware, req.workload)
