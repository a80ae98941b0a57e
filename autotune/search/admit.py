"""The engines' capability rules applied while a plan is sampled: which values of a dimension the engine
accepts given the box, the checkpoint and the values sampled so far (autotune/capability)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune import capability
from autotune.capability.facts import PHASE_FIELDS
from autotune.capability.rules import UNKNOWN, RuleTable, violations_of
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


@dataclass(frozen=True)
class Admission:
    """Box and checkpoint facts of one search; answers which values each engine accepts.

    Verdicts are memoised by the values of the facts the engine's rules read (`read_facts`): a search asks
    about the same few facts under many different partial plans (the sampled values no rule reads, the
    NCCL variables say, make no difference), and each fresh verdict evaluates the whole rule table."""

    box: dict[str, Any]
    _verdicts: dict = field(default_factory=dict, compare=False, repr=False)
    _read: dict = field(default_factory=dict, compare=False, repr=False)

    def facts(self, engine: str, known: dict[str, Any]) -> dict[str, Any]:
        base = {**self.box, **known, "engine": engine}
        return {**base, **capability.derived_facts(engine, base, self.box)}

    def refusal(self, engine: str, field: str, value: Any, known: dict[str, Any]) -> str:
        """Why `engine` refuses `field=value` with what is known so far ('' when no rule refuses it yet)."""
        facts = self.facts(engine, {**known, **fact_values(field, value, known)})
        table = capability.table(engine)
        if engine not in self._read:
            self._read[engine] = read_facts(table)
        key = (engine, tuple(facts.get(name, UNKNOWN) for name in self._read[engine]))
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable fact value: no memo
            key = None
        found = violations_of(table, facts)
        verdict = str(found[0]) if found else ""
        if key is not None:
            self._verdicts[key] = verdict
        return verdict

    def admitted(self, engines: tuple[str, ...], field: str, values: tuple[Any, ...], known: dict[str, Any]):
        """The values at least one of `engines` accepts."""
        return tuple(v for v in values if any(not self.refusal(e, field, v, known) for e in engines))
