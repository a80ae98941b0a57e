"""Capability rules: which plan values an engine version accepts on a box, model and checkpoint.

A rule governs one plan field (`kernels.moe`, `comm.allreduce`, `pp`, ... or `engine`) for some of its
values, and says what must hold for the engine to start with that value and run it as the plan says: it
raises at start-up otherwise, or silently ignores the value (which the performance model would still
credit). Conditions are data over facts (see facts.py):

    list        -> the fact is one of these       {"cc": [9.0, 10.0]}
    {"min", "max"} -> a range, inclusive          {"cc": {"min": 9.0, "max": 10.9}}
    {"not": [..]}  -> the fact is none of these   {"family": {"not": ["deepseek_v41"]}}
    {"has": x}     -> a tuple fact contains x     {"draft_heads": {"has": "mtp"}}
    {"same_as": f} -> equals another fact         {"kernels.kv_cache_dtype": {"same_as": "peer.kernels.kv_cache_dtype"}}
    scalar      -> equality                       {"p2p": True}

Facts cover one phase, the box and checkpoint, and (disaggregated plans) the other phase as `peer.<field>`, so a
rule can tie dimensions of one phase together (two-batch overlap needs its dispatcher) or the two phases together
(the KV connector compares what both sides hold).

`when` narrows where the rule applies; `needs` must then hold. A fact that is not known yet (a dimension
not sampled so far) leaves the rule undecided, so partial plans can be screened while they are sampled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ANY_VALUE = ()  # Rule.values: the rule applies whatever the field holds


@dataclass(frozen=True)
class Rule:
    field: str  # plan field it governs (dotted), or "engine"
    values: tuple[Any, ...]  # values of the field it governs; () = every value
    needs: Mapping[str, Any]  # conditions that must hold
    source: str  # engine source file:line the rule was read from
    why: str  # what breaks, in a few words ("FLASHINFER_MLA needs compute capability 10.x")
    when: Mapping[str, Any] = field(default_factory=dict)  # conditions under which the rule applies
    effect: str = "raises"  # raises (start-up fails) | ignored (the engine silently runs something else)

    def governs(self, value: Any) -> bool:
        return not self.values or any(_same(value, v) for v in self.values)


@dataclass(frozen=True)
class RuleTable:
    engine: str
    version: str
    rules: tuple[Rule, ...]
    by_field: Mapping[str, tuple[Rule, ...]] = field(init=False)

    def __post_init__(self) -> None:
        index: dict[str, list[Rule]] = {}
        for rule in self.rules:
            index.setdefault(rule.field, []).append(rule)
        object.__setattr__(self, "by_field", {k: tuple(v) for k, v in index.items()})

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"


@dataclass(frozen=True)
class Violation:
    table: RuleTable
    rule: Rule
    value: Any
    where: str = ""  # phase name, when the plan has several

    def __str__(self) -> str:
        where = f"{self.where}: " if self.where else ""
        effect = "" if self.rule.effect == "raises" else " (the engine would silently ignore it)"
        return (
            f"{where}{self.table.label}: {self.rule.field}={_fmt(self.value)}: {self.rule.why}{effect} "
            f"[{self.rule.source}]"
        )


def _same(a: Any, b: Any) -> bool:
    return a == b and type(a) is type(b) or (isinstance(a, (int, float)) and not isinstance(a, bool) and a == b)


def _fmt(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


UNKNOWN = object()


def holds(condition: Any, value: Any, facts: Mapping[str, Any] | None = None) -> bool | None:
    """Whether `value` meets `condition`; None when the value (or the fact it is compared with) is not known yet."""
    if value is UNKNOWN:
        return None
    if isinstance(condition, list):
        return any(_same(value, c) for c in condition)
    if isinstance(condition, Mapping):
        if "same_as" in condition:
            other = (facts or {}).get(condition["same_as"], UNKNOWN)
            return None if other is UNKNOWN else _same(value, other)
        if "not" in condition:
            return not any(_same(value, c) for c in condition["not"])
        if "has" in condition:
            return condition["has"] in value
        lo, hi = condition.get("min", float("-inf")), condition.get("max", float("inf"))
        return lo <= value <= hi
    return _same(value, condition)


def all_hold(conditions: Mapping[str, Any], facts: Mapping[str, Any]) -> bool | None:
    """True / False, or None when some fact is unknown and none is false."""
    verdict: bool | None = True
    for fact, condition in conditions.items():
        ok = holds(condition, facts.get(fact, UNKNOWN), facts)
        if ok is False:
            return False
        if ok is None:
            verdict = None
    return verdict


def broken(rule: Rule, facts: Mapping[str, Any]) -> bool | None:
    """True when the rule applies and its needs fail; None when undecided with what is known."""
    applies = all_hold(rule.when, facts)
    if applies is False:
        return False
    needs = all_hold(rule.needs, facts)
    if needs is False:
        return None if applies is None else True
    return False if needs else None


def violations_of(table: RuleTable, facts: Mapping[str, Any], where: str = "") -> list[Violation]:
    """Rules of `table` that the facts (a whole phase, every field known) break."""
    found = []
    for name, rules in table.by_field.items():
        value = facts.get(name, UNKNOWN)
        if value is UNKNOWN:
            continue
        found += [Violation(table, r, value, where) for r in rules if r.governs(value) and broken(r, facts)]
    return found


def admits(table: RuleTable, name: str, value: Any, facts: Mapping[str, Any]) -> Violation | None:
    """The first rule that certainly refuses `name=value` given the facts known so far, else None."""
    known = {**facts, name: value}
    for rule in table.by_field.get(name, ()):
        if rule.governs(value) and broken(rule, known):
            return Violation(table, rule, value)
    return None
