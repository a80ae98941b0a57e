"""Engine capability rules, one table per engine version: what a plan may ask of an engine on a box, model
and checkpoint. Search filters values with them, emitters refuse a plan that breaks one, estimate explains.

Layer: imports specs only; search, engines, api and report read it (DESIGN.md "Engine capability rules").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from autotune.capability.engine_profile import EngineProfile
from autotune.capability.facts import (
    PHASE_FIELDS,
    box_facts,
    compute_capability,
    derived_facts,
    phase_facts,
    phase_field_facts,
)
from autotune.capability.profiles import ENGINES, PROFILES, profile
from autotune.capability.rules import Rule, RuleTable, Violation, admits, violations_of
from autotune.capability.vendors import ENGINE_VENDORS, format_rules, platform_rules, unserved_vendor, vendor_rule
from autotune.specs import HardwareProfile, MiTuneError, ModelSpec, PhasePlan, Plan

ENGINE_TABLES = tuple(p.rules for p in PROFILES.values())


def _with_engine_rules(t: RuleTable) -> RuleTable:
    """The engine-level rules of vendors.py (which vendor it runs on, which platform options it expresses)
    added to the engine version's own table, so every reader sees them."""
    return RuleTable(
        t.engine, t.version, (vendor_rule(t.engine), *format_rules(t.engine), *platform_rules(t.engine), *t.rules)
    )


TABLES: dict[str, RuleTable] = {t.engine: _with_engine_rules(t) for t in ENGINE_TABLES}


def table(engine: str) -> RuleTable:
    if engine not in TABLES:
        raise MiTuneError(f"engine {engine!r}: no capability rules (have {', '.join(TABLES)})")
    return TABLES[engine]


_LAST_BOX: list = [(None, None, {})]  # the last (hw, model) plan_violations saw and their box_facts, one tuple


def _box_facts_of(hw: HardwareProfile, model: ModelSpec) -> dict[str, Any]:
    """box_facts, kept for the last (hw, model) objects: a search checks thousands of plans on one box and
    checkpoint (frozen contracts: the same objects give the same facts). Callers only read the dict."""
    last = _LAST_BOX[0]  # read once: a thread that replaces it cannot pair one box's objects with another's facts
    if last[0] is not hw or last[1] is not model:
        last = _LAST_BOX[0] = (hw, model, box_facts(hw, model))
    return last[2]


def plan_violations(plan: Plan, model: ModelSpec, hw: HardwareProfile) -> list[Violation]:
    """Every rule of the plan's engine that the plan breaks on this box and checkpoint."""
    rules, box = table(plan.engine), _box_facts_of(hw, model)
    found = []
    for name, phase in plan.phases.items():
        facts = phase_facts(plan.engine, plan, name, phase, box)
        found += violations_of(rules, {**facts, "engine": plan.engine}, name if len(plan.phases) > 1 else "")
    return found


def check_plan(plan: Plan, model: ModelSpec, hw: HardwareProfile) -> str:
    """Why the engine would refuse (or silently not run) the plan, or '' when every rule holds."""
    found = plan_violations(plan, model, hw)
    return str(found[0]) if found else ""


def require_plan(plan: Plan, model: ModelSpec, hw: HardwareProfile) -> None:
    """MiTuneError naming the first broken rule."""
    reason = check_plan(plan, model, hw)
    if reason:
        raise MiTuneError(f"plan breaks an engine rule: {reason}")


def serving_engines(engines: tuple[str, ...], model: ModelSpec, hw: HardwareProfile) -> tuple[str, ...]:
    """The engines whose rules let them serve `model` on `hw` at all."""
    box = box_facts(hw, model)
    return tuple(e for e in engines if admits(table(e), "engine", e, {**box, "engine": e}) is None)


def refusal(engine: str, model: ModelSpec, hw: HardwareProfile) -> str:
    """Why `engine` cannot serve `model` on `hw` ('' when it can)."""
    found = admits(table(engine), "engine", engine, {**box_facts(hw, model), "engine": engine})
    return str(found) if found else ""


def value_admitted(engine: str, field: str, value: Any, facts: dict[str, Any]) -> Violation | None:
    """The first rule that refuses `field=value` for `engine` given the facts known so far."""
    return admits(table(engine), field, value, facts)


ALLREDUCE_RMSNORM = "fusion.allreduce_rmsnorm"


