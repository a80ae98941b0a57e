"""Every dimension of the default search space is seen by the performance model: for each, some shipped
preset, catalog model and sampled plan exist where changing only that dimension (to a value the engine's rules
admit) changes the prediction. A dimension the model cannot see fails here (DESIGN.md, "The performance model")."""

import dataclasses
import random

import pytest

from autotune import capability
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.search import SearchRequest, evaluate, load_space
from autotune.search.admit import Admission
from autotune.search.explain import with_value
from autotune.search.sampler import LAYOUT_FIELDS, sample_plan
from autotune.search.study import study_choices
from autotune.specs import Workload

SPACE = load_space()
# where to look first for each kind of dimension: (preset, model, workload)
CASES = [
    ("rtx-pro-6000-x8", "llama-3.1-70b", Workload(isl=2048, osl=256)),
    ("rtx-pro-6000-x8", "deepseek-v3", Workload(isl=2048, osl=256)),
    ("rtx-pro-6000-x8", "deepseek-v4.1-flash", Workload(isl=4096, osl=1024)),
    ("h200-x8", "deepseek-v3", Workload(isl=2048, osl=256)),
    ("h200-x8", "qwen3-235b-a22b", Workload(isl=2048, osl=256)),
    ("l40s-x8", "qwen3-235b-a22b", Workload(isl=1024, osl=256, concurrency=16)),
    ("rtx-4090-x8", "llama-3.1-70b", Workload(isl=1024, osl=128, concurrency=8)),
    ("atlas-800i-a2", "qwen3-235b-a22b-w8a8", Workload(isl=2048, osl=256)),  # vllm-ascend dimensions
    ("atlas-800i-a2", "deepseek-v4-flash", Workload(isl=2048, osl=256)),  # shared experts on Ascend
]
SAMPLES_PER_CASE = 60
SKIPPED = {"mode", "prefill_share"}  # they reshape the whole deployment: every sampled pair differs
PHASE_DIMS = [d for d in SPACE.dimensions if d.scope == "phase" and d.field not in LAYOUT_FIELDS]


def _samples():
    for preset, model_name, workload in CASES:
        hw, model = load_preset(preset), load_model(model_name)
        req = SearchRequest(model, hw, workload, SPACE, hw.num_gpus)
        choices, admission = study_choices(req), Admission(capability.box_facts(hw, model))
        rng = random.Random(preset + model_name)
        for _ in range(SAMPLES_PER_CASE):
            plan, _ = sample_plan(SPACE, choices, lambda _n, o, r=rng: r.choice(list(o)), hw.num_gpus, admission)
            if plan is not None:
                yield plan, model, hw, workload, choices


@pytest.fixture(scope="module")
def samples():
    return list(_samples())


def _seen(dim, samples) -> bool:
    for plan, model, hw, workload, choices in samples:
        base = evaluate(plan, model, hw, workload)
        if not base.feasible:
            continue
        for phase in plan.phases:
            if not dim.applies_to(phase):
                continue
            for value in choices.get(dim.name, ()):
                other = with_value(plan, phase, dim, value)
                if other is None or other == plan or capability.check_plan(other, model, hw):
                    continue
                changed = evaluate(other, model, hw, workload)
                if changed.feasible and abs(changed.total_tok_s - base.total_tok_s) > 1e-6 * base.total_tok_s:
                    return True
    return False


@pytest.mark.parametrize("dim", PHASE_DIMS, ids=lambda d: d.name)
def test_changing_only_this_dimension_changes_the_prediction(dim, samples):
    assert _seen(dim, samples), f"no sampled plan where {dim.name} changes the prediction: the model cannot see it"


def test_the_engine_changes_the_prediction(samples):
    plan, model, hw, workload, _ = next(s for s in samples if s[0].engine == "sglang")
    other = dataclasses.replace(plan, engine="vllm")
    assert evaluate(plan, model, hw, workload).total_tok_s != evaluate(other, model, hw, workload).total_tok_s


def test_every_dimension_is_covered():
    names = {d.name for d in SPACE.dimensions}
    assert names == {d.name for d in PHASE_DIMS} | {"engine"} | SKIPPED | {"tp", "dp", "pp"}
