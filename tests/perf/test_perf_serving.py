"""Serving arithmetic: an offered rate below capacity is what the plan serves, above it a note says so; Little's
law at the operating point; per-GPU weights under the engines' replication rules."""

from dataclasses import replace

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import predict
from autotune.perf.memory import weights_per_gpu_bytes
from autotune.specs import Batching, Comm, PhasePlan, Plan, Workload

H200 = load_preset("h200-x8")
QWEN = load_model("qwen3-235b-a22b")
DSV3 = load_model("deepseek-v3")


def agg(engine="sglang", n=8, **kw):
    return Plan(engine, "aggregated", {"both": PhasePlan(gpus=tuple(range(n)), **kw)})


def disagg(engine="sglang"):
    return Plan(
        engine,
        "disaggregated",
        {"prefill": PhasePlan(gpus=(0, 1, 2, 3), tp=4), "decode": PhasePlan(gpus=(4, 5, 6, 7), tp=4)},
    )


PLANS = {"agg": agg(tp=8), "agg-replicas": agg(tp=4, replicas=2), "disagg": disagg()}


def little(p, w):
    return p.request_rate_rps * (p.ttft_ms["mean"] + w.osl * p.tpot_ms["mean"]) / 1e3


@pytest.mark.parametrize("name", sorted(PLANS))
def test_rate_below_capacity_is_served_at_a_smaller_batch(name):
    plan = PLANS[name]
    full = predict(plan, QWEN, H200, Workload(isl=4096, osl=1024))
    w = Workload(isl=4096, osl=1024, rate_rps=0.5 * full.capacity_rps)
    p = predict(plan, QWEN, H200, w)
    assert p.feasible and not p.note
    assert p.output_tok_s == w.rate_rps * w.osl and p.input_tok_s == w.rate_rps * w.isl
    assert p.capacity_rps == full.capacity_rps == pytest.approx(full.request_rate_rps)
    assert p.tpot_ms["mean"] < full.tpot_ms["mean"] and p.concurrency < full.concurrency
    assert p.concurrency == pytest.approx(little(p, w), abs=0.5)  # Little's law at the operating point
    lighter = predict(plan, QWEN, H200, replace(w, rate_rps=0.2 * full.capacity_rps))
    assert lighter.tpot_ms["mean"] <= p.tpot_ms["mean"] and lighter.ttft_ms["mean"] <= p.ttft_ms["mean"]


def test_queueing_grows_towards_capacity():
    # prompt-heavy with a small chunk: the prompt budget, not max_running, sets capacity: M/D/1 wait for it (vLLM:
    # prompt chunks share the decode steps' budget; SGLang runs them in prefill-only steps, separate_point)
    plan, w = agg("vllm", tp=8, batching=Batching(chunked_prefill_tokens=2048)), Workload(isl=4096, osl=256)
    full = predict(plan, QWEN, H200, w)
    ttft = [
        predict(plan, QWEN, H200, replace(w, rate_rps=f * full.capacity_rps)).ttft_ms["mean"]
        for f in (0.1, 0.5, 0.9, 0.99)
    ]
    assert ttft == sorted(ttft) and ttft[-1] > 5 * ttft[0]


def test_rate_above_capacity_is_feasible_and_says_so():
    plan = PLANS["agg"]
    full = predict(plan, QWEN, H200, Workload(isl=4096, osl=1024))
    p = predict(plan, QWEN, H200, Workload(isl=4096, osl=1024, rate_rps=3 * full.capacity_rps))
    assert p.feasible and p.capacity_rps == pytest.approx(full.capacity_rps)
    assert p.request_rate_rps == pytest.approx(full.capacity_rps)  # it serves what it can
    assert f"exceeds this plan's capacity of {full.capacity_rps:.1f} req/s" in p.note
    with_slo = predict(plan, QWEN, H200, Workload(isl=4096, osl=1024, rate_rps=3 * full.capacity_rps, ttft_ms=1e6))
    assert not with_slo.slo_met  # an unbounded queue meets no TTFT target


