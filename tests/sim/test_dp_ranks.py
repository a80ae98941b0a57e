"""The simulator under attention DP: each prompt runs on one DP rank (round robin), under that rank's budget
(InstanceSpec.rank_chunk), and the step costs the busiest rank's prompt tokens (StepCache's share)."""

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import predict
from autotune.perf.ops import StepInput, step_fn
from autotune.perf.sharding import dp_prefill_apart
from autotune.sim.engine import Deployment, InstanceSpec, StepCache, simulate
from autotune.sim.serve import simulate_prediction
from autotune.sim.trace import make_trace
from autotune.specs import Batching, PhasePlan, Plan, Speculative, StepBreakdown, Workload

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")
BATCHING = Batching(max_running=64, chunked_prefill_tokens=8192)


class Recorder:
    """A step of 5 ms + 0.01 ms per prompt token on the busiest rank (all of them without a placement)."""

    def __init__(self):
        self.seen: list[StepInput] = []

    def __call__(self, x: StepInput) -> StepBreakdown:
        self.seen.append(x)
        ms = 5.0 + 0.05 * x.decode_seqs + 0.01 * (x.prefill_rank_tokens or x.prefill_tokens)
        return StepBreakdown("mixed", int(x.decode_seqs + x.prefill_tokens), ms, ms, 0.0)


def _dep(step: Recorder, dp: int, rank_chunk: int) -> Deployment:
    spec = InstanceSpec(
        "both", StepCache(step, 1, dp), 64, 4096, 10**9, mixed=False, dp_ranks=dp, rank_chunk=rank_chunk
    )
    return Deployment("aggregated", spec, 1)


def test_prompts_go_round_robin_and_each_rank_takes_its_own_budget():
    step = Recorder()
    out = simulate(_dep(step, 4, 1024), make_trace(Workload(isl=1024, osl=2, burst=4), 4))
    prefills = [x for x in step.seen if x.prefill_tokens]
    assert prefills == [StepInput(0, 0, 4096, 512)]  # four prompts on four ranks: the even spread, one step
    assert len(set(out.first_ms)) == 1
    step = Recorder()
    out = simulate(_dep(step, 4, 1024), make_trace(Workload(isl=2048, osl=2, burst=1), 1))
    # a lone 2048-token prompt: two steps of its rank's 1024, each all on that rank
    assert [x.prefill_rank_tokens for x in step.seen if x.prefill_tokens] == [1024, 1024]
    assert out.first_ms[0] == pytest.approx(2 * (5.0 + 0.01 * 1024))


@pytest.mark.parametrize("dp", [1, 8])
def test_a_lone_requests_ttft_rises_under_attention_dp_only(dp):
    phase = PhasePlan(gpus=tuple(range(8)), tp=8 // dp, dp=dp, ep=8 if dp > 1 else 1, dp_attention=dp > 1,
                      batching=BATCHING)  # fmt: skip
    plan, w = Plan("sglang", "aggregated", {"both": phase}), Workload(isl=8192, osl=64, concurrency=1, num_requests=2)
    sim = simulate_prediction(plan, DSV3, H200, w, predict(plan, DSV3, H200, w))
    step = step_fn(DSV3, phase, "sglang", H200, phase.gpus, "mixed")
    spread = step(StepInput(prefill_tokens=8192, prefill_ctx=4096)).step_ms  # the whole prompt spread over dp
    if dp == 1:
        assert sim.ttft_ms["mean"] == pytest.approx(spread, rel=0.02)
    else:  # SGLang's 1024-token rank chunks, each all on one rank: far above the spread
        assert sim.ttft_ms["mean"] > 3 * spread
        assert sim.ttft_ms["mean"] == pytest.approx(predict(plan, DSV3, H200, w).ttft_ms["mean"], rel=0.05)


def test_one_ranks_prompt_step_carries_the_other_ranks_decodes_under_sglang_dp():
    """sharding.dp_prefill_apart: SGLang's DP ranks each pick a prefill or their decodes (scheduler.py
    get_next_batch_to_run), so a prompt step advances the decoding requests and its rank's budget stays whole."""
    step = Recorder()
    spec = InstanceSpec("both", StepCache(step, 1, 2), 64, 2048, 10**9, mixed=True, dp_ranks=2, rank_chunk=1024,
                        budget_apart=True)  # fmt: skip
    trace = make_trace(Workload(isl=1024, osl=40, rate_rps=50.0), 2)  # the second arrives while the first decodes
    out = simulate(Deployment("aggregated", spec, 1), trace)
    (second,) = [x for x in step.seen if x.prefill_tokens and x.decode_seqs]
    assert second.prefill_tokens == 1024 and second.prefill_rank_tokens == 1024  # whole: no decode tokens taken
    assert out.done_ms[0] < out.first_ms[1] + 39 * (5.0 + 0.05 * 2)  # the first kept decoding through it


def test_dp_prefill_apart_is_sglang_dp_without_speculation():
    dep8 = PhasePlan(gpus=tuple(range(8)), tp=1, dp=8, ep=8, dp_attention=True)
    mtp = dataclasses.replace(dep8, speculative=Speculative(method="mtp", draft_tokens=1))
    assert dp_prefill_apart(dep8, "sglang") and not dp_prefill_apart(mtp, "sglang")
    assert not dp_prefill_apart(dep8, "vllm")  # chunked prefill mixes every step anyway
    assert not dp_prefill_apart(PhasePlan(gpus=tuple(range(8)), tp=8), "sglang")
