"""The engine loop's pickup of a new request (InstanceSpec.pickup, perf/efficiency.pickup_lag_steps): with the
scheduling overlapped (SGLang's event_loop_overlap, vLLM's async scheduling) a request that arrives while a step
runs is read when that step ends, and the batch the loop scheduled at that step's start runs before it; without
the overlap it joins at the step boundary after its arrival. The steady-state screen adds the same wait."""

import dataclasses
import statistics

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import predict
from autotune.perf.ops import StepInput
from autotune.perf.serving import aggregated_point
from autotune.sim.engine import Deployment, InstanceSpec, StepCache, simulate
from autotune.sim.serve import deployment
from autotune.sim.trace import Request, make_trace
from autotune.specs import PhasePlan, Plan, StepBreakdown, Workload


def linear_step(x) -> StepBreakdown:
    """5 ms + 0.05 ms per decoding sequence + 0.01 ms per prompt token."""
    ms = 5.0 + 0.05 * x.decode_seqs + 0.01 * x.prefill_tokens
    return StepBreakdown("mixed", int(x.decode_seqs + x.prefill_tokens), ms, ms, 0.0)


def agg(pickup: float, mixed: bool = True) -> Deployment:
    spec = InstanceSpec("both", StepCache(linear_step, 1), 64, 4096, 10**9, mixed=mixed, pickup=pickup)
    return Deployment("aggregated", spec, 1)


# A decodes alone (a 100-token prompt, 200 outputs); B arrives in the middle of A's fourth decode step
LONE = (Request(0, 0.0, 100, 200), Request(1, 0.0203, 1000, 10))
DECODE_MS = linear_step(StepInput(decode_seqs=1, decode_ctx=150)).step_ms  # one decoding request: 5.05 ms


@pytest.mark.parametrize("mixed", [True, False], ids=["vllm-mixed", "sglang-prefill-only"])
def test_a_prompt_arriving_during_a_decode_step_waits_for_the_batch_already_scheduled(mixed):
    off, on = (simulate(agg(p, mixed), LONE) for p in (0.0, 1.0))
    boundary = off.first_ms[0] + 3 * DECODE_MS  # the end of A's third decode step: the boundary after B's arrival
    assert boundary - DECODE_MS < 20.3 < boundary
    assert off.admit_ms[1] == pytest.approx(boundary)
    assert on.admit_ms[1] == pytest.approx(boundary + DECODE_MS)  # A's next decode step runs first
    ttft = [o.first_ms[1] - o.arrival_ms[1] for o in (off, on)]
    assert ttft[1] - ttft[0] == pytest.approx(DECODE_MS)


def test_a_request_that_finds_the_instance_idle_starts_at_once():
    trace = (Request(0, 0.003, 1000, 10), Request(1, 1.0, 500, 10))  # the second comes long after the first
    out = simulate(agg(1.0), trace)
    assert out.admit_ms == pytest.approx([3.0, 1000.0])


@pytest.mark.parametrize("pickup", [0.0, 1.0])
def test_littles_law_counts_the_wait_before_the_loop_reads_a_request(pickup):
    # the time-averaged requests an instance holds, integrated step by step, include those that arrived and wait
    # for the loop to read them (mid-step, or a step more with the pickup): L = lambda * W, exactly
    w = Workload(isl=400, osl=80, rate_rps=30.0)
    trace = make_trace(w, 3000)
    out = simulate(dataclasses.replace(agg(pickup), replicas=2), trace, 0)
    n = len(trace)
    makespan = max(out.done_ms) - min(out.arrival_ms)
    mean_e2e = statistics.fmean(out.done_ms[i] - out.arrival_ms[i] for i in range(n))
    assert out.in_system_area_ms / makespan == pytest.approx(n / makespan * mean_e2e, rel=1e-9)


@pytest.mark.parametrize("mixed", [True, False], ids=["vllm-mixed", "sglang-prefill-only"])
@pytest.mark.parametrize("concurrency", [4, 16])
def test_the_screen_and_the_simulator_agree_on_the_pickup_wait(mixed, concurrency):
    # a closed loop whose output lengths spread (equal ones fall into waves that arrive together on an idle
    # instance): each request is sent when another finishes at a step boundary, so the overlapped loop runs one
    # more step before it; the screen adds one mean step (separate_point: one decode step). The simulator's steps
    # ahead are sometimes another prompt's prefill step, so its wait runs up to ~1.2x the screen's: within 25%.
    w = Workload(isl=1000, osl=100, concurrency=concurrency, length_dist="normal", isl_std=1, osl_std=20)
    trace = make_trace(w, 40 * concurrency)
    sim, screen = [], []
    for pickup in (0.0, 1.0):
        out = simulate(agg(pickup, mixed), trace, concurrency)
        sim.append(statistics.fmean(out.first_ms[i] - out.arrival_ms[i] for i in range(concurrency, len(trace))))
        screen.append(aggregated_point(linear_step, concurrency, 1, w, 4096, 1, mixed=mixed, pickup=pickup).ttft_ms)
    decode_ms = linear_step(StepInput(decode_seqs=concurrency - 1, decode_ctx=1050)).step_ms
    assert screen[1] - screen[0] >= decode_ms * 0.99
    assert sim[1] - sim[0] == pytest.approx(screen[1] - screen[0], rel=0.25)
    assert sim[1] == pytest.approx(screen[1], rel=0.15)  # and the TTFTs themselves


# ---------------------------------------------------------------- the engines' loops, real model
H200 = load_preset("h200-x8")
LLAMA = load_model("llama-3.1-70b")


@pytest.mark.parametrize("engine,pp,waits", [("sglang", 1, True), ("sglang", 2, False), ("vllm", 1, True)])
def test_ttft_rises_by_a_decode_step_where_the_loop_overlaps(engine, pp, waits):
    # SGLang's overlap loop and vLLM's async scheduling read B while A's decode step runs and run it after the
    # step they had already scheduled; SGLang with pp > 1 runs event_loop_pp, which does not overlap
    plan = Plan(engine, "aggregated", {"both": PhasePlan(gpus=tuple(range(8)), tp=8 // pp, pp=pp)})
    w = Workload(isl=1000, osl=200)
    dep = deployment(plan, LLAMA, H200, w, predict(plan, LLAMA, H200, w))
    trace = (Request(0, 0.0, 1000, 200), Request(1, 0.1, 1000, 10))  # B arrives during A's decode
    off = dataclasses.replace(dep, instance=dataclasses.replace(dep.instance, pickup=0.0))
    ttft = [(o := simulate(d, trace)).first_ms[1] - o.arrival_ms[1] for d in (off, dep)]
    decode_ms = dep.instance.cache.ms(1, 1100, 0, 0)
    if waits:
        assert ttft[1] - ttft[0] == pytest.approx(decode_ms, rel=0.05)
    else:
        assert ttft[1] == ttft[0]
