"""Conformance: plans sampled by the search on every shipped preset x catalog model x engine break no
capability rule of the engine, and every emitted argv passes the flag table of the engine's real parser."""

import random

import pytest

from autotune import capability
from autotune.capability import ENGINE_VENDORS
from autotune.catalog import load_preset
from autotune.catalog.models import CATALOG, load_model
from autotune.catalog.presets import preset_names
from autotune.engines import build_launch
from autotune.search import SearchRequest, load_space
from autotune.search.admit import Admission
from autotune.search.sampler import sample_plan
from autotune.search.study import study_choices
from autotune.specs import MiTuneError, Workload

PLANS_PER_CASE = 25


PAIRS = [(p, e) for p in preset_names() for e in ENGINE_VENDORS if load_preset(p).gpu.vendor in ENGINE_VENDORS[e]]


def test_every_preset_has_an_engine_and_every_engine_a_preset():
    assert {p for p, _ in PAIRS} == set(preset_names()) and {e for _, e in PAIRS} == set(ENGINE_VENDORS)


@pytest.mark.parametrize(("preset", "engine"), PAIRS)
def test_sampled_plans_launch_without_breaking_a_rule(preset, engine):
    space, hw = load_space(), load_preset(preset)
    emitted = 0
    for name in CATALOG:
        model = load_model(name)
        req = SearchRequest(model, hw, Workload(), space, hw.num_gpus, engine=engine)
        try:
            choices = study_choices(req)
        except MiTuneError as exc:  # the engine cannot serve this model here at all: said on one line
            assert str(exc).startswith(f"no engine can serve {name}") and "\n" not in str(exc)
            continue
        admission, rng = Admission(capability.box_facts(hw, model)), random.Random(f"{preset}/{name}/{engine}")
        pick = rng.choice
        for _ in range(PLANS_PER_CASE):
            plan, reason = sample_plan(space, choices, lambda _n, o, pick=pick: pick(list(o)), hw.num_gpus, admission)
            if plan is None:
                assert reason
                continue
            assert capability.check_plan(plan, model, hw) == "", plan.describe()
            launch = build_launch(plan, model, hw)  # validates every argv against the pinned flag tables
            assert launch.processes
            emitted += 1
    assert emitted >= PLANS_PER_CASE
