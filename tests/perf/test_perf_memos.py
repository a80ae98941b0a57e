"""The cross-plan memos (perf/halves.py, ops.step_fn) change no prediction: plans predicted after many others (memos
warm, shared with plans that differ in some fields) equal the same plans predicted with every memo empty."""

from __future__ import annotations

import sys

import pytest

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import halves, predict
from autotune.search.random_plans import random_plans
from autotune.specs import Workload


def _clear_memos() -> None:
    for name, module in list(sys.modules.items()):
        if name.startswith("autotune.perf."):
            for value in vars(module).values():
                if isinstance(value, halves.BoundedMemo):
                    value.cache_clear()


@pytest.mark.parametrize(
    ("model_name", "preset"), [("deepseek-v4.1-flash", "rtx-pro-6000-x8"), ("qwen3-235b-a22b", "h200-x8")]
)
def test_warm_memos_predict_what_empty_ones_do(model_name, preset):
    model, hw, workload = load_model(model_name), load_preset(preset), Workload()
    plans = random_plans(model, hw, workload, 60, seed=7)
    _clear_memos()
    warm = [predict(plan, model, hw, workload) for plan in plans]  # each plan meets the memos of those before it
    assert sum(p.feasible for p in warm) >= 10
    filled = sum(len(v) for v in vars(halves).values() if isinstance(v, halves.BoundedMemo))
    assert filled > 0  # the memos were used
    for plan, seen in zip(plans, warm, strict=True):
        _clear_memos()
        assert predict(plan, model, hw, workload) == seen, plan


def test_a_full_memo_is_cleared_not_grown():
    memo = halves.BoundedMemo(3)
    for i in range(7):
        memo.put(i, i * i)
        assert len(memo) <= 3
    assert memo.get(6) == 36
    memo.cache_clear()
    assert not memo
