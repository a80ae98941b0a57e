"""The experts' popularity CV as a workload input (Workload.expert_load_cv, perf/ep_balance.py): a larger CV makes
the busiest expert-parallel rank busier, so a plan with EP > 1 predicts slower steps; EP = 1 does not change."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import efficiency as eff
from autotune.perf import ep_balance
from autotune.perf.opcore import StepInput, context
from autotune.perf.ops import step_fn
from autotune.perf.predict import predict
from autotune.sim.serve import simulate_prediction
from autotune.specs import PhasePlan, Plan, Workload

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")
EIGHT = tuple(range(8))
DECODE = StepInput(decode_seqs=256, decode_ctx=2048)


def _phase(ep: int) -> PhasePlan:
    return PhasePlan(gpus=EIGHT, tp=8, ep=ep)


def test_zero_means_the_default_constant():
    assert ep_balance.expert_load_cv(0.0) == eff.EXPERT_LOAD_CV
    assert ep_balance.expert_load_cv(1.5) == 1.5
    default = context(DSV3, _phase(8), "vllm", H200, EIGHT).imbalance
    assert context(DSV3, _phase(8), "vllm", H200, EIGHT, eff.EXPERT_LOAD_CV).imbalance == default


def test_context_imbalance_grows_with_the_cv_at_ep8_only():
    at = {cv: context(DSV3, _phase(8), "vllm", H200, EIGHT, cv).imbalance for cv in (0.2, 0.65, 2.0)}
    assert 1.0 < at[0.2] < at[0.65] < at[2.0]
    flat = {cv: context(DSV3, _phase(1), "vllm", H200, EIGHT, cv).imbalance for cv in (0.2, 2.0)}
    assert flat[0.2] == flat[2.0] == 1.0


def test_step_slows_with_the_cv_at_ep8_and_not_at_ep1():
    """The same step, costed through step_fn (whose memo must not hand one CV's step to another)."""

    def step_ms(ep: int, cv: float) -> float:
        return step_fn(DSV3, _phase(ep), "vllm", H200, EIGHT, "decode", expert_cv=cv)(DECODE).step_ms

    assert step_ms(8, 0.2) < step_ms(8, 0.65) < step_ms(8, 2.0)
    assert step_ms(1, 0.2) == step_ms(1, 2.0)


@pytest.mark.parametrize("ep", [1, 8])
def test_prediction_reads_the_workloads_cv(ep):
    plan = Plan("vllm", "aggregated", {"both": _phase(ep)})
    w = Workload(isl=1024, osl=1024, concurrency=256)
    low = predict(plan, DSV3, H200, dataclasses.replace(w, expert_load_cv=0.2))
    high = predict(plan, DSV3, H200, dataclasses.replace(w, expert_load_cv=2.0))
    assert low.feasible and high.feasible
    if ep == 1:
        assert high.output_tok_s == low.output_tok_s
    else:
        assert high.output_tok_s < low.output_tok_s * 0.98
        assert high.tpot_ms["mean"] > low.tpot_ms["mean"]


def test_the_simulator_reads_the_workloads_cv():
    plan = Plan("vllm", "aggregated", {"both": _phase(8)})
    w = Workload(isl=512, osl=64, concurrency=64, num_requests=64)
    lo_w, hi_w = dataclasses.replace(w, expert_load_cv=0.2), dataclasses.replace(w, expert_load_cv=2.0)
    # the same steady-state base for both: only the simulator's own step costs can differ
    base = predict(plan, DSV3, H200, lo_w)
    low = simulate_prediction(plan, DSV3, H200, lo_w, base)
    high = simulate_prediction(plan, DSV3, H200, hi_w, base)
    assert high.output_tok_s < low.output_tok_s
