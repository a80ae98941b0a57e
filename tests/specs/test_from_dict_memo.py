"""specs/io.py from_dict_memo (the search's phase building) builds what from_dict builds: over random plans' phases,
with the memo shared between them, and for inputs from_dict refuses (the same error) or tells apart by type."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.search.random_plans import random_plans
from autotune.specs import (
    Batching,
    Comm,
    Kernels,
    PhasePlan,
    Plan,
    SpecError,
    Speculative,
    Workload,
    from_dict,
    to_dict,
)
from autotune.specs.io import from_dict_memo


@pytest.mark.parametrize(
    ("model_name", "preset"), [("deepseek-v3", "rtx-pro-6000-x8"), ("deepseek-v4.1-flash", "rtx-pro-6000-x8")]
)
def test_memo_builds_what_from_dict_builds(model_name, preset):
    plans = random_plans(load_model(model_name), load_preset(preset), Workload(), 80, seed=3)
    memo: dict = {}
    raws = [to_dict(phase) for plan in plans for phase in plan.phases.values()]
    assert len(raws) >= 80
    for raw in raws + raws:  # the second pass hits the memo at the top
        built = from_dict_memo(PhasePlan, raw, "plan", memo)
        plain = from_dict(PhasePlan, raw, "plan")
        assert built == plain and to_dict(built) == to_dict(plain) == raw
    # sub-contracts shared: one memo entry per distinct value of each nested contract (not one per phase)
    for name, kind in (("kernels", Kernels), ("comm", Comm), ("batching", Batching), ("speculative", Speculative)):
        distinct = {repr(raw[name]) for raw in raws}
        assert sum(k[0] is kind for k in memo) == len(distinct) < len(raws), name
    for plan in plans:
        assert from_dict_memo(Plan, to_dict(plan), "plan", memo) == plan


def test_memo_tells_types_apart_and_keeps_errors():
    memo: dict = {}
    base = to_dict(PhasePlan(gpus=(0, 1), tp=2, ep=2))
    first = from_dict_memo(PhasePlan, base, "plan", memo)
    assert first == from_dict(PhasePlan, base, "plan")
    for field_path, bad in (("tp", True), ("tp", 2.0), ("batching.max_running", "8"), ("kernels.moe", 3)):
        raw = to_dict(first)
        owner, _, leaf = field_path.rpartition(".")
        (raw[owner] if owner else raw)[leaf] = bad
        with pytest.raises(SpecError) as plain:
            from_dict(PhasePlan, raw, "plan")
        with pytest.raises(SpecError) as memoised:
            from_dict_memo(PhasePlan, raw, "plan", memo)
        assert str(memoised.value) == str(plain.value)
    fused = {**base, "fusion": {"a": True, "b": False}}
    reordered = {**base, "fusion": {"b": False, "a": True}}
    one, two = from_dict_memo(PhasePlan, fused, "plan", memo), from_dict_memo(PhasePlan, reordered, "plan", memo)
    assert list(one.fusion) == ["a", "b"] and list(two.fusion) == ["b", "a"]  # key order is kept, as to_dict writes it
    assert dataclasses.replace(first) == from_dict_memo(PhasePlan, base, "plan", memo)
