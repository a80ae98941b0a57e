"""The memo of a stage's kernel launches (perf/eager_host.py stage_launches, _stage_key): keyed on everything the count
reads, so that whichever step asks first, every step gets its own op list's count."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.inputs import restrict_gpus
from autotune.perf import eager_host
from autotune.perf.layers import layer_groups
from autotune.perf.opcore import StepInput, context
from autotune.specs import Overlap, PhasePlan


def _box():
    return restrict_gpus(dataclasses.replace(load_preset("h200-x8"), measured=None), 8)


def _fresh_memos() -> None:
    eager_host._LAUNCHES.clear()
    eager_host._HALF_LAUNCHES.clear()


def test_a_mixed_steps_decode_part_is_in_the_key():
    """V4.1's layers outside prefill run the step's decode rows alone, whose fused-norm rule (SGLang fuses the
    residual norm into the all-reduce up to Context.fused_norm_max_tokens rows) reads the decode rows, not the step's:
    two mixed steps of one launch_key, one with few decode rows and one with many, launch different kernels there.
    The second asked must not get the first's count."""
    m = load_model("deepseek-v4.1-flash")
    plan = PhasePlan(gpus=tuple(range(4)), tp=4)
    hw, groups = _box(), layer_groups(m)
    limit = context(m, plan, "sglang", hw, plan.gpus).fused_norm_max_tokens
    assert limit > 0
    few = StepInput(decode_seqs=8.0, decode_ctx=4000.0, prefill_tokens=2 * limit, prefill_ctx=1000.0)
    many = few._replace(decode_seqs=1.5 * limit)
    remembered = context(m, plan, "sglang", hw, plan.gpus)
    assert eager_host.launch_key(remembered, few) == eager_host.launch_key(remembered, many)
    _fresh_memos()
    remembered.memo_keys["step"] = -1  # as a Context a step_fn made
    for x in (few, many):
        fresh = context(m, plan, "sglang", hw, plan.gpus)
        assert eager_host.stage_launches(remembered, groups, x) == eager_host.stage_launches(fresh, groups, x)
    fresh = context(m, plan, "sglang", hw, plan.gpus)
    assert eager_host.stage_launches(fresh, groups, many) > eager_host.stage_launches(fresh, groups, few)


@pytest.mark.parametrize(
    "one, other, ratio",
    (
        (  # EP 8: no shared-expert fusion either way (TBO turns SGLang's off: test_sglang_shared_fusion.py)
            PhasePlan(gpus=tuple(range(8)), tp=8, ep=8),
            PhasePlan(gpus=tuple(range(8)), tp=8, ep=8, overlap=Overlap(two_batch=True)),
            2,
        ),
        (PhasePlan(gpus=tuple(range(4)), tp=4), PhasePlan(gpus=tuple(range(8)), tp=4, pp=2), 0.5),
    ),
)
def test_plans_of_one_halves_prefix_but_other_micro_batches_or_stages_count_their_own(one, other, ratio):
    """Across plans the count is keyed on the halves' prefix numbers (the attention prefix, the FFN's launch prefix:
    they leave out two-batch overlap and pp, which _half_launches' counts do not read); the micro-batches and the
    stages are in the key beside them."""
    m, hw = load_model("deepseek-v3"), _box()
    groups, x = layer_groups(m), StepInput(decode_seqs=64.0, decode_ctx=2000.0)
    counts = []
    _fresh_memos()
    for plan in (one, other):
        c = context(m, plan, "sglang", hw, plan.gpus[: plan.stage_ranks])
        c.memo_keys.update(attention=-2)  # one attention prefix for both, as plans of equal halves share
        counts.append(eager_host.stage_launches(c, groups, x))
    assert counts[1] == pytest.approx(ratio * counts[0])
