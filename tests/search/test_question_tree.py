"""sample_plan with a CachedAdmission keeps each phase question in a tree by the answers before it
(search/sampler.py _phase_values): every plan, refusal and question it gives is what sampling without any memo
gives, for random answers and for refinement's one-dimension moves of them."""

from __future__ import annotations

import random

import pytest

from autotune import capability
from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space
from autotune.search.admit import Admission
from autotune.search.sampler import CachedAdmission, sample_plan
from autotune.search.study import study_choices
from autotune.specs import Workload


def _sample(space, choices, answer, admission):
    """(plan, reason, the questions asked with their answers) for answers given by `answer(name, options)`."""
    asked = []

    def suggest(name, options):
        value = answer(name, options)
        asked.append((name, tuple(options), value))
        return value

    plan, reason = sample_plan(space, choices, suggest, 8, admission)
    return plan, reason, asked


@pytest.mark.parametrize("model_name,preset", [("deepseek-v3", "rtx-pro-6000-x8"), ("qwen3-235b-a22b", "h200-x8")])
def test_the_question_tree_samples_what_sampling_without_memo_samples(model_name, preset):
    space, model, hw = load_space(), load_model(model_name), load_preset(preset)
    choices = study_choices(SearchRequest(model, hw, Workload(), space, 8))
    box = capability.box_facts(hw, model)
    cached, rng = CachedAdmission(Admission(box)), random.Random(model_name)
    drawn = []
    for _ in range(40):
        got = _sample(space, choices, lambda name, options: rng.choice(list(options)), cached)
        fresh = _sample(space, choices, _replay(got[2]), Admission(box))
        assert got == fresh
        drawn.append(got)
    moves = plans = 0
    for _plan, _reason, asked in [d for d in drawn if d[0] is not None][:4]:  # neighbours, as refinement moves
        params = {name: value for name, _, value in asked}
        for name, options, value in asked:
            for other in options:
                if other == value:
                    continue
                moved = {**params, name: other}

                def answer(n, opts, moved=moved):
                    return moved[n] if n in moved and moved[n] in opts else opts[0]

                got = _sample(space, choices, answer, cached)
                assert got == _sample(space, choices, answer, Admission(box))
                moves += 1
                plans += got[0] is not None
    assert moves > 40 and plans > 10  # the moves were checked, and built plans


def _replay(asked):
    values = iter([v for _, _, v in asked])
    return lambda name, options: next(values)
