"""Why the best plan wins, one dimension at a time, and which of its settings are moot.

`alternatives` re-predicts the best plan with each other value of every searched phase dimension that the
engine's rules admit: the report's "each choice against its alternatives" table. `simplify` returns a
dimension to the plan's default (nothing emitted, the engine's own default) wherever the value the search
happened to pick changes nothing in the prediction, so best.yaml carries no flag that does not matter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune import capability
from autotune.search.admit import default_facts
from autotune.search.evaluate import evaluate
from autotune.search.sampler import FIELD_TRANSFORMS, LAYOUT_FIELDS, _set
from autotune.search.space import Dimension, Space
from autotune.specs import (
    HardwareProfile,
    ModelSpec,
    PhasePlan,
    Plan,
    Prediction,
    SpecError,
    Workload,
    from_dict,
    to_dict,
)

KEPT_FIELDS = LAYOUT_FIELDS + ("batching.max_running", "batching.chunked_prefill_tokens")  # always emitted
SAME_REL = 1e-9


@dataclass(frozen=True)
class Alternative:
    phase: str
    dimension: str
    value: Any
    chosen: bool
    prediction: Prediction

    @property
    def total_tok_s(self) -> float:
        return self.prediction.total_tok_s if self.prediction.feasible else 0.0

    @property
    def simulated(self) -> bool:
        return self.prediction.simulated_requests > 0


def with_value(plan: Plan, phase: str, dim: Dimension, value: Any) -> Plan | None:
    """The plan with one phase dimension set to `value` (None when that is not a valid plan)."""
    raw = to_dict(plan.phases[phase])
    if value is None:  # a null choice: the entry is absent (e.g. an NCCL variable left unset)
        *parents, leaf = dim.field.split(".")
        target = raw
        for key in parents:
            target = target.get(key, {})
        target.pop(leaf, None)
    else:
        transform = FIELD_TRANSFORMS.get(dim.field)
        _set(raw, dim.field, transform(value, raw) if transform else value)
    try:
        return dataclasses.replace(plan, phases={**plan.phases, phase: from_dict(PhasePlan, raw, "plan")})
    except (SpecError, ValueError):
        return None


def current_value(plan: Plan, phase: str, dim: Dimension, options: tuple[Any, ...]) -> Any:
    """Which of `options` the plan's phase holds for `dim` (None when none of them)."""
    return next((v for v in options if (with_value(plan, phase, dim, v) or plan) == plan), None)


def _phase_dims(space: Space, plan: Plan, choices: dict) -> list[tuple[str, Dimension]]:
    return [
        (name, dim)
        for name in plan.phases
        for dim in space.dimensions
        if dim.scope == "phase" and dim.applies_to(name) and len(choices.get(dim.name, ())) > 1
    ]


def alternatives(
    space: Space,
    plan: Plan,
    choices: dict,
    model: ModelSpec,
    hw: HardwareProfile,
    workload: Workload,
    headline: Prediction | None = None,
    simulate: Callable[[Plan, Prediction], Prediction] | None = None,
) -> list[Alternative]:
    """Every admitted single-dimension change of `plan`, predicted (layout dimensions are sampled jointly
    and compared in the top-plans table instead).

    On the headline's scale: the chosen rows carry `headline` (the plan's simulated prediction), and each change
    whose steady-state screen reaches the headline's throughput is simulated too (`simulate(plan, steady)`), so
    no row looks faster than the plan only because it was judged on the screen; the rest stay screened (below
    the headline even there) and say so."""
    rows = []
    steady_of: dict[str, Prediction] = {}
    for phase, dim in _phase_dims(space, plan, choices):
        if dim.field in LAYOUT_FIELDS:
            continue
        chosen = current_value(plan, phase, dim, choices[dim.name])
        for value in choices[dim.name]:
            if value == chosen:
                if headline is not None:
                    rows.append(Alternative(phase, dim.name, value, True, headline))
                    continue
                other = plan
            else:
                other = with_value(plan, phase, dim, value)
            if other is None or capability.check_plan(other, model, hw):
                continue  # not a plan, or the engine refuses it here
            key = other.describe()
            if key not in steady_of:
                p = evaluate(other, model, hw, workload)
                if simulate is not None and headline is not None and p.feasible and p.total_tok_s >= _value(headline):
                    p = simulate(other, p)
                steady_of[key] = p
            rows.append(Alternative(phase, dim.name, value, value == chosen, steady_of[key]))
    return rows


def _value(p: Prediction) -> float:
    return p.total_tok_s if p.feasible and p.slo_met else 0.0


def simplify(
    space: Space, plan: Plan, choices: dict, model: ModelSpec, hw: HardwareProfile, workload: Workload
) -> Plan:
    """Return moot settings to the plan default: a value whose default predicts exactly the same is dropped."""
    defaults = default_facts(set())
    target = evaluate(plan, model, hw, workload).total_tok_s
    for phase, dim in _phase_dims(space, plan, choices):
        if dim.field in KEPT_FIELDS:
            continue
        default = next((v for v in choices[dim.name] if _is_default(dim, v, defaults)), "missing")
        if default == "missing":
            continue
        other = with_value(plan, phase, dim, default)
        if other is None or other == plan or capability.check_plan(other, model, hw):
            continue
        if abs(evaluate(other, model, hw, workload).total_tok_s - target) <= SAME_REL * max(target, 1.0):
            plan = other
    return plan


def _is_default(dim: Dimension, value: Any, defaults: dict) -> bool:
    if dim.field == "ep":
        return value is False
    if dim.field == "speculative":
        return value == "none"
    if dim.field.startswith("comm.nccl."):
        return value is None
    return dim.field in defaults and defaults[dim.field] == value and type(defaults[dim.field]) is type(value)
