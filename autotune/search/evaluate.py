"""A plan's prediction, with the engine's capability rules applied first."""

from __future__ import annotations

from autotune import capability
from autotune.perf import predict
from autotune.specs import HardwareProfile, ModelSpec, Plan, Prediction, Workload


def evaluate(plan: Plan, model: ModelSpec, hw: HardwareProfile, workload: Workload) -> Prediction:
    """A plan the engine refuses (or would silently not run as written) is worth nothing: say which rule."""
    refused = capability.check_plan(plan, model, hw)
    if refused:
        return Prediction(feasible=False, reason=f"engine rule: {refused}")
    return predict(plan, model, hw, workload)
