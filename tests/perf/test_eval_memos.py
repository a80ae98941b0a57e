"""The cross-plan memo of the LM head's op terms added in issue 16's speed round (halves.add_head) adds what the
uncached costing does, over random plans whose entries meet."""

from __future__ import annotations

from autotune.capability.profiles import profile
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import halves
from autotune.perf.costing import Cost, cost_ops
from autotune.perf.opcore import context
from autotune.perf.oplist import head_ops
from autotune.search.random_plans import random_plans
from autotune.specs import Workload


def _contexts(model_name: str, preset: str, count: int):
    model, hw = load_model(model_name), load_preset(preset)
    for plan in random_plans(model, hw, Workload(), count, seed=11):
        if profile(plan.engine).ascend_platform:
            continue
        for phase in plan.phases.values():
            yield model, context(model, phase, plan.engine, hw, phase.replica_gpus(0)[: phase.stage_ranks])


def test_remembered_head_terms_add_what_cost_ops_adds():
    halves._HEAD_TERMS.cache_clear()
    checked = 0
    for _, c in _contexts("deepseek-v4.1-flash", "rtx-pro-6000-x8", 60):
        for rows, times in ((3.0, 2.0), (48.0, 0.5), (3.0, 1.0)):  # the third meets the first's entry
            remembered, uncached = Cost(), cost_ops(c, head_ops(c, rows), Cost(), times)
            halves.add_head(remembered, c, rows, times)
            assert remembered == uncached, (c.phase, rows)
            checked += 1
    assert checked > 30 and len(halves._HEAD_TERMS) > 0
