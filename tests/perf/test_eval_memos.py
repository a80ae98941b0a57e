"""The cross-plan memo of the LM head's op terms added in issue 16's speed round (halves.add_head) adds what the
uncached costing does, over random plans whose entries meet; steps costed without their rates (ops.step_fn's
`pending`) complete to the whole steps."""

from __future__ import annotations

import dataclasses

from autotune.capability.profiles import profile
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import halves, ops, predict, rates
from autotune.perf.costing import Cost, _op_terms, cost_ops
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import ffn_ops, head_ops
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


def _phases(model_name: str, preset: str, count: int, seed: int):
    model, hw = load_model(model_name), load_preset(preset)
    for plan in random_plans(model, hw, Workload(), count, seed=seed):
        for label, phase in plan.phases.items():
            yield model, hw, plan.engine, phase, {"both": "mixed"}.get(label, label)


_INPUTS = (  # decode only, mixed, prefill only, fractional batches (serving's bisections)
    StepInput(8.0, 1536.0),
    StepInput(3.0, 1536.0, 700.0, 512.0),
    StepInput(0.0, 0.0, 2048.0, 1024.0),
    StepInput(0.75, 1536.0, 1.5, 512.0),
)


def test_steps_without_rates_complete_to_the_whole_steps():
    """step_fn with `pending` returns TimedSteps (no breakdown); complete() gives back the step the whole path
    costs, the same rates in the same order, both from the step's own Cost and from a step an earlier prediction
    left timed only (memo hit)."""
    checked = 0
    for case in (("deepseek-v4.1-flash", "rtx-pro-6000-x8"), ("qwen3-235b-a22b", "h200-x8")):
        for model, hw, engine, phase, label in _phases(*case, 25, seed=5):
            gpus = phase.replica_gpus(0)
            ops._STEPS.cache_clear()
            whole = [ops.step_fn(model, phase, engine, hw, gpus, label)(x) for x in _INPUTS]
            for again in (False, True):  # again: the memo holds the first pass's steps, without their rates
                ops._STEPS.cache_clear()
                if again:
                    lite = ops.step_fn(model, phase, engine, hw, gpus, label, {})
                    assert all(type(lite(x)) is ops.TimedStep for x in _INPUTS)
                pending: dict = {}
                timed = ops.step_fn(model, phase, engine, hw, gpus, label, pending)
                steps = [timed(x) for x in _INPUTS]
                assert all(type(s) is ops.TimedStep for s in steps)
                for step, expected in zip(steps, whole, strict=True):
                    done = ops.complete(pending, step)
                    assert done == expected and list(done.rates_ms.items()) == list(expected.rates_ms.items())
                    assert done.step_ms == step.step_ms
                    checked += 1
    assert checked > 300


def _eager(by_rate: dict, op_terms, times: float) -> dict:
    for key, _, seconds, _ in op_terms:
        by_rate[key] = by_rate.get(key, 0.0) + seconds * times
    return by_rate


def test_cost_by_rate_is_the_eager_sum_in_order():
    """Cost.by_rate, summed when read from the noted additions, is the sum an eager pass adds op by op (same
    floats, same key order), through nested Costs and a read between additions."""
    checked = 0
    for model, c in _contexts("deepseek-v4.1-flash", "rtx-pro-6000-x8", 20):
        head, ffn = head_ops(c, 5.0), ffn_ops(c, model.layers[0].ffn, 96.0)
        inner = cost_ops(c, ffn)
        total = cost_ops(c, head, Cost(), 0.25)
        total.add(inner, 3.0)
        assert list(total.by_rate) and total.by_rate is total.by_rate  # read between additions
        cost_ops(c, ffn + head, total, 0.5)
        expected = _eager({}, _op_terms(c, head), 0.25)
        for key, seconds in _eager({}, _op_terms(c, ffn), 1.0).items():
            expected[key] = expected.get(key, 0.0) + seconds * 3.0
        _eager(expected, _op_terms(c, ffn + head), 0.5)
        assert list(total.by_rate.items()) == list(expected.items())
        checked += 1
    assert checked > 10


def test_remembered_provenances_are_each_box_s_own():
    """rates.used remembers each entry's provenance per box and rates table object: warm, with another box's
    entries (corrected rates, collectives scaled) beside, it reports what an empty memo does."""
    model, workload = load_model("deepseek-v4.1-flash"), Workload()
    checked = 0
    for preset in ("rtx-pro-6000-x8", "h200-x8"):
        hw = load_preset(preset)
        other = dataclasses.replace(hw, corrections={"collective": 1.3, "gemm": 1.1})
        for plan in random_plans(model, hw, workload, 15, seed=3):
            prediction = predict(plan, model, hw, workload)
            if not prediction.feasible:
                continue
            steps = [s.rates_ms for s in prediction.steps]
            fresh = {}
            for box in (hw, other):
                rates._PROVENANCES.clear()
                fresh[box.fingerprint] = rates.used(box, steps)
            assert fresh[hw.fingerprint] != fresh[other.fingerprint]
            for box in (hw, other, hw, other):
                assert rates.used(box, steps) == fresh[box.fingerprint]
                checked += 1
    assert checked > 20
