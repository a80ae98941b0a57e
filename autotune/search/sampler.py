"""Turn sampled dimension values into a Plan (or the reason the combination cannot be one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autotune.search.space import Space, dynamic_requirements
from autotune.specs import PhasePlan, Plan, SpecError, from_dict

# Fields whose sampled value is a choice that the plan stores differently.
FIELD_TRANSFORMS: dict[str, Callable[[Any, dict], Any]] = {
    "ep": lambda on, phase: phase.get("tp", 1) * phase.get("dp", 1) if on else 1,
}
DEPLOYMENT_ONLY_FIELDS = ("prefill_share",)
LAYOUT_FIELDS = ("tp", "dp", "pp")  # their product must divide the phase's GPUs

Suggest = Callable[[str, tuple[Any, ...]], Any]


def _set(target: dict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    target[leaf] = value


def phase_gpus(mode: str, share: float, num_gpus: int) -> dict[str, tuple[int, ...]] | str:
    if mode == "aggregated":
        return {"both": tuple(range(num_gpus))}
    prefill = round(num_gpus * share)
    if not 1 <= prefill < num_gpus:
        return f"prefill_share={share} leaves no GPU for one of the phases on {num_gpus} GPUs"
    return {"prefill": tuple(range(prefill)), "decode": tuple(range(prefill, num_gpus))}


def _unmet(space: Space, values: dict[str, Any], where: str) -> str:
    """First dynamic requirement (one value needing another dimension's value) that `values` break."""
    for name, value in values.items():
        dim = space.dimension(name)
        needs = dynamic_requirements(dim.value_requires.get(value, {}))
        for other, wanted in needs.items():
            if values.get(other) != wanted:
                return f"{where}{name}={_fmt(value)} needs {other}={_fmt(wanted)}"
    return ""


def _fmt(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def sample_plan(
    space: Space, choices: dict[str, tuple[Any, ...]], suggest: Suggest, num_gpus: int
) -> tuple[Plan | None, str]:
    """Ask `suggest(param_name, choices)` for each active dimension; returns (plan, '') or (None, reason)."""
    deployment: dict[str, Any] = {}
    for dim in space.dimensions:
        active = dim.scope == "deployment" and all(deployment.get(k) == v for k, v in dim.when.items())
        if active and choices[dim.name]:
            deployment[dim.name] = suggest(dim.name, choices[dim.name])
    split = phase_gpus(deployment["mode"], deployment.get("prefill_share", 0.5), num_gpus)
    if isinstance(split, str):
        return None, split
    phases = {}
    for phase_name, gpus in split.items():
        values = _phase_values(space, choices, suggest, phase_name, len(gpus), deployment)
        reason = _unmet(space, values, f"{phase_name}.")
        if reason:
            return None, reason
        built = build_phase(space, values, gpus)
        if isinstance(built, str):
            return None, f"{phase_name}: {built}"
        phases[phase_name] = built
    reason = _unmet(space, deployment, "")
    if reason:
        return None, reason
    plan_fields: dict[str, Any] = {}
    for name, value in deployment.items():
        field_name = space.dimension(name).field
        if field_name not in DEPLOYMENT_ONLY_FIELDS:
            _set(plan_fields, field_name, value)
    try:
        return Plan(phases=phases, **plan_fields), ""
    except (TypeError, ValueError) as exc:
        return None, str(exc)


def _phase_values(
    space: Space,
    choices: dict[str, tuple[Any, ...]],
    suggest: Suggest,
    phase: str,
    num_gpus: int,
    deployment: dict[str, Any],
) -> dict[str, Any]:
    """Sample a phase's dimensions. Layout sizes (tp, dp, pp, in declaration order) only offer values that
    divide the GPUs still unassigned, so every sampled layout fits; the rest become replicas. A restricted
    choice set gets its own parameter name (`prefill.dp@4`), as Optuna requires fixed choices per name."""
    values: dict[str, Any] = {}
    remaining = num_gpus
    for dim in space.dimensions:
        if dim.scope != "phase" or any(deployment.get(k) != v for k, v in dim.when.items()):
            continue
        options, name = choices[dim.name], f"{phase}.{dim.name}"
        if not options:  # moot on this box/model: the plan keeps its default
            continue
        if dim.field in LAYOUT_FIELDS:
            fitting = tuple(v for v in options if remaining % v == 0)
            if fitting != options:
                options, name = fitting, f"{name}@{remaining}"
        values[dim.name] = suggest(name, options)
        if dim.field in LAYOUT_FIELDS:
            remaining //= values[dim.name]
    return values


def build_phase(space: Space, values: dict[str, Any], gpus: tuple[int, ...]) -> PhasePlan | str:
    """A PhasePlan from dimension values; the GPUs are split into as many replicas as the layout allows."""
    raw: dict[str, Any] = {}
    for name, value in values.items():
        field_name = space.dimension(name).field
        if field_name not in FIELD_TRANSFORMS:
            _set(raw, field_name, value)
    for name, value in values.items():
        field_name = space.dimension(name).field
        if field_name in FIELD_TRANSFORMS:
            _set(raw, field_name, FIELD_TRANSFORMS[field_name](value, raw))
    per_replica = raw.get("tp", 1) * raw.get("dp", 1) * raw.get("pp", 1)
    if len(gpus) % per_replica:
        return f"tp*dp*pp = {per_replica} does not divide its {len(gpus)} GPUs"
    raw.update(gpus=list(gpus), replicas=len(gpus) // per_replica, dp_attention=raw.get("dp", 1) > 1)
    try:
        return from_dict(PhasePlan, raw, "plan")
    except SpecError as exc:
        return str(exc).removeprefix("plan: ")
