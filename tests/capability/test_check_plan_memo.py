"""capability.check_plan keeps the last box's facts (capability/__init__.py _box_facts_of): its verdicts equal
those computed with fresh box facts, over random plans checked on two boxes in turn and on an equal copy."""

from __future__ import annotations

import dataclasses

from autotune import capability
from autotune.capability.facts import phase_facts
from autotune.capability.rules import violations_of
from autotune.catalog import load_model, load_preset
from autotune.search.random_plans import random_plans
from autotune.specs import Workload


def _fresh(plan, model, hw) -> str:
    """check_plan's verdict with the box facts computed anew (no memo)."""
    box, found = capability.box_facts(hw, model), []
    for name, phase in plan.phases.items():
        facts = {**phase_facts(plan.engine, plan, name, phase, box), "engine": plan.engine}
        found += violations_of(capability.table(plan.engine), facts, name if len(plan.phases) > 1 else "")
    return str(found[0]) if found else ""


def test_memoised_box_gives_fresh_verdicts():
    model = load_model("deepseek-v3")
    nvlink_free, hopper = load_preset("rtx-pro-6000-x8"), load_preset("h200-x8")
    plans = random_plans(model, nvlink_free, Workload(), 60, seed=11)
    copy = dataclasses.replace(hopper)
    verdicts = set()
    for plan in plans:
        for hw in (nvlink_free, hopper, copy, nvlink_free):  # the memo changes box at each step
            got = capability.check_plan(plan, model, hw)
            assert got == _fresh(plan, model, hw), (plan.describe(), hw.name)
            verdicts.add(got)
    assert len(verdicts) > 1  # some plan is refused on one of the boxes: the box facts matter
