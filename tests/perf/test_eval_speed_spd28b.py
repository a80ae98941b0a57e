"""The bit-identical speed-ups of the evaluation round spd28b (tests/bench/bench_predict.py, step / plan level): a
step the screen asks twice in one prediction is one TimedStep (ops.step_fn's `pending` notes it by its step key),
which ops.complete builds from its Cost instead of costing it again; and _step's per-phase arithmetic (launch
seconds, 1 / pp, the FFN groups' times and memo ids) resolved once per step_fn (ops._step_facts). Each is checked
against the form before (the step costed whole: the same floats) and for what its key tells apart."""

from __future__ import annotations

import pytest

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import efficiency as eff
from autotune.perf import ops
from autotune.perf.opcore import StepInput
from autotune.search.random_plans import random_plans
from autotune.specs import PhasePlan, Speculative, Workload

V41, PRO = load_model("deepseek-v4.1-flash"), load_preset("rtx-pro-6000-x8")
GPUS = tuple(range(4))
DP = PhasePlan(gpus=GPUS, tp=2, dp=2, ep=4, dp_attention=True)


def _fresh() -> None:
    ops._STEPS.clear()  # steps remembered by earlier tests would come whole, not timed


def test_a_step_asked_twice_in_a_prediction_is_one_timed_step():
    """The second ask of a step timed in the same prediction returns the first TimedStep (the code before made a
    second one, which complete() costed again); a step input differing in one field (decode_seqs, prefill tokens,
    the busiest rank's prompt tokens) is its own step."""
    _fresh()
    pending: dict = {}
    step = ops.step_fn(V41, DP, "sglang", PRO, GPUS, "mixed", pending)
    x = StepInput(31.9, 4608.0, 2048.0, 2048.0, 1.0, 2048.0)
    first = step(x)
    assert type(first) is ops.TimedStep
    assert step(x) is first
    others = [x._replace(decode_seqs=32.0), x._replace(prefill_tokens=2047.0), x._replace(prefill_rank_tokens=0.0)]
    for other in others:
        timed = step(other)
        assert timed is not first and step(other) is timed
    assert len({float(step(o)) for o in [x, *others]}) == 4
    whole = ops.complete(pending, step(x))
    _fresh()
    assert whole == ops.step_fn(V41, DP, "sglang", PRO, GPUS, "mixed")(x)


def test_a_step_timed_by_an_earlier_prediction_is_costed_whole_again():
    """A step remembered as a time only (an earlier prediction's) still comes whole from complete(), and a second
    ask in the new prediction is the same TimedStep."""
    _fresh()
    phase = PhasePlan(gpus=GPUS, tp=4)
    x = StepInput(decode_seqs=7.5, decode_ctx=4608.0)
    ops.step_fn(V41, phase, "vllm", PRO, GPUS, "mixed", {})(x)  # timed only
    pending: dict = {}
    step = ops.step_fn(V41, phase, "vllm", PRO, GPUS, "mixed", pending)
    timed = step(x)
    assert type(timed) is ops.TimedStep and step(x) is timed
    whole = ops.complete(pending, timed)
    assert whole.step_ms == float(timed) and whole.rates_ms
    _fresh()
    assert whole == ops.step_fn(V41, phase, "vllm", PRO, GPUS, "mixed")(x)


@pytest.mark.parametrize("pp", [1, 2])
def test_step_facts_are_the_step_arithmetic_resolved_once(pp):
    """_step_facts holds the floats _step's expressions gave per step (launch seconds, 1 / pp, count / pp), and
    they follow the fields they read: pp, speculation's width, the model's layers."""
    gpus = tuple(range(4 * pp))
    spec = Speculative(method="mtp", draft_tokens=2)
    phase = PhasePlan(gpus=gpus, tp=4, pp=pp, speculative=spec)
    c = ops.context(V41, phase, "vllm", PRO, gpus[:4])
    facts = ops._step_facts(c, 3, (), (256.0, 8192.0))
    assert facts.per_stage == 1 / pp
    assert facts.prefill_launch_s == eff.PREFILL_LAUNCH_US_PER_LAYER * 1e-6 * V41.num_layers / pp
    assert facts.decode_launch_s == eff.DECODE_LAUNCH_US_PER_LAYER * 1e-6 * V41.num_layers / pp
    assert facts.draft_launch_s == (3 - 1) * eff.DECODE_LAUNCH_US_PER_LAYER * 1e-6 / pp
    groups = ops._ffn_facts(V41)[0]
    assert [(f, p, t) for f, _, p, t in facts.ffn_groups] == [(f, p, n / pp) for f, p, n in groups]
    assert ops._step_facts(c, 1, (), (256.0, 8192.0)).draft_launch_s == 0.0


def test_predictions_from_timed_steps_match_those_from_whole_ones():
    """A prediction whose reported steps complete() builds (some from the first TimedStep of a step asked twice)
    equals the same prediction again, its steps then remembered whole."""
    from autotune.perf import predict

    w = Workload()
    checked = 0
    for plan in random_plans(V41, PRO, w, 60, seed=28):
        _fresh()
        got = predict(plan, V41, PRO, w)
        if not got.feasible:
            continue
        again = predict(plan, V41, PRO, w)  # the same plan, its reported steps now remembered whole
        assert got == again
        checked += 1
    assert checked >= 10
