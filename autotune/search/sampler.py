"""Turn sampled dimension values into a Plan (or the reason the combination cannot be one)."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import repeat
from typing import Any

from autotune.capability.facts import phase_field_facts
from autotune.search.admit import Admission, default_facts, fact_values, parse_speculative
from autotune.search.space import Space, dynamic_requirements
from autotune.specs import PhasePlan, Plan, SpecError
from autotune.specs.io import from_dict_memo
from autotune.specs.plan import expert_parallel_size

# Fields whose sampled value is a choice that the plan stores differently.
FIELD_TRANSFORMS: dict[str, Callable[[Any, dict], Any]] = {
    "ep": lambda on, phase: expert_parallel_size(phase.get("tp", 1), phase.get("dp", 1), bool(on)),
    "speculative": lambda choice, phase: parse_speculative(choice),
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
        if not dim.value_requires:  # most dimensions: no value needs another's
            continue
        needs = dynamic_requirements(dim.value_requires.get(value, {}))
        for other, wanted in needs.items():
            if values.get(other) != wanted:
                return f"{where}{name}={_fmt(value)} needs {other}={_fmt(wanted)}"
    return ""


def _fmt(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def sample_plan(
    space: Space,
    choices: dict[str, tuple[Any, ...]],
    suggest: Suggest,
    num_gpus: int,
    admission: Admission | None = None,
) -> tuple[Plan | None, str]:
    """Ask `suggest(param_name, choices)` for each active dimension; returns (plan, '') or (None, reason).
    With `admission`, each phase dimension is offered only the values the sampled engine accepts given the
    values sampled before it (capability rules); decode is sampled after prefill and sees its values as `peer.*`
    facts, so a rule tying the two phases together (the KV connector compares them) offers only matching values."""
    deployment: dict[str, Any] = {}
    for dim in space.dimensions:
        active = dim.scope == "deployment" and all(deployment.get(k) == v for k, v in dim.when.items())
        if active and choices[dim.name]:
            deployment[dim.name] = suggest(dim.name, choices[dim.name])
    split = phase_gpus(deployment["mode"], deployment.get("prefill_share", 0.5), num_gpus)
    if isinstance(split, str):
        return None, split
    phases: dict[str, PhasePlan] = {}
    for phase_name, gpus in split.items():
        peer = phase_field_facts(phases["prefill"], "peer.") if phase_name == "decode" else {}
        values = _phase_values(space, choices, suggest, phase_name, len(gpus), deployment, admission, peer)
        if isinstance(values, str):
            return None, f"{phase_name}: {values}"
        reason = _unmet(space, values, f"{phase_name}.")
        if reason:
            return None, reason
        built = _built_phase(space, values, gpus, admission)
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


def layouts(space: Space, choices: dict[str, tuple[Any, ...]], num_gpus: int) -> tuple[str, ...]:
    """Every combination of the layout dimensions (tp, dp, pp) whose product divides `num_gpus`, as labels
    such as 'tp=2,dp=2,pp=1'; the GPUs left over become replicas."""
    dims = [d for d in space.dimensions if d.scope == "phase" and d.field in LAYOUT_FIELDS and choices[d.name]]
    combos = [()]
    for dim in dims:
        combos = [c + ((dim.name, v),) for c in combos for v in choices[dim.name]]
    fitting = [c for c in combos if num_gpus % math.prod(v for _, v in c) == 0]
    return tuple(",".join(f"{name}={v}" for name, v in c) for c in fitting)


def layout_misfit(space: Space, choices: dict[str, tuple[Any, ...]], num_gpus: int) -> str:
    """'' when some mode (and prefill share) of the choices has a tp x dp x pp layout dividing each phase's GPUs;
    else what the layout choices are and why none fits (e.g. a space offering tp 3, 5, 7 on an 8-GPU box)."""
    shares = choices.get("prefill_share") or (0.5,)
    for mode in choices.get("mode") or ("aggregated",):
        for share in shares if mode == "disaggregated" else (0.5,):
            split = phase_gpus(mode, share, num_gpus)
            if not isinstance(split, str) and all(layouts(space, choices, len(g)) for g in split.values()):
                return ""
    dims = [d for d in space.dimensions if d.scope == "phase" and d.field in LAYOUT_FIELDS and choices[d.name]]
    offered = ", ".join(f"{d.name} {list(choices[d.name])}" for d in dims)
    return (
        f"{'/'.join(d.name for d in dims)}: no layout of the choices ({offered}) fits {num_gpus} GPUs "
        "(a replica's tp x dp x pp GPUs must divide the GPUs of its phase)"
    )


def _phase_values(
    space: Space,
    choices: dict[str, tuple[Any, ...]],
    suggest: Suggest,
    phase: str,
    num_gpus: int,
    deployment: dict[str, Any],
    admission: Admission | None = None,
    peer: dict[str, Any] | None = None,
) -> dict[str, Any] | str:
    """Sample a phase's dimensions. The layout dimensions are sampled jointly as one choice among the layouts
    that fit the phase's GPUs (`both.layout@8`): every sampled layout is valid, and one move of the
    refinement changes tp, dp and pp together. Optuna needs fixed choices per name, hence the GPU count; for
    the same reason a dimension whose admitted values are narrowed by an engine rule is asked under a name
    that lists them (`both.moe_kernel[auto|triton]`). Returns the values, or why no value is admitted.

    With a CachedAdmission, each question (name and values offered) is kept in a tree by the answers before it
    (the question is a function of them): a refinement neighbour or a completion shares the questions before
    its first new answer with the plans sampled before, and asks the engine rules only from there on."""
    memo = getattr(admission, "memo", None)  # CachedAdmission: one search's space and choices
    key = (id(space), id(choices), phase, num_gpus, tuple(sorted(deployment.items(), key=str)))
    cached = memo.get(key) if memo is not None else None
    if cached is None:
        cached = _phase_layouts(space, choices, phase, num_gpus, deployment, admission)
        if memo is not None:
            memo[key] = cached
    if isinstance(cached, str):
        return cached
    options, layout_name, active, defaults = cached
    label = options[0] if len(options) == 1 else suggest(layout_name, options)
    peer = peer or {}
    try:
        facts = tuple((k, type(v), v) for k, v in peer.items())  # True != 1 here
        node = memo.setdefault(("questions", key, facts), {}) if memo is not None else None
    except TypeError:  # an unhashable peer fact: no memo
        node = None
    if node is not None:
        node = node.setdefault(label, [None, {}])
    values: dict[str, Any] = _layout_values(label)
    known: dict[str, Any] | None = None
    for i, dim in enumerate(active):
        question = node[0] if node is not None else None
        if question is None:
            if known is None:  # the facts known before this dimension, as the dimensions before it set them
                known = {**defaults, **{"tp": 1, "dp": 1, "pp": 1}, **_layout_values(label)}
                known.update(mode=deployment.get("mode"), phase=phase, **peer)
                for before in active[:i]:
                    known.update(fact_values(before.field, values[before.name], known))
            question = _question(dim, choices, phase, deployment, admission, known)
            if node is not None:
                node[0] = question
        if isinstance(question, str):
            return question
        value = values[dim.name] = suggest(*question)
        if known is not None:
            known.update(fact_values(dim.field, value, known))
        if node is not None:
            node = node[1].setdefault((type(value), value), [None, {}])  # True != 1 here
    return values


def _question(dim, choices, phase: str, deployment: dict[str, Any], admission, known: dict[str, Any]):
    """(parameter name, values offered) of a phase dimension given the facts known so far, or why the engine
    admits none of its values."""
    offered = choices[dim.name]
    name = f"{phase}.{dim.name}"
    if admission is not None:
        engine = deployment["engine"]
        admitted = admission.admitted((engine,), dim.field, offered, known)
        if not admitted:
            return admission.refusal(engine, dim.field, offered[0], known)
        if admitted != offered:
            name += "[" + "|".join(_fmt(v) for v in admitted) + "]"
        offered = admitted
    return name, offered


def _phase_layouts(space, choices, phase: str, num_gpus: int, deployment: dict[str, Any], admission):
    """What a phase's sampling needs that depends only on the deployment values sampled before it: the layouts
    the engine admits (and the parameter name they are asked under), the active phase dimensions and the plan
    defaults of the fields none of them sets; or why no layout is admitted."""
    options, layout_name = layouts(space, choices, num_gpus), f"{phase}.layout@{num_gpus}"
    if not options:  # e.g. a prefill share whose GPU count no layout divides
        return f"no tp x dp x pp layout of the space divides {num_gpus} GPUs"
    if admission is not None:  # e.g. SGLang refuses pp > 1 for DeepSeek-V4.1 while vLLM takes it
        engine = deployment["engine"]
        kept = tuple(o for o in options if not _layout_refusal(admission, engine, o, space))
        if not kept:
            return _layout_refusal(admission, engine, options[0], space)
        if kept != options:
            options, layout_name = kept, f"{layout_name}/{engine}"  # Optuna needs fixed choices per name
    active = [
        dim
        for dim in space.dimensions
        if dim.scope == "phase"
        and dim.field not in LAYOUT_FIELDS
        and dim.applies_to(phase)
        and all(deployment.get(k) == v for k, v in dim.when.items())
        and choices[dim.name]  # else inactive, or moot on this box/model: the plan keeps its default
    ]
    return options, layout_name, active, default_facts({d.field for d in active})


def _layout_values(label: str) -> dict[str, int]:
    """'tp=2,dp=1,pp=1' -> {'tp': 2, 'dp': 1, 'pp': 1} (dimension names)."""
    return {name: int(v) for name, v in (part.split("=") for part in label.split(",") if part)}


def _layout_refusal(admission: Admission, engine: str, label: str, space: Space) -> str:
    """Why `engine` refuses a layout on this box and checkpoint ('' when no rule does)."""
    known = {space.dimension(name).field: v for name, v in _layout_values(label).items()}
    known = {"tp": 1, "dp": 1, "pp": 1, **known}
    return next((r for f, v in known.items() if (r := admission.refusal(engine, f, v, known))), "")


def _built_phase(space: Space, values: dict[str, Any], gpus: tuple[int, ...], admission) -> PhasePlan | str:
    """build_phase, memoised in a CachedAdmission's memo (one search's space) by the values and GPUs: a search
    builds the same phase many times (refinement scores each neighbour's completions), and PhasePlan is frozen."""
    memo = getattr(admission, "memo", None)
    try:
        key = ("phase", id(space), tuple((k, type(v), v) for k, v in values.items()), gpus)  # True != 1 here
        hash(key)
    except TypeError:
        memo = None
    if memo is None:
        return build_phase(space, values, gpus)
    if key not in memo:
        memo[key] = build_phase(space, values, gpus, memo.setdefault("contracts", {}))
    return memo[key]


def build_phase(
    space: Space, values: dict[str, Any], gpus: tuple[int, ...], contracts: dict | None = None
) -> PhasePlan | str:
    """A PhasePlan from dimension values; the GPUs are split into as many replicas as the layout allows.
    `contracts`: from_dict_memo's memo (one search's), so the sub-contracts the phases share are built once."""
    raw: dict[str, Any] = {}
    for name, value in values.items():
        field_name = space.dimension(name).field
        if field_name not in FIELD_TRANSFORMS and value is not None:  # None: leave the engine default
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
        return from_dict_memo(PhasePlan, raw, "plan", {} if contracts is None else contracts)
    except SpecError as exc:
        return str(exc).removeprefix("plan: ")


_MISSING = object()  # a fact not known yet (None is a value: the engine default)


class CachedAdmission:
    """An Admission whose answers are memoised by (engine, field, values, what is known so far): a long search
    asks the same questions at every trial, and each answer evaluates the engine's rule table."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self._cache: dict[tuple, Any] = {}
        self._reads: dict[tuple[str, ...], tuple[str, ...]] = {}  # engines -> Admission.verdict_reads
        self.memo: dict[tuple, Any] = {}  # sampler.py _phase_layouts by (space, choices, phase, deployment)

    def _ask(self, method: str, args: tuple, known: dict[str, Any]):
        """The answer, memoised by the values (and types: True is not 1) of the facts it reads: the rest of
        `known` (the other dimensions sampled so far) does not change it, so neighbours share answers."""
        engines = args[0] if isinstance(args[0], tuple) else (args[0],)
        reads = self._reads.get(engines)
        if reads is None:
            reads = self._reads[engines] = self.admission.verdict_reads(engines)
        values = tuple(map(known.get, reads, repeat(_MISSING)))  # known.get(name, _MISSING) for each
        try:
            key = (method, args, values, tuple(map(type, values)))
            hash(key)
        except TypeError:  # an unhashable fact: ask without the cache
            return getattr(self.admission, method)(*args, known)
        if key not in self._cache:
            self._cache[key] = getattr(self.admission, method)(*args, known)
        return self._cache[key]

    def refusal(self, engine: str, field: str, value: Any, known: dict[str, Any]) -> str:
        return self._ask("refusal", (engine, field, value), known)

    def admitted(self, engines: tuple[str, ...], field: str, values: tuple[Any, ...], known: dict[str, Any]):
        return self._ask("admitted", (engines, field, values), known)
