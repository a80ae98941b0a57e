"""The engines' capability rules applied while a plan is sampled: which values of a dimension the engine
accepts given the box, the checkpoint and the values sampled so far (autotune/capability)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from autotune import capability
from autotune.capability.facts import PHASE_FIELDS
from autotune.capability.rules import UNKNOWN, RuleTable, Violation, broken
from autotune.specs import PhasePlan
from autotune.specs.plan import expert_parallel_size

_DEFAULT_PHASE = PhasePlan(gpus=(0,))


def parse_speculative(value: str) -> dict[str, Any]:
    """'none' or 'METHOD/K' (a space choice) -> Speculative fields."""
    method, _, tokens = str(value).partition("/")
    return {"method": method, "draft_tokens": int(tokens or 0)}


def fact_values(field: str, value: Any, known: dict[str, Any]) -> dict[str, Any]:
    """The plan facts a dimension value sets (transformed fields become what the plan will hold)."""
    if field == "ep":  # expert_parallel: true -> experts over every tp*dp rank
        return {"ep": expert_parallel_size(known.get("tp", 1), known.get("dp", 1), bool(value))}
    if field == "speculative":
        spec = parse_speculative(value)
        return {"speculative.method": spec["method"], "speculative.draft_tokens": spec["draft_tokens"]}
    return {field: value}


def default_facts(fields: set[str]) -> dict[str, Any]:
    """Plan defaults of the phase fields no sampled dimension sets (the engine default stays); a dimension on a
    whole group (`speculative` sets speculative.method and .draft_tokens) leaves its facts unknown until sampled."""
    return {
        name: get(_DEFAULT_PHASE)
        for name, get in PHASE_FIELDS.items()
        if name not in fields and name.split(".")[0] not in fields
    }


def read_facts(table: RuleTable) -> tuple[str, ...]:
    """Every fact name a rule table reads: the fields its rules govern and the facts their conditions name
    (rules.violations_of reads nothing else), so a verdict depends on these facts' values alone."""
    names = dict.fromkeys(table.by_field)
    for rule in table.rules:
        names.update(dict.fromkeys((*rule.when, *rule.needs)))
        for condition in (*rule.when.values(), *rule.needs.values()):  # {"same_as": "peer.x"} reads peer.x too
            if isinstance(condition, dict) and "same_as" in condition:
                names[condition["same_as"]] = None
    return tuple(names)


# The plan facts capability.derived_facts and fact_values read besides the box (capability/facts.py:72-88,
# fact_values above); tests/search/test_admission_memo.py checks derived_facts reads no other.
DERIVED_INPUTS = (
    "kernels.gemm_dtype",
    "tp",
    "dp",
    "batching.max_running",
    "batching.chunked_prefill_tokens",
    "batching.cuda_graph_max_bs",
    "dcp",
)


def _rule_reads(rule) -> frozenset[str]:
    """The facts one rule's verdict reads: its field, its conditions' facts and their `same_as` facts."""
    names = {rule.field, *rule.when, *rule.needs}
    for condition in (*rule.when.values(), *rule.needs.values()):
        if isinstance(condition, dict) and "same_as" in condition:
            names.add(condition["same_as"])
    return frozenset(names)


@dataclass(frozen=True)
class _Compiled:
    """An engine's rule table in rules.violations_of's order, with the facts each rule reads."""

    table: RuleTable
    rules: tuple  # (field, rule), in violations_of's order
    readers: dict  # fact name -> indices of the rules that read it
    read: tuple[str, ...]  # read_facts(table)
    by_field: tuple  # (field, indices of its rules)

    @classmethod
    def of(cls, table: RuleTable) -> _Compiled:
        rules = tuple((name, rule) for name, group in table.by_field.items() for rule in group)
        readers: dict[str, list[int]] = {}
        for i, (_, rule) in enumerate(rules):
            for name in _rule_reads(rule):
                readers.setdefault(name, []).append(i)
        by_field, i = [], 0
        for name, group in table.by_field.items():
            by_field.append((name, tuple(range(i, i + len(group)))))
            i += len(group)
        return cls(table, rules, {k: tuple(v) for k, v in readers.items()}, read_facts(table), tuple(by_field))

    def breaks(self, i: int, facts: dict[str, Any]) -> bool:
        """Whether rule i is one rules.violations_of reports for these facts."""
        name, rule = self.rules[i]
        value = facts.get(name, UNKNOWN)
        return value is not UNKNOWN and rule.governs(value) and bool(broken(rule, facts))

    def verdict(self, i: int | None, facts: dict[str, Any]) -> str:
        return "" if i is None else str(Violation(self.table, self.rules[i][1], facts[self.rules[i][0]]))


