"""The simulator's invariants on a synthetic step cost (exact arithmetic), and its agreement with the
steady-state formulas on the real performance model where both describe the same thing."""

import dataclasses
import math

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import predict
from autotune.perf.ops import StepInput
from autotune.sim.engine import Deployment, InstanceSpec, StepCache, simulate
from autotune.sim.serve import closed_concurrency, percentiles, simulate_prediction, summarize
from autotune.sim.trace import make_trace
from autotune.specs import Batching, Kernels, PhasePlan, Plan, StepBreakdown, Workload


def linear_step(x) -> StepBreakdown:
    """5 ms + 0.05 ms per decoding sequence + 0.01 ms per prompt token."""
    ms = 5.0 + 0.05 * x.decode_seqs + 0.01 * x.prefill_tokens
    return StepBreakdown("mixed", int(x.decode_seqs + x.prefill_tokens), ms, ms, 0.0)


def agg(replicas=1, max_running=64, chunk=4096, kv_tokens=10**9, hit=0.0, accepted=1.0, width=1) -> Deployment:
    spec = InstanceSpec("both", StepCache(linear_step, 1), max_running, chunk, kv_tokens, width, accepted, hit)
    return Deployment("aggregated", spec, replicas)


def disagg(kv_ms=7.0) -> Deployment:
    pre = InstanceSpec("prefill", StepCache(linear_step, 1), 64, 4096, 10**9)
    dec = InstanceSpec("decode", StepCache(linear_step, 1), 64, 4096, 10**9)
    return Deployment("disaggregated", dec, 2, prefill=pre, prefill_replicas=2, kv_transfer_ms=kv_ms)


def check_conservation(out, trace):
    assert len(out.done_ms) == len(trace) and out.osl == [r.output_tokens for r in trace]
    for i in range(len(trace)):
        assert out.done_ms[i] > 0, f"request {i} never finished"
        assert out.arrival_ms[i] <= out.admit_ms[i] <= out.first_ms[i] <= out.done_ms[i]


@pytest.mark.parametrize(
    "w,concurrency",
    [
        (Workload(isl=500, osl=100, length_dist="lognormal", isl_std=300, osl_std=60, concurrency=16), 16),
        (Workload(isl=500, osl=100, rate_rps=20.0), 0),
        (Workload(isl=500, osl=100, burst=300), 0),
    ],
)
@pytest.mark.parametrize("dep", [agg(), agg(replicas=3), disagg()], ids=["agg", "agg-x3", "disagg"])
def test_every_request_finishes_once_in_order_of_its_events(w, concurrency, dep):
    trace = make_trace(w, 300)
    out = simulate(dep, trace, concurrency)
    check_conservation(out, trace)


def test_closed_loop_never_exceeds_its_concurrency():
    w = Workload(isl=300, osl=50, length_dist="normal", isl_std=100, osl_std=20, concurrency=12)
    trace = make_trace(w, 400)
    out = simulate(agg(replicas=2), trace, 12)
    events = sorted([(out.arrival_ms[i], 1) for i in range(400)] + [(out.done_ms[i], -1) for i in range(400)])
    level = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # a finish frees its slot before the next arrives
        level += delta
        peak = max(peak, level)
    assert peak == 12


def test_littles_law_on_a_poisson_run():
    w = Workload(isl=400, osl=80, rate_rps=30.0)
    trace = make_trace(w, 3000)
    out = simulate(agg(replicas=2), trace, 0)
    s = summarize(out, w)
    n = len(trace)
    arrival_rate = n / s.makespan_ms  # per ms
    mean_e2e = sum(out.done_ms[i] - out.arrival_ms[i] for i in range(n)) / n
    # L (time-averaged requests the instances hold, integrated step by step) = lambda * W
    assert s.in_system == pytest.approx(arrival_rate * mean_e2e, rel=0.02)
    assert s.requests_per_s == pytest.approx(30.0, rel=0.08)  # below capacity it serves the offered rate


