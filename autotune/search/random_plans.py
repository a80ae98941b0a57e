"""Plans drawn at random the way the search samples them (the default space, the engines' rules applied), so a
benchmark or a property test sees the mix of layouts, kernels and collectives a search evaluates."""

from __future__ import annotations

import random

from autotune import capability
from autotune.search.admit import Admission
from autotune.search.sampler import sample_plan
from autotune.search.space import load_space
from autotune.search.study import SearchRequest, study_choices
from autotune.specs import HardwareProfile, ModelSpec, Plan, Workload


def random_plans(model: ModelSpec, hw: HardwareProfile, workload: Workload, n: int, seed: int = 0) -> list[Plan]:
    """Up to `n` admitted plans, each value drawn uniformly from what the rules leave (fewer only when 50 x n draws
    do not find them: a box where most draws are refused)."""
    space = load_space()
    choices = study_choices(SearchRequest(model, hw, workload, space, hw.num_gpus))
    admission, rng, plans = Admission(capability.box_facts(hw, model)), random.Random(seed), []
    for _ in range(50 * n):
        if len(plans) >= n:
            break
        plan, _ = sample_plan(space, choices, lambda _name, options: rng.choice(list(options)), hw.num_gpus, admission)
        if plan is not None:
            plans.append(plan)
    return plans