def _same_fact(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


@dataclass(frozen=True)
class Admission:
    """Box and checkpoint facts of one search; answers which values each engine accepts.

    A verdict is incremental: the rules broken by what is known before the value are found once for all the
    values offered, memoised by the values of the facts the engine's rules read (`read_facts`: a search asks
    about the same few facts under many partial plans; each verdict also stores the rules its facts break, so
    the next dimension finds the value it took already done), and only the rules that read a fact the value sets or
    changes are evaluated again; the first broken rule in the table's order is the verdict, as
    rules.violations_of's first would be (tests/search/test_admission_memo.py)."""

    box: dict[str, Any]
    _read: dict = field(default_factory=dict, compare=False, repr=False)  # engine -> _Compiled
    _before: dict = field(default_factory=dict, compare=False, repr=False)  # rules broken before a value

    def facts(self, engine: str, known: dict[str, Any]) -> dict[str, Any]:
        base = {**self.box, **known, "engine": engine}
        return {**base, **capability.derived_facts(engine, base, self.box)}

    def _compiled(self, engine: str) -> _Compiled:
        if engine not in self._read:
            self._read[engine] = _Compiled.of(capability.table(engine))
        return self._read[engine]

    def verdict_reads(self, engines: tuple[str, ...]) -> tuple[str, ...]:
        """The facts of `known` that refusal and admitted for `engines` read: their rules' facts (read_facts) and
        the inputs of the derived facts (DERIVED_INPUTS); a verdict is a function of their values (and types)."""
        names = dict.fromkeys(DERIVED_INPUTS)
        for engine in engines:
            names.update(dict.fromkeys(self._compiled(engine).read))
        return tuple(names)

    def _key(self, engine: str, facts: dict[str, Any]) -> tuple | None:
        key = (engine, tuple(map(facts.get, self._compiled(engine).read, repeat(UNKNOWN))))
        try:
            hash(key)
        except TypeError:  # an unhashable fact value: no memo
            return None
        return key

    def _broken_before(self, engine: str, base: dict[str, Any]) -> tuple[int, ...]:
        """Indices of the rules the facts known before a value break (memoised by the facts rules read)."""
        compiled, key = self._compiled(engine), self._key(engine, base)
        found = self._before.get(key) if key is not None else None
        if found is None:
            found = tuple(
                i
                for name, indices in compiled.by_field
                if base.get(name, UNKNOWN) is not UNKNOWN  # as violations_of: rules of unknown fields are skipped
                for i in indices
                if compiled.breaks(i, base)
            )
            if key is not None:
                self._before[key] = found
        return found

    def refusal(self, engine: str, field: str, value: Any, known: dict[str, Any]) -> str:
        """Why `engine` refuses `field=value` with what is known so far ('' when no rule refuses it yet)."""
        base = self.facts(engine, known)
        return self._verdict(engine, field, value, known, base, self._broken_before(engine, base))

    def _verdict(self, engine: str, field: str, value: Any, known: dict, base: dict, before: tuple[int, ...]) -> str:
        """refusal, given the facts known before the value (`base`) and the rules they break (`before`)."""
        compiled = self._compiled(engine)
        set_here = fact_values(field, value, known)
        merged = {**self.box, **known, **set_here, "engine": engine}
        derived = capability.derived_facts(engine, merged, self.box)
        facts = {**merged, **derived}  # self.facts(engine, known + the value's facts)
        # only the value's facts and the facts derived from them can differ from `base`
        changed = [k for k in (*set_here, *derived) if k not in base or not _same_fact(facts[k], base[k])]
        again = {i for name in changed for i in compiled.readers.get(name, ())}
        broken = (*(i for i in before if i not in again), *(i for i in again if compiled.breaks(i, facts)))
        key = self._key(engine, facts)  # these facts are the next dimension's `base` when the value is taken
        if key is not None and key not in self._before:
            self._before[key] = tuple(sorted(broken))
        return compiled.verdict(min(broken, default=None), facts)

    def admitted(self, engines: tuple[str, ...], field: str, values: tuple[Any, ...], known: dict[str, Any]):
        """The values at least one of `engines` accepts."""
        bases = {e: self.facts(e, known) for e in engines}
        before = {e: self._broken_before(e, base) for e, base in bases.items()}
        return tuple(
            v for v in values if any(not self._verdict(e, field, v, known, bases[e], before[e]) for e in engines)
        )
