"""Search space: dimensions declared in search_spaces/*.yaml, filtered by what the box and model allow."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from autotune.capability import ENGINES, box_facts
from autotune.search.admit import Admission, parse_speculative
from autotune.specs import HardwareProfile, ModelSpec, PhasePlan, SpecError, Speculative, read_document
from autotune.specs.io import check_schema, convert
from autotune.specs.plan import MODES, NCCL_NAME, NCCL_VALUE
from autotune.specs.ranges import check_field

SCOPES = ("deployment", "phase")
PHASES = ("both", "prefill", "decode")
STATIC_FACTS = ("feature", "arch", "interconnect", "model", "checkpoint", "kv", "attention", "vendor")
DIMENSION_KEYS = ("name", "scope", "field", "choices", "requires", "value_requires", "when", "phases")
SPACE_KEYS = ("schema", "name", "dimensions")


@dataclass(frozen=True)
class Dimension:
    name: str
    scope: str
    field: str
    choices: tuple[Any, ...]
    requires: dict[str, Any] = field(default_factory=dict)
    value_requires: dict[Any, dict[str, Any]] = field(default_factory=dict)
    when: dict[str, Any] = field(default_factory=dict)
    phases: tuple[str, ...] = PHASES

    def applies_to(self, phase: str) -> bool:
        return phase in self.phases


@dataclass(frozen=True)
class Space:
    name: str
    source: str
    dimensions: tuple[Dimension, ...]

    def dimension(self, name: str) -> Dimension:
        return self._by_name[name]

    @functools.cached_property
    def _by_name(self) -> dict[str, Dimension]:  # sampling looks dimensions up by name ~1,000 times a trial
        return {d.name: d for d in self.dimensions}

    def names(self, scope: str) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions if d.scope == scope)


def default_space_path() -> Path:
    return Path(str(resources.files("autotune.search_spaces").joinpath("default.yaml")))


def load_space(path: str | Path | None = None) -> Space:
    path = Path(path) if path else default_space_path()
    data = read_document(path)
    check_schema(data, "space", str(path))
    unknown = sorted(set(data) - set(SPACE_KEYS))
    if unknown:
        raise SpecError(f"{path}: unknown key '{unknown[0]}' (expected: {', '.join(SPACE_KEYS)})")
    dims = data.get("dimensions")
    if not isinstance(dims, list) or not dims:
        raise SpecError(f"{path}: dimensions: expected a non-empty list")
    parsed = tuple(_dimension(d, f"{path}: dimensions[{i}]") for i, d in enumerate(dims))
    names = [d.name for d in parsed]
    for required in ("engine", "mode", "tp"):
        if required not in names:
            raise SpecError(f"{path}: dimensions: missing the '{required}' dimension")
    _check_dimensions(parsed, str(path))
    return Space(name=str(data.get("name", path.stem)), source=str(path), dimensions=parsed)


def _dimension(raw: Any, where: str) -> Dimension:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping")
    unknown = set(raw) - set(DIMENSION_KEYS)
    if unknown:
        raise SpecError(f"{where}: unknown key '{sorted(unknown)[0]}' (expected: {', '.join(DIMENSION_KEYS)})")
    for key in ("name", "field", "choices"):
        if key not in raw:
            raise SpecError(f"{where}: missing '{key}'")
    for key in ("name", "field"):
        if not isinstance(raw[key], str) or not raw[key]:
            raise SpecError(f"{where}.{key}: expected a non-empty string, got {raw[key]!r}")
    for key in ("requires", "value_requires", "when"):
        if not isinstance(raw.get(key) or {}, dict):
            raise SpecError(f"{where}.{key}: expected a mapping, got {raw[key]!r}")
    if not isinstance(raw.get("phases") or [], list):
        raise SpecError(f"{where}.phases: expected a list, got {raw['phases']!r}")
    scope = raw.get("scope", "phase")
    if scope not in SCOPES:
        raise SpecError(f"{where}.scope: expected one of {', '.join(SCOPES)}, got {scope!r}")
    choices = raw["choices"]
    if not isinstance(choices, list) or not choices:
        raise SpecError(f"{where}.choices: expected a non-empty list")
    name = f"{where.partition(': ')[0]}: {raw['name']}"  # choice errors name the file and the dimension
    for value in choices:
        _check_choice(name, scope, raw["field"], value)
    if len({repr(v) for v in choices}) != len(choices):
        raise SpecError(f"{name}: choices: a value is listed twice in {choices}")
    value_requires = raw.get("value_requires") or {}
    for value in value_requires:
        if value not in choices:
            raise SpecError(f"{where}.value_requires: {value!r} is not one of the choices {choices}")
    phases = tuple(raw.get("phases") or PHASES)
    if set(phases) - set(PHASES):
        raise SpecError(f"{where}.phases: expected a subset of {', '.join(PHASES)}, got {list(phases)}")
    return Dimension(
        phases=phases,
        name=str(raw["name"]),
        scope=scope,
        field=str(raw["field"]),
        choices=tuple(choices),
        requires=dict(raw.get("requires") or {}),
        value_requires=dict(value_requires),
        when=dict(raw.get("when") or {}),
    )


# What the plan fields take beyond their declared types and their contracts' checks: layout sizes, NCCL names.
POSITIVE_PHASE_FIELDS = ("tp", "dp", "pp", "dcp", "replicas")


def _check_choice(where: str, scope: str, field_name: str, value: Any) -> None:
    """`value` must be something the plan field `field_name` accepts (its type, and its range where the plan
    contract or the performance model bounds it); errors read 'space.yaml: max_running: expected ...'."""
    if scope == "deployment":
        allowed = {"engine": ENGINES, "mode": MODES}.get(field_name)
        if field_name == "prefill_share":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise SpecError(f"{where}: expected shares of the GPUs between 0 and 1, got {value!r}")
        elif allowed is None:
            raise SpecError(
                f"{where}: field: expected engine, mode or prefill_share for a deployment dimension, got {field_name!r}"
            )
        elif value not in allowed:
            raise SpecError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}")
        return
    if field_name == "ep":  # expert_parallel: true spreads the experts over tp*dp ranks
        convert(bool, value, where)
    elif field_name == "speculative":
        try:
            Speculative(**parse_speculative(convert(str, value, where)))
        except ValueError:
            raise SpecError(f"{where}: expected 'none' or METHOD/K with K draft tokens >= 1, got {value!r}") from None
    else:
        tp, owner, leaf = _field_type(field_name, where)
        if value is None and owner is dict:  # a null entry leaves the engine's (or NCCL's) own default
            return
        convert(tp, value, where)
        if field_name in POSITIVE_PHASE_FIELDS and value < 1:
            raise SpecError(f"{where}: expected a positive integer, got {value!r}")
        check_field(owner if dataclasses.is_dataclass(owner) else "", leaf, value, where)  # specs/ranges.py
        if owner is dict and field_name.startswith("comm.nccl."):
            if not NCCL_NAME.fullmatch(leaf):
                raise SpecError(f"{where}: field: expected comm.nccl.NCCL_<NAME>, got {field_name!r}")
            if not NCCL_VALUE.fullmatch(value):
                raise SpecError(f"{where}: expected plain values (letters, digits, . , : + -), got {value!r}")
        if dataclasses.is_dataclass(owner) and owner is not PhasePlan:
            try:  # the nested contract's own checks, e.g. Batching: positive integers
                owner(**{leaf: value})
            except ValueError as exc:
                raise SpecError(f"{where}: {str(exc).removeprefix(f'{leaf}: ')}") from None


def _field_type(dotted: str, where: str) -> tuple[Any, Any, str]:
    """(declared type, the class holding it, leaf name) of a PhasePlan field path such as 'batching.max_running';
    for an entry of a dict field such as 'comm.nccl.NCCL_PROTO' the holder is dict and the leaf the entry's key."""
    owner: Any = PhasePlan
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        hints = get_type_hints(owner) if dataclasses.is_dataclass(owner) else {}
        if part not in hints or part in ("gpus", "schema"):
            break
        tp = hints[part]
        rest = parts[i + 1 :]
        if not rest:
            return tp, owner, part
        if get_origin(tp) is dict:
            return get_args(tp)[1], dict, ".".join(rest)
        owner = tp
    raise SpecError(f"{where}: field: {dotted!r} is not a plan field")


