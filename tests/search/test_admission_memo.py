"""The incremental, memoised verdicts of search/admit.py Admission are what a fresh evaluation of the whole rule
table (rules.violations_of) says, for every question random sampling asks."""

from __future__ import annotations

import random

import pytest

from autotune import capability
from autotune.capability.rules import violations_of
from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space
from autotune.search.admit import Admission, fact_values
from autotune.search.sampler import CachedAdmission, sample_plan
from autotune.search.study import study_choices
from autotune.specs import Workload


class Checked(Admission):
    """An Admission that checks each answer against violations_of over all the facts."""

    def _verdict(self, engine, field, value, known, base, before):
        got = super()._verdict(engine, field, value, known, base, before)
        facts = self.facts(engine, {**known, **fact_values(field, value, known)})
        found = violations_of(capability.table(engine), facts)
        assert got == (str(found[0]) if found else ""), (engine, field, value)
        self.asked += 1
        self.refused += bool(got)
        return got

    def _broken_before(self, engine, base):
        """Every rule broken before a value (memoised, or stored by the verdict of the value taken before) is
        one violations_of reports, in its order."""
        found = super()._broken_before(engine, base)
        compiled = self._compiled(engine)
        expected = [str(v) for v in violations_of(capability.table(engine), base)]
        assert [compiled.verdict(i, base) for i in found] == expected, engine
        self.before_checked += 1
        return found


@pytest.mark.parametrize(
    "model_name,preset", [("deepseek-v3", "rtx-pro-6000-x8"), ("deepseek-v4.1-flash", "rtx-pro-6000-x8"),
                          ("qwen3-235b-a22b", "h200-x8"),
                          ("deepseek-v4.1-flash", "h200-x8")],  # SGLang's V4.1 rules: it refuses V4.1 on sm_120
)  # fmt: skip
def test_incremental_verdicts_equal_the_whole_table(model_name, preset):
    space, model, hw = load_space(), load_model(model_name), load_preset(preset)
    choices = study_choices(SearchRequest(model, hw, Workload(), space, 8))
    checked = Checked(capability.box_facts(hw, model))
    checked.asked = checked.refused = checked.before_checked = 0
    admission, rng = CachedAdmission(checked), random.Random(model_name)
    plans = 0
    for _ in range(60):
        plan, _ = sample_plan(space, choices, lambda name, options: rng.choice(list(options)), 8, admission)
        plans += plan is not None
    assert checked.asked > 500 and checked.refused > 20 and plans > 10  # the check saw refusals and plans
    assert checked.before_checked > 100


class _Reads(dict):
    """A dict that records the keys read from it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = set()

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def test_derived_facts_read_only_the_listed_inputs():
    """CachedAdmission keys a verdict by the rules' facts and DERIVED_INPUTS: a derived fact reading another
    plan fact would make two different questions share one answer."""
    from autotune.capability.facts import derived_facts
    from autotune.search.admit import DERIVED_INPUTS

    box = capability.box_facts(load_preset("h200-x8"), load_model("qwen3-235b-a22b"))
    values = _Reads({n: 2 for n in DERIVED_INPUTS} | {"kernels.gemm_dtype": "fp8", "mode": "aggregated"})
    for engine in ("vllm", "sglang"):
        assert derived_facts(engine, values, box)  # every derived fact is computed from these inputs
    assert values.read <= set(DERIVED_INPUTS), values.read - set(DERIVED_INPUTS)


def test_cached_answers_equal_fresh_ones():
    """Every answer CachedAdmission gives from its memo is what a fresh Admission says for that `known`."""
    space, model, hw = load_space(), load_model("deepseek-v3"), load_preset("rtx-pro-6000-x8")
    choices = study_choices(SearchRequest(model, hw, Workload(), space, 8))
    box = capability.box_facts(hw, model)
    fresh, calls = Admission(box), []

    class Recording(CachedAdmission):
        def _ask(self, method, args, known):
            got = super()._ask(method, args, known)
            calls.append((method, args, dict(known), got))
            return got

    admission, rng = Recording(Admission(box)), random.Random(7)
    for _ in range(40):
        sample_plan(space, choices, lambda name, options: rng.choice(list(options)), 8, admission)
    assert len(calls) > 300 and len(admission._cache) < len(calls)  # the memo answered some questions
    for method, args, known, got in calls:
        assert getattr(fresh, method)(*args, known) == got, (method, args)
