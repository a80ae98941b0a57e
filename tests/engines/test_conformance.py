"""Conformance: plans sampled by the search on every shipped preset x catalog model x engine x mode break no
capability rule of the engine, every emitted argv passes the flag table of the engine's real parser, and every
launch as a whole (all its processes together) passes what the engines check across processes and flags
(launch_rules.py, read from the emitted argv, not from the plan)."""

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
from tests.capability.test_plan_rules import PAIRS as RULE_PAIRS
from tests.engines.launch_rules import launch_problems

PLANS_PER_CASE = 25


# vllm-ascend: its prefill/decode split needs a Mooncake launch mi-tune does not emit (capability rule), so it is
# sampled aggregated only
LAUNCH_CASES = [
    (p, e, m)
    for p in preset_names()
    for e in ENGINE_VENDORS
    if load_preset(p).gpu.vendor in ENGINE_VENDORS[e]
    for m in ("aggregated", "disaggregated")
    if not (e == "vllm-ascend" and m == "disaggregated")
]


def test_every_preset_has_an_engine_and_every_engine_a_preset():
    assert {p for p, _, _ in LAUNCH_CASES} == set(preset_names())
    assert {e for _, e, _ in LAUNCH_CASES} == set(ENGINE_VENDORS)


@pytest.mark.parametrize(("preset", "engine", "mode"), LAUNCH_CASES)
def test_sampled_plans_launch_without_breaking_a_rule(preset, engine, mode):
    space, hw = load_space(), load_preset(preset)
    emitted = 0
    for name in CATALOG:
        model = load_model(name)
        req = SearchRequest(model, hw, Workload(), space, hw.num_gpus, engine=engine)
        try:
            choices = {**study_choices(req), "mode": (mode,)}
        except MiTuneError as exc:  # the engine cannot serve this model here at all: said on one line
            assert str(exc).startswith(f"no engine can serve {name}") and "\n" not in str(exc)
            continue
        admission, rng = Admission(capability.box_facts(hw, model)), random.Random(f"{preset}/{name}/{engine}/{mode}")
        pick = rng.choice
        for _ in range(PLANS_PER_CASE):
            plan, reason = sample_plan(space, choices, lambda _n, o, pick=pick: pick(list(o)), hw.num_gpus, admission)
            if plan is None:
                assert reason
                continue
            assert capability.check_plan(plan, model, hw) == "", plan.describe()
            launch = build_launch(plan, model, hw)  # validates every argv against the pinned flag tables
            assert launch.processes
            assert launch_problems(launch, model, hw) == [], plan.describe()
            emitted += 1
    assert emitted >= PLANS_PER_CASE


def _unchecked_launch(plan, model, hw, monkeypatch):
    """The launch an emitter would build if it did not refuse plans that break a rule."""
    monkeypatch.setattr(capability, "require_plan", lambda *_: None)
    return build_launch(plan, model, hw)


@pytest.mark.parametrize(("plan", "model", "hw", "is_refused", "words"), RULE_PAIRS)
def test_recorded_pair_at_launch_level(plan, model, hw, is_refused, words, monkeypatch):
    """Each recorded refused/admitted pair of the whole-plan rules, emitted: the refused plan's launch shows the
    problem in its argv, the admitted one's launch has none."""
    model = load_model(model)
    if not is_refused:
        assert launch_problems(build_launch(plan, model, hw), model, hw) == []
        return
    with pytest.raises(MiTuneError, match="plan breaks an engine rule"):
        build_launch(plan, model, hw)
    assert launch_problems(_unchecked_launch(plan, model, hw, monkeypatch), model, hw)