def test_percentiles_are_monotonic_and_match_order_statistics():
    p = percentiles([float(x) for x in range(1, 101)])
    assert p["p50"] == pytest.approx(50.5) and p["p99"] == pytest.approx(99.01) and p["mean"] == 50.5
    w = Workload(isl=800, osl=120, length_dist="lognormal", isl_std=600, osl_std=80, rate_rps=25.0)
    s = summarize(simulate(agg(), make_trace(w, 1000), 0), w)
    for d in (s.ttft_ms, s.tpot_ms, s.e2e_ms, s.queue_ms):
        assert d["p50"] <= d["p90"] <= d["p95"] <= d["p99"]


def test_a_bursts_ttft_spreads_as_batches_drain():
    # 256 requests at t=0 on an instance admitting 32 at a time: later requests wait for earlier ones to finish
    w = Workload(isl=1000, osl=200, burst=256)
    trace = make_trace(w)
    out = simulate(agg(max_running=32), trace, 0)
    ttft = sorted(out.first_ms[i] - out.arrival_ms[i] for i in range(256))
    first_wave_e2e = min(out.done_ms)
    assert ttft[0] < first_wave_e2e < ttft[-1]  # the last TTFT includes whole batches drained before it
    waves = sum(1 for a, b in zip(ttft, ttft[1:], strict=False) if b - a > 0.5 * first_wave_e2e)
    assert waves >= 5  # ~256/32 admissions, separated by decode drains
    s = summarize(out, w)
    assert s.ttft_ms["p99"] > 1.8 * s.ttft_ms["p50"] and s.queue_ms["p99"] > 0  # spread evenly from ~0 to the end
    # a bigger burst on the same instance only moves the tail further out
    s2 = summarize(simulate(agg(max_running=32), make_trace(Workload(isl=1000, osl=200, burst=512)), 0), w)
    assert s2.ttft_ms["p99"] > 1.8 * s.ttft_ms["p99"]


def test_full_kv_cache_queues_requests():
    w = Workload(isl=1000, osl=100, burst=40)
    roomy = summarize(simulate(agg(max_running=64), make_trace(w), 0), w)
    tight = summarize(simulate(agg(max_running=64, kv_tokens=5 * 1100), make_trace(w), 0), w)  # 5 requests fit
    assert roomy.queue_ms["p99"] < tight.queue_ms["p99"]
    assert tight.ttft_ms["p95"] > 3 * roomy.ttft_ms["p95"]


def test_prefix_hits_shorten_prompts():
    w = Workload(isl=4000, osl=20, rate_rps=5.0)
    cold = summarize(simulate(agg(), make_trace(w, 300), 0), w)
    warm = summarize(simulate(agg(hit=0.75), make_trace(w, 300), 0), w)
    assert warm.ttft_ms["p50"] < 0.6 * cold.ttft_ms["p50"]


def test_lone_request_is_exact():
    w = Workload(isl=1000, osl=101, concurrency=1)
    s = summarize(simulate(agg(), make_trace(w, 5), 1), w)
    # prompt in one step (5 + 0.01 * 1000 ms), then 100 decode steps of one sequence (5.05 ms)
    assert s.ttft_ms["p50"] == pytest.approx(15.0, rel=0.03)  # 1,000 tokens costed in the 1,024-token bucket
    assert s.tpot_ms["p99"] == pytest.approx(5.05)


def test_speculative_decoding_divides_decode_steps():
    w = Workload(isl=100, osl=301, concurrency=1)
    plain = summarize(simulate(agg(), make_trace(w, 3), 1), w)
    spec = summarize(simulate(agg(accepted=3.0, width=4), make_trace(w, 3), 1), w)
    assert spec.tpot_ms["mean"] == pytest.approx(plain.tpot_ms["mean"] / 3, rel=0.02)


