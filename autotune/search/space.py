"""Search space: dimensions declared in search_spaces/*.yaml, filtered by what the box and model allow."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from autotune.capability import box_facts
from autotune.search.admit import Admission
from autotune.specs import HardwareProfile, ModelSpec, SpecError, read_document
from autotune.specs.io import check_schema
from autotune.specs.plan import ENGINES

SCOPES = ("deployment", "phase")
PHASES = ("both", "prefill", "decode")
STATIC_FACTS = ("feature", "arch", "interconnect", "model", "checkpoint", "kv", "attention")


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
        return next(d for d in self.dimensions if d.name == name)

    def names(self, scope: str) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions if d.scope == scope)


def default_space_path() -> Path:
    return Path(str(resources.files("autotune.search_spaces").joinpath("default.yaml")))


def load_space(path: str | Path | None = None) -> Space:
    path = Path(path) if path else default_space_path()
    data = read_document(path)
    check_schema(data, "space", str(path))
    dims = data.get("dimensions")
    if not isinstance(dims, list) or not dims:
        raise SpecError(f"{path}: dimensions: expected a non-empty list")
    parsed = tuple(_dimension(d, f"{path}: dimensions[{i}]") for i, d in enumerate(dims))
    names = [d.name for d in parsed]
    for required in ("engine", "mode", "tp"):
        if required not in names:
            raise SpecError(f"{path}: dimensions: missing the '{required}' dimension")
    return Space(name=str(data.get("name", path.stem)), source=str(path), dimensions=parsed)


def _dimension(raw: Any, where: str) -> Dimension:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping")
    unknown = set(raw) - {"name", "scope", "field", "choices", "requires", "value_requires", "when", "phases"}
    if unknown:
        raise SpecError(f"{where}: unknown key '{sorted(unknown)[0]}'")
    for key in ("name", "field", "choices"):
        if key not in raw:
            raise SpecError(f"{where}: missing '{key}'")
    scope = raw.get("scope", "phase")
    if scope not in SCOPES:
        raise SpecError(f"{where}.scope: expected one of {', '.join(SCOPES)}, got {scope!r}")
    choices = raw["choices"]
    if not isinstance(choices, list) or not choices:
        raise SpecError(f"{where}.choices: expected a non-empty list")
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
