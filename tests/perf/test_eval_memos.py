"""The cross-plan memos of issue 16's speed round, the FFN collectives' terms (halves.ffn_comm_terms) and the LM
head's terms (halves.add_head), answer what the uncached costing does, over random plans whose entries meet."""

from __future__ import annotations

from autotune.capability.profiles import profile
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import halves
from autotune.perf.costing import Cost, _op_terms, cost_ops
from autotune.perf.layers import layer_groups
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_comm_ops, head_ops
from autotune.search.random_plans import random_plans
from autotune.specs import Workload


def _contexts(model_name: str, preset: str, count: int):
    model, hw = load_model(model_name), load_preset(preset)
    for plan in random_plans(model, hw, Workload(), count, seed=11):
        if profile(plan.engine).ascend_platform:
            continue
        for phase in plan.phases.values():
            yield model, context(model, phase, plan.engine, hw, phase.replica_gpus(0)[: phase.stage_ranks])


def test_remembered_ffn_collectives_equal_the_uncached_ones_over_random_plans():
    halves._FFN_COMM_TERMS.cache_clear()
    checked = hits = 0
    for model_name, preset in (("deepseek-v3", "rtx-pro-6000-x8"), ("qwen3-235b-a22b", "h200-x8")):
        for model, c in _contexts(model_name, preset, 80):
            for layer, _ in layer_groups(model):
                for tokens in (1.0, 37.5, 2048.0):
                    before = len(halves._FFN_COMM_TERMS)
                    cached = halves.ffn_comm_terms(c, layer.ffn, tokens)
                    hits += len(halves._FFN_COMM_TERMS) == before
                    assert cached == _op_terms(c, ffn_comm_ops(c, layer.ffn, tokens)), (c.phase, tokens)
                    checked += 1
    assert checked > 200 and hits > 0  # the memo was used across Contexts, not only filled


def test_plans_that_differ_outside_the_key_share_the_entry_and_others_do_not():
    model, hw = load_model("deepseek-v3"), load_preset("rtx-pro-6000-x8")
    plan = next(p for p in random_plans(model, hw, Workload(), 40, seed=5) if p.phases.get("both", None))
    phase = plan.phases["both"]
    stage = phase.replica_gpus(0)[: phase.stage_ranks]
    ffn = model.layers[-1].ffn
    halves._FFN_COMM_TERMS.cache_clear()
    first = halves.ffn_comm_terms(context(model, phase, plan.engine, hw, stage), ffn, 64.0)
    other_kernel = type(phase.kernels)(**{**vars(phase.kernels), "attention": "other"})
    neighbour = type(phase)(**{**vars(phase), "kernels": other_kernel})
    assert halves.ffn_comm_terms(context(model, neighbour, plan.engine, hw, stage), ffn, 64.0) is first
    if len(stage) > 1:  # another stage is another key
        moved = tuple(reversed(stage))
        again = halves.ffn_comm_terms(context(model, phase, plan.engine, hw, moved), ffn, 64.0)
        assert again is not first


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