def test_disaggregated_ttft_includes_the_kv_transfer():
    w = Workload(isl=1000, osl=50, rate_rps=2.0)
    near = summarize(simulate(disagg(kv_ms=1.0), make_trace(w, 100), 0), w)
    far = summarize(simulate(disagg(kv_ms=201.0), make_trace(w, 100), 0), w)
    assert far.ttft_ms["p50"] - near.ttft_ms["p50"] == pytest.approx(200.0, rel=0.01)
    assert far.tpot_ms["p50"] == pytest.approx(near.tpot_ms["p50"], rel=0.02)


def test_replicas_scale_a_closed_loop():
    w = Workload(isl=500, osl=100, concurrency=16)
    one = summarize(simulate(agg(), make_trace(w, 800), 16), w, 16)
    four = summarize(simulate(agg(replicas=4), make_trace(w, 3200), 64), w, 64)
    assert four.requests_per_s == pytest.approx(4 * one.requests_per_s, rel=0.03)


def test_step_cache_buckets_stay_close_to_the_step_and_few():
    calls = []

    def step(x):
        calls.append(x)
        return linear_step(x)

    cache = StepCache(step, 1)
    for d in range(1, 400, 3):
        for p in (0, 17, 300, 2500):
            exact = linear_step(type("X", (), dict(decode_seqs=d, prefill_tokens=p))()).step_ms
            assert cache.ms(d, 3000, p, 700) == pytest.approx(exact, rel=0.05)
    assert len(calls) == len(cache.grid) < 0.75 * len(cache.memo)  # interpolated between fewer evaluations


# ---------------------------------------------------------------- against the steady state, real model
H200 = load_preset("h200-x8")
LLAMA = load_model("llama-3.1-70b")
FP8 = Kernels(gemm_dtype="fp8")
TP2X4 = Plan("vllm", "aggregated", {"both": PhasePlan(gpus=tuple(range(8)), tp=2, replicas=4, kernels=FP8)})
TP4PP2 = Plan("vllm", "aggregated", {"both": PhasePlan(gpus=tuple(range(8)), tp=4, pp=2, kernels=FP8)})
DISAGG = Plan(
    "vllm",
    "disaggregated",
    {
        "prefill": PhasePlan(gpus=(0, 1, 2, 3), tp=2, replicas=2, kernels=FP8),
        "decode": PhasePlan(gpus=(4, 5, 6, 7), tp=2, replicas=2, kernels=FP8),
    },
)


@pytest.mark.parametrize("plan", [TP2X4, TP4PP2], ids=["tp2x4", "tp4pp2"])
@pytest.mark.parametrize("concurrency", [4, 16, 64])
def test_long_uniform_closed_loops_agree_with_the_steady_state(plan, concurrency):
    # throughput within 6% (the steady state runs fractional mean batches; the simulator whole steps and bucketed
    # step costs). TPOT within 12%, unless a whole wave's prompts fit one step: with equal lengths a closed loop
    # falls into waves (requests that started together finish together and their successors' prompts share a
    # step), which moves the prompt steps out of the decoding requests' TPOT into the newcomers' TTFT (the
    # simulator is the faithful one there). At one request per instance TTFT agrees too.
    w = Workload(isl=2048, osl=256, concurrency=concurrency)
    steady = predict(plan, LLAMA, H200, w)
    sim = simulate_prediction(plan, LLAMA, H200, w, steady, num_requests=max(64, 25 * concurrency))
    assert sim.total_tok_s == pytest.approx(steady.total_tok_s, rel=0.06)
    per_instance = concurrency // plan.phases["both"].replicas
    chunk = plan.phases["both"].batching.chunked_prefill_tokens
    if per_instance == 1 or per_instance * w.isl > chunk:  # else a whole wave's prompts fit one step
        assert sim.tpot_ms["mean"] == pytest.approx(steady.tpot_ms["mean"], rel=0.12)
    if per_instance == 1:
        assert sim.ttft_ms["p50"] == pytest.approx(steady.ttft_ms["mean"], rel=0.02)