@pytest.mark.parametrize("w", [Workload(isl=4096, osl=1024), Workload(isl=1000, osl=1000, concurrency=64)])
def test_littles_law_holds_at_closed_loop_points(w):
    p = predict(PLANS["agg"], QWEN, H200, w)
    assert p.concurrency == pytest.approx(little(p, w), rel=0.05)


# ---- memory: replication rules


def dep(engine, **kw):
    return agg(engine, tp=2, dp=4, ep=8, dp_attention=True, **kw).phases["both"]


def test_vllm_dp_ranks_hold_dense_layers_and_head_over_tp_only():
    # DeepSeek-V3: 3 dense layers, shared experts, a 129k x 7168 head: vLLM's DP engines each hold them over tp=2,
    # SGLang spreads the dense MLPs and the head over all 8 ranks
    vllm, sglang = (
        weights_per_gpu_bytes(DSV3, dep("vllm"), "vllm"),
        weights_per_gpu_bytes(DSV3, dep("sglang"), "sglang"),
    )
    assert vllm > sglang + 1e9
    # SGLang with DeepEP keeps shared experts whole on every rank; --moe-dense-tp-size 1 the dense MLPs
    deepep = dep("sglang", comm=Comm(all2all="deepep"))
    assert weights_per_gpu_bytes(DSV3, deepep, "sglang") > sglang
    assert weights_per_gpu_bytes(DSV3, dep("sglang", dense_dp=True), "sglang") > sglang


def test_mla_down_projections_are_replicated_not_split():
    phase = agg(tp=8).phases["both"]
    split = replace(
        DSV3, layers=tuple(replace(x, attention=replace(x.attention, replicated_params=0)) for x in DSV3.layers)
    )
    att = DSV3.layers[0].attention
    assert att.replicated_params == 7168 * (1536 + 512 + 64)  # q_a + kv_a (with the rope key)
    extra = weights_per_gpu_bytes(DSV3, phase) - weights_per_gpu_bytes(split, phase)
    assert extra == pytest.approx(61 * att.replicated_params * (1 - 1 / 8), rel=1e-9)  # fp8: one byte each
    assert weights_per_gpu_bytes(DSV3, agg(tp=1, n=1).phases["both"]) == weights_per_gpu_bytes(
        split, agg(tp=1, n=1).phases["both"]
    )


@pytest.mark.parametrize("model", ["deepseek-v3", "qwen3-235b-a22b", "deepseek-v4.1-flash", "glm-5"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_more_gpus_per_instance_hold_less_weight_each(model, engine):
    spec = load_model(model)
    sizes = [weights_per_gpu_bytes(spec, agg(engine, n=n, tp=n).phases["both"], engine) for n in (1, 2, 4, 8)] + [
        weights_per_gpu_bytes(spec, dep(engine), engine)
    ]
    assert sizes[:4] == sorted(sizes[:4], reverse=True) and len(set(sizes[:4])) == 4
    assert sizes[4] < sizes[1]  # tp2 x dp4 (EP8) holds less than tp2 alone


def test_sglang_screen_follows_its_prefill_only_steps():
    # SGLang (no --enable-mixed-chunk) runs prompts in prefill-only steps that stall its decoding requests; the
    # screen (serving.separate_point) follows the simulator's rule, so on a prompt-heavy closed loop with spread
    # lengths the two agree (the mixed-step screen was 13% above the simulator's throughput, 10% under its TPOT)
    from autotune.sim.serve import simulate_prediction

    w = Workload(isl=4096, osl=256, concurrency=64, num_requests=640, length_dist="lognormal", isl_std=1200,
                 osl_std=80)  # fmt: skip
    plan = agg(tp=8)
    screen = predict(plan, DSV3, H200, w)
    sim = simulate_prediction(plan, DSV3, H200, w, screen)
    assert screen.output_tok_s == pytest.approx(sim.output_tok_s, rel=0.05)
    assert screen.tpot_ms["mean"] == pytest.approx(sim.tpot_ms["mean"], rel=0.08)
    vllm = predict(agg("vllm", tp=8), DSV3, H200, w)  # the same step costs in mixed steps: a shorter TPOT
    assert vllm.tpot_ms["mean"] < 0.95 * screen.tpot_ms["mean"]