def allreduce_rmsnorm_on(engine: str, phase: PhasePlan, model: ModelSpec, hw: HardwareProfile) -> bool:
    """Whether the engine runs the fused all-reduce + RMSNorm for this phase: the plan's fusion.allreduce_rmsnorm or,
    where the plan leaves it unset, the engine's default (engine profile allreduce_rmsnorm_default); either way only
    where the engine's rules admit it (their effect is `ignored`: elsewhere the engine runs it unfused). The one
    place a plan's fusion is resolved: the performance model (allreduce_rmsnorm_max_tokens) and the plan the
    emitters and the report show (with_engine_defaults) read it."""
    asked = phase.fusion.get("allreduce_rmsnorm")
    if asked is None:
        asked = profile(engine).allreduce_rmsnorm_default
    if not asked:
        return False
    rules, box = profile(engine).rules, _box_facts_of(hw, model)  # the engine version's own rules
    names = {n for r in rules.by_field.get(ALLREDUCE_RMSNORM, ()) for n in (*r.when, *r.needs)}
    if names <= box.keys() | PHASE_FIELDS.keys():  # the facts these rules read, without building every phase fact
        facts = {n: box[n] if n in box else PHASE_FIELDS[n](phase) for n in names}
    else:
        values = phase_field_facts(phase)
        facts = {**box, **values, **derived_facts(engine, values, box), "engine": engine}
    return admits(rules, ALLREDUCE_RMSNORM, True, facts) is None


def kv_cache_dtype_on(engine: str, phase: PhasePlan, model: ModelSpec, arch: str) -> str:
    """The KV-cache dtype the engine runs a phase with: the plan's kernels.kv_cache_dtype, or where it is `auto` on a
    DSA model (an absorbed-MLA layer attending an indexer's top-k) of a family and arch the engine profile names
    (dsa_fp8_kv_families / dsa_fp8_kv_archs), the engine's FP8 default; `auto` (the checkpoint's) elsewhere. The one
    place a plan's KV dtype is resolved: the performance model (perf/precision.py) and the plan the emitters and the
    report show (with_engine_defaults) read it."""
    dtype = phase.kernels.kv_cache_dtype
    if dtype != "auto":
        return dtype
    p = profile(engine)
    if arch not in p.dsa_fp8_kv_archs or model.family not in p.dsa_fp8_kv_families:
        return dtype
    if any(layer.attention.kind == "mla-dsa" and layer.attention.attended_cap for layer in model.layers):
        return "fp8"
    return dtype


def allreduce_rmsnorm_max_tokens(
    engine: str, phase: PhasePlan, model: ModelSpec, hw: HardwareProfile, row_bytes: int
) -> float:
    """The largest step (tokens per all-reduce group) that runs the fused all-reduce + RMSNorm (0: none), rows of
    `row_bytes` each: the engine profile's size limit (allreduce_rmsnorm_max_tokens) where allreduce_rmsnorm_on; an
    engine with no limit in its profile (vllm-ascend) fuses at any size when the plan asks for it."""
    if phase.tp == 1 or not allreduce_rmsnorm_on(engine, phase, model, hw):
        return 0
    limit = profile(engine).allreduce_rmsnorm_max_tokens
    if limit is None:
        return float("inf")
    world = phase.tp * phase.dp if profile(engine).tp_spans_dp else phase.tp
    return limit(hw.gpu.arch, world, row_bytes)


def with_engine_defaults(plan: Plan, model: ModelSpec, hw: HardwareProfile) -> Plan:
    """The plan as the engine runs it: a phase that leaves fusion.allreduce_rmsnorm unset where the engine turns the
    fusion on by default shows it on (allreduce_rmsnorm_on), and one that leaves kernels.kv_cache_dtype `auto` where
    the engine resolves it to FP8 shows fp8 (kv_cache_dtype_on), so best.yaml, the launch and the report say what
    runs."""
    phases = {}
    for name, phase in plan.phases.items():
        if "allreduce_rmsnorm" not in phase.fusion and allreduce_rmsnorm_on(plan.engine, phase, model, hw):
            phase = dataclasses.replace(phase, fusion={**phase.fusion, "allreduce_rmsnorm": True})
        kv = kv_cache_dtype_on(plan.engine, phase, model, hw.gpu.arch)
        if kv != phase.kernels.kv_cache_dtype:
            phase = dataclasses.replace(phase, kernels=dataclasses.replace(phase.kernels, kv_cache_dtype=kv))
        if phase is not plan.phases[name]:
            phases[name] = phase
    return dataclasses.replace(plan, phases={**plan.phases, **phases}) if phases else plan


__all__ = [
    "ALLREDUCE_RMSNORM",
    "allreduce_rmsnorm_max_tokens",
    "allreduce_rmsnorm_on",
    "with_engine_defaults",
    "kv_cache_dtype_on",
    "ENGINES",
    "ENGINE_VENDORS",
    "PROFILES",
    "EngineProfile",
    "TABLES",
    "Rule",
    "RuleTable",
    "Violation",
    "box_facts",
    "check_plan",
    "compute_capability",
    "derived_facts",
    "phase_facts",
    "plan_violations",
    "profile",
    "refusal",
    "require_plan",
    "serving_engines",
    "table",
    "unserved_vendor",
    "value_admitted",
]