DISAGG_PP = Plan(
    "vllm",
    "disaggregated",
    {
        "prefill": PhasePlan(gpus=(0, 1, 2, 3, 4, 5), tp=1, pp=2, replicas=3, kernels=FP8),
        "decode": PhasePlan(gpus=(6, 7), tp=2, kernels=FP8),
    },
)


@pytest.mark.parametrize("plan", [DISAGG, DISAGG_PP], ids=["tp2", "prefill-pp2"])
def test_disaggregated_pools_agree_with_the_steady_state_at_its_operating_point(plan):
    # a prefill instance with pp stages keeps pp micro-batches of a full budget in flight in both models
    w = Workload(isl=2048, osl=256)
    steady = predict(plan, LLAMA, H200, w)
    sim = simulate_prediction(plan, LLAMA, H200, w, steady, num_requests=max(400, 10 * steady.concurrency))
    assert sim.total_tok_s == pytest.approx(steady.total_tok_s, rel=0.06)
    if plan is DISAGG:  # with both pools at capacity (prefill-pp2) the decode rate is flat over a range of
        # batches (step time ~ proportional to the batch), so the batch and its TPOT are not pinned down
        assert sim.tpot_ms["mean"] == pytest.approx(steady.tpot_ms["mean"], rel=0.06)


@pytest.mark.parametrize("plan", [TP2X4, DISAGG], ids=["tp2x4", "disagg"])
def test_poisson_below_capacity_serves_the_offered_rate(plan):
    rate = 0.5 * predict(plan, LLAMA, H200, Workload(isl=2048, osl=256)).capacity_rps
    w = Workload(isl=2048, osl=256, rate_rps=rate)
    steady = predict(plan, LLAMA, H200, w)
    sim = simulate_prediction(plan, LLAMA, H200, w, steady, num_requests=2000)
    assert sim.request_rate_rps == pytest.approx(rate, rel=0.08)
    assert sim.tpot_ms["mean"] == pytest.approx(steady.tpot_ms["mean"], rel=0.1)
    assert sim.ttft_ms["p50"] == pytest.approx(steady.ttft_ms["mean"], rel=0.35)  # M/D/1 mean vs a median


def test_simulated_prediction_checks_the_slo_on_its_percentile():
    w = Workload(isl=2048, osl=256, burst=400)
    base = predict(TP2X4, LLAMA, H200, w)
    p = simulate_prediction(TP2X4, LLAMA, H200, w, base)
    assert p.simulated_requests == 400 and p.slo_percentile == 95.0
    between = (p.ttft_ms["p50"] + p.ttft_ms["p95"]) / 2  # a limit the median meets and the P95 misses
    tight = simulate_prediction(TP2X4, LLAMA, H200, Workload(isl=2048, osl=256, burst=400, ttft_ms=between), base)
    loose = Workload(isl=2048, osl=256, burst=400, ttft_ms=between, slo_percentile=50)
    assert not tight.slo_met and simulate_prediction(TP2X4, LLAMA, H200, loose, base).slo_met
    assert 0 < tight.goodput_rps < tight.request_rate_rps
    assert closed_concurrency(w, base) == 0 and math.isclose(p.goodput_rps, p.request_rate_rps)


def test_prefix_hits_in_the_steady_state_agree_with_the_simulator():
    cold = Workload(isl=4096, osl=128)
    warm = Workload(isl=4096, osl=128, prefix_hit_rate=0.75)
    assert predict(TP2X4, LLAMA, H200, warm).capacity_rps > 2 * predict(TP2X4, LLAMA, H200, cold).capacity_rps
    steady = predict(TP2X4, LLAMA, H200, dataclasses.replace(warm, concurrency=16))
    sim = simulate_prediction(TP2X4, LLAMA, H200, dataclasses.replace(warm, concurrency=16), steady, num_requests=800)
    assert sim.total_tok_s == pytest.approx(steady.total_tok_s, rel=0.06)


