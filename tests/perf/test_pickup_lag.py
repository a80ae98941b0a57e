"""The engines' scheduler pickup lag as a profile fact (EngineProfile.overlap_scheduled_ahead, cited in the profiles)
and the steady-state screen's TTFT reading it (perf/serving.py; sim/engine.py admits by the same rule)."""

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf import efficiency
from autotune.perf.predict import predict
from autotune.specs import PhasePlan, Plan, Workload


def test_the_lag_is_one_batch_ahead_where_the_loop_overlaps_the_gpu():
    assert profile("sglang").overlap_scheduled_ahead(1) == profile("vllm").overlap_scheduled_ahead(1) == 1
    assert efficiency.pickup_lag_steps("sglang", 1) == 1.0
    assert efficiency.pickup_lag_steps("sglang", 2) == 0.0  # event_loop_pp: no overlap
    assert efficiency.pickup_lag_steps("vllm", 1) == 1.0
    assert efficiency.pickup_lag_steps("vllm", 2) == 0.5  # one micro-batch of the two a step keeps in flight
    assert efficiency.pickup_lag_steps("vllm-ascend", 1) == 1.0
    assert efficiency.pickup_lag_steps("vllm-ascend", 2) == 0.0  # vLLM 0.23's V1 runner: pp batches, none ahead


H200 = load_preset("h200-x8")
R1 = load_model("deepseek-v3")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_screens_closed_loop_ttft_carries_one_step_of_pickup(engine, monkeypatch):
    # 8 requests in flight: each is sent when another finishes, at a step boundary, and the step the overlapped
    # loop had already scheduled (a decode step of the others, with prompt chunks on vLLM) runs first
    plan = Plan(engine, "aggregated", {"both": PhasePlan(gpus=tuple(range(8)), tp=8)})
    w = Workload(isl=1024, osl=1024, concurrency=8)
    on = predict(plan, R1, H200, w)
    monkeypatch.setattr(efficiency, "pickup_lag_steps", lambda _engine, _pp: 0.0)
    off = predict(plan, R1, H200, w)
    decode_ms = on.tpot_ms["mean"]  # vLLM: the mean step; SGLang: a decode step with its share of prefill
    assert off.tpot_ms == on.tpot_ms and off.total_tok_s == on.total_tok_s
    assert 0.5 * decode_ms < on.ttft_ms["mean"] - off.ttft_ms["mean"] <= 1.001 * decode_ms