def _check_dimensions(dims: tuple[Dimension, ...], path: str) -> None:
    """Across dimensions: unique names; `when` names deployment dimensions and their values; `requires` and
    `value_requires` name a static fact or another dimension."""
    names = [d.name for d in dims]
    for d in dims:
        where = f"{path}: {d.name}"
        if names.count(d.name) > 1:
            raise SpecError(f"{where}: declared twice (each dimension is declared once)")
        for other, wanted in d.when.items():
            target = next((x for x in dims if x.name == other and x.scope == "deployment"), None)
            if target is None:
                raise SpecError(f"{where}: when: {other!r} is not a deployment dimension of this space")
            if wanted not in target.choices:
                raise SpecError(f"{where}: when: {other}={wanted!r} is not one of its choices {list(target.choices)}")
        for key, needs in (
            ("requires", d.requires),
            *((f"value_requires.{v}", r) for v, r in d.value_requires.items()),
        ):
            if not isinstance(needs, dict):
                raise SpecError(f"{where}: {key}: expected a mapping, got {needs!r}")
            for fact in needs:
                if fact not in STATIC_FACTS and fact not in names:
                    raise SpecError(
                        f"{where}: {key}: {fact!r} is neither a fact ({', '.join(STATIC_FACTS)}) nor a dimension"
                    )