@pytest.mark.parametrize("concurrency", [200, 600])
def test_a_small_prompt_budget_binds_in_both_models(concurrency):
    # 2,048-token budget, 4,096-token prompts, MTP: past ~218 decoding sequences every step carries prompt
    # tokens and the budget sets the rate; the steady state must not count more decoders than it feeds
    phase = PhasePlan(gpus=tuple(range(8)), tp=4, pp=2, kernels=FP8, batching=Batching(1024, 2048))
    plan = Plan("vllm", "aggregated", {"both": phase})
    w = Workload(isl=4096, osl=1024, concurrency=concurrency)
    steady = predict(plan, LLAMA, H200, w)
    sim = simulate_prediction(plan, LLAMA, H200, w, steady)
    assert sim.total_tok_s == pytest.approx(steady.total_tok_s, rel=0.08)
    budget_tok_s = 2048 / min(s.step_ms for s in steady.steps) * 1e3  # prompt tokens the budget can carry
    assert steady.input_tok_s <= budget_tok_s


def test_steady_state_prompt_budget_binds_at_its_equilibrium():
    # 600 resident requests, far past the ~200 decoding sequences a 2,048-token budget feeds with 4,096-token
    # prompts and 3 draft tokens: prompt tokens per step cannot exceed the budget (a rounding-level tie between
    # the two regimes once let the decoders' count run away)
    from autotune.perf.serving import aggregated_point

    w = Workload(isl=4096, osl=1024)
    p = aggregated_point(linear_step, 600, 1, w, 2048, 1, (4, (1 - 0.85**4) / 0.15))
    fastest_ms = min(s.step_ms for s in p.steps)
    assert p.requests_per_s * w.isl <= 2048 / fastest_ms * 1e3


def test_plans_below_capacity_serve_the_same_offered_load():
    # an open loop below capacity serves what arrives: two plans differ in latency, not in throughput
    w = Workload(isl=2048, osl=256, rate_rps=5.0, num_requests=600)
    a, b = (simulate_prediction(p, LLAMA, H200, w, predict(p, LLAMA, H200, w)) for p in (TP2X4, TP4PP2))
    assert a.total_tok_s == pytest.approx(b.total_tok_s, rel=1e-12)
    assert a.request_rate_rps == pytest.approx(5.0, rel=0.1) and a.ttft_ms["p50"] != b.ttft_ms["p50"]


def test_whole_prompts_fill_each_rank_budget_apart():
    """TensorRT-LLM without chunked prefill (InstanceSpec.whole_prompt_ranks): each attention-DP rank takes whole
    prompts under its own budget after its decoding requests, so 1024-token prompts go one per 2048-token rank
    once a rank decodes, where the pooled, chunked budget of the same instance takes four."""
    w = Workload(isl=1024, osl=64, burst=16)
    trace = make_trace(w, 16)
    pooled = agg(chunk=4096)
    whole = dataclasses.replace(pooled, instance=dataclasses.replace(pooled.instance, whole_prompt_ranks=2))
    outs = {name: simulate(d, trace) for name, d in (("pooled", pooled), ("whole", whole))}
    for out in outs.values():
        check_conservation(out, trace)
    first_step_ms = linear_step(StepInput(0, 0, 4096, 512)).step_ms
    second = {name: sum(abs(t - first_step_ms) < 1e-9 for t in out.admit_ms) for name, out in outs.items()}
    assert sum(t == 0.0 for t in outs["whole"].admit_ms) == 4  # two prompts on each idle rank
    assert second == {"pooled": 4, "whole": 2}  # whole: 2 decoders per rank leave 2046 tokens, one prompt each
    # a prompt runs in the step that admits it: its first token comes with that step
    assert all(f > a for f, a in zip(outs["whole"].first_ms, outs["whole"].admit_ms, strict=True))
    assert max(outs["whole"].done_ms) > max(outs["pooled"].done_ms)