def _fact_holds(fact: str, wanted: Any, model: ModelSpec, hw: HardwareProfile) -> bool:
    gpu = hw.gpu
    wanted_list = wanted if isinstance(wanted, list) else [wanted]
    facts = {
        "feature": lambda: all(getattr(gpu.features, f, False) for f in wanted_list),
        "arch": lambda: gpu.arch in wanted_list,
        "interconnect": lambda: hw.interconnect in wanted_list,
        "model": lambda: ("moe" if model.is_moe else "dense") in wanted_list,
        "checkpoint": lambda: model.dense_dtype in wanted_list,
        "kv": lambda: model.kv_dtype in wanted_list,
        "attention": lambda: model.layers[0].attention.kind in wanted_list,
        "vendor": lambda: gpu.vendor in wanted_list,
    }
    return facts[fact]()


def static_ok(requires: dict[str, Any], model: ModelSpec, hw: HardwareProfile) -> bool:
    return all(_fact_holds(k, v, model, hw) for k, v in requires.items() if k in STATIC_FACTS)


def dynamic_requirements(requires: dict[str, Any]) -> dict[str, Any]:
    """Requirements that name another dimension: checked per trial."""
    return {k: v for k, v in requires.items() if k not in STATIC_FACTS}


def effective_choices(
    dim: Dimension, model: ModelSpec, hw: HardwareProfile, engines: tuple[str, ...] = ENGINES
) -> tuple[Any, ...]:
    """The values worth sampling on this box and model; () when the dimension is moot here, so the plan
    keeps its default and the emitter leaves the engine's own default in place. A value no engine of
    `engines` accepts on this box and checkpoint (capability rules) is dropped before the study starts."""
    if not static_ok(dim.requires, model, hw):
        return ()
    kept = tuple(v for v in dim.choices if static_ok(dim.value_requires.get(v, {}), model, hw))
    if dim.field != "engine":
        kept = Admission(box_facts(hw, model)).admitted(engines, dim.field, kept, {})
    return kept or dim.choices[:1]
