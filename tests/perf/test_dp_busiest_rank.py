"""Attention DP: a request lives on one DP rank (SGLang's data-parallel controller, vLLM's DP engine cores), so a
step's attention side costs the busiest rank's prompt tokens (opcore.rank_prompt_tokens) while the MoE side, after
the gather, costs all of them; the steady-state screen expects the busiest rank's share from the prompts a step
carries (serving._input)."""

import dataclasses
import math

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import predict
from autotune.perf.costing import _op_terms
from autotune.perf.halves import attention_terms
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import attention_ops, ffn_ops, step_tokens
from autotune.perf.ops import step_fn
from autotune.perf.serving import Ranks, _input, aggregated_point, separate_point
from autotune.perf.sharding import rank_chunk
from autotune.specs import Batching, PhasePlan, Plan, Workload

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")
DEP8 = PhasePlan(gpus=tuple(range(8)), tp=1, dp=8, ep=8, dp_attention=True)
TP8 = PhasePlan(gpus=tuple(range(8)), tp=8)
SPREAD = StepInput(prefill_tokens=4096.0, prefill_ctx=2048.0)  # the old even spread: 512 tokens a rank
LONE = SPREAD._replace(prefill_rank_tokens=4096.0)  # one prompt, on one rank


def _flops(ops) -> float:
    return sum(op.flops for op in ops)


def test_a_lone_prompt_costs_dp_times_the_spread_attention_and_the_same_moe():
    c = context(DSV3, DEP8, "sglang", H200, DEP8.gpus)
    layer = DSV3.layers[-1]  # a MoE layer
    spread, lone = (attention_ops(c, layer.attention, x) for x in (SPREAD, LONE))
    assert _flops(lone) == pytest.approx(8 * _flops(spread), rel=1e-9)  # projections and causal attention: linear
    assert [op.m for op in lone if op.kind == "attention"] == [4096.0]  # the prefill kernel on the rank's rows
    # the MoE side (after the gather) reads the step's tokens only: the same ops
    assert ffn_ops(c, layer.ffn, step_tokens(LONE)) == ffn_ops(c, layer.ffn, step_tokens(SPREAD))
    # an eager prompt step (SUM_LEN) gathers the real rows; one that replays the prompt graph pads every rank to the
    # lone prompt's 4096-row bucket, and the MoE runs that buffer (test_sglang_padded_ffn_rows.py)
    step = step_fn(DSV3, DEP8, "sglang", H200, DEP8.gpus, "prefill", caps=(2048, 0))
    moe = {k: v for k, v in step(LONE).rates_ms.items() if k.startswith("grouped_moe")}
    assert moe and moe == {k: v for k, v in step(SPREAD).rates_ms.items() if k.startswith("grouped_moe")}
    assert step(LONE).step_ms > step(SPREAD).step_ms * 1.5
    graphed = step_fn(DSV3, DEP8, "sglang", H200, DEP8.gpus, "prefill")
    padded = {k: v for k, v in graphed(LONE).rates_ms.items() if k.startswith("grouped_moe")}
    full = graphed(SPREAD._replace(prefill_tokens=8 * 4096.0))  # 4096 tokens on every rank: the same buffer
    assert padded == pytest.approx({k: v for k, v in full.rates_ms.items() if k.startswith("grouped_moe")})


def test_a_full_burst_and_a_tp_plan_are_unchanged():
    step = step_fn(DSV3, DEP8, "sglang", H200, DEP8.gpus, "prefill")
    burst = SPREAD._replace(prefill_rank_tokens=512.0)  # one 512-token prompt on each of the 8 ranks
    assert step(burst).step_ms == pytest.approx(step(SPREAD).step_ms, rel=1e-12)
    tp = step_fn(DSV3, TP8, "sglang", H200, TP8.gpus, "prefill")
    assert tp(LONE).step_ms == tp(SPREAD).step_ms  # dp 1: the rank holds every prompt token either way


def test_the_screen_puts_a_lone_prompt_on_one_rank_and_spreads_dp_of_them():
    ranks = Ranks(8, 4096.0)
    assert _input(ranks, 0, 0, 4096, 2048, 4096).prefill_rank_tokens == 4096  # one piece: one rank
    assert _input(ranks, 0, 0, 8 * 4096, 2048, 4096).prefill_rank_tokens == 0.0  # dp pieces: the even spread
    assert _input(ranks, 0, 0, 9 * 1000, 2048, 1000).prefill_rank_tokens == 2000  # round robin: 2 on the first
    assert _input(Ranks(), 0, 0, 4096, 2048, 4096) == StepInput(0, 0, 4096, 2048, prefill_seqs=1.0)  # no DP: one prompt


def test_sglang_dp_prefills_a_lone_prompt_in_chunk_over_dp_pieces_on_one_rank():
    """SGLang divides --chunked-prefill-size by the DP size (srt/arg_groups/parallel_hook.py:326-331): at c=1 a
    prompt takes isl / (chunk / dp) steps, each the busiest rank's whole piece; the TP plan keeps its chunk."""
    w = Workload(isl=8192, osl=128, concurrency=1)
    for phase, rank in ((DEP8, 1024), (TP8, 8192)):
        phase = dataclasses.replace(phase, batching=Batching(max_running=64, chunked_prefill_tokens=8192))
        assert rank_chunk(phase, "sglang", 8192) == rank
        assert rank_chunk(phase, "vllm", 8192) == 8192  # each vLLM DP engine core has its own budget
        p = predict(Plan("sglang", "aggregated", {"both": phase}), DSV3, H200, w)
        step = step_fn(DSV3, phase, "sglang", H200, phase.gpus, "mixed")
        x = StepInput(prefill_tokens=rank, prefill_ctx=w.isl / 2, prefill_rank_tokens=rank if phase.dp > 1 else 0)
        assert p.ttft_ms["mean"] == pytest.approx(math.ceil(8192 / rank) * step(x).step_ms, rel=1e-9)


def test_the_screen_lets_the_other_ranks_decode_beside_one_ranks_prompt():
    """SGLang under DP attention without speculative decoding (sharding.dp_prefill_apart): the steady state runs
    the mixed path with the prompts' budget their own, not separate_point's prefill-only steps that stall every
    decode: a lower TPOT than that, and a higher one than the decode step alone."""
    w = Workload(isl=8192, osl=256, concurrency=16)
    p = predict(Plan("sglang", "aggregated", {"both": DEP8}), DSV3, H200, w)
    step = step_fn(DSV3, DEP8, "sglang", H200, DEP8.gpus, "mixed")
    ranks = Ranks(8, rank_chunk(DEP8, "sglang", DEP8.batching.chunked_prefill_tokens), True)
    chunk = DEP8.batching.chunked_prefill_tokens
    stalled = separate_point(step, 16, 1, w, chunk, 1, ranks=ranks._replace(apart=False))
    # 0.89 of it before hopper36, 0.91 since a prompt chunk within SGLang's prefill graph runs MLA's absorbed path
    # (tests/perf/test_sglang_graph_mla.py), which lengthens the prompt rank's side of both
    assert p.tpot_ms["mean"] < stalled.tpot_ms * 0.95
    assert p.tpot_ms["mean"] > step(StepInput(decode_seqs=16, decode_ctx=8192 + 128)).step_ms


def test_a_prompt_takes_its_ranks_budget_per_step_when_every_step_carries_prompts():
    """Every step carries prompt tokens (8k prompts, 128 outputs, 64 resident): the step's prompt tokens come from
    several ranks, but one prompt advances by at most its rank's chunk / dp a step, so its TTFT is at least
    isl / (chunk / dp) steps."""
    w = Workload(isl=8192, osl=128)
    step = step_fn(DSV3, DEP8, "sglang", H200, DEP8.gpus, "mixed")
    p = aggregated_point(step, 64, 1, w, 8192, 1, ranks=Ranks(8, 1024.0, True))
    (mixed,) = p.steps
    assert p.ttft_ms >= 8 * mixed.step_ms


def _seconds(terms) -> float:
    return sum(term[2] for term in terms)


def test_a_rank_that_prefills_apart_runs_no_decodes_so_the_layer_waits_for_the_longer_side():
    """SGLang under DP attention without speculation (sharding.dp_prefill_apart): the busiest rank runs its prompt's
    prefill and no decodes while the others decode (srt/managers/scheduler.py:3971-4002), so a mixed step's
    attention half is the longer of the two sides (halves._apart_terms), not one batch of both; vLLM's engine core
    runs its decodes and its prompt chunk in one batch (attention_ops of the mixed input)."""
    layer = DSV3.layers[-1]
    mixed = StepInput(64.0, 4096.0, 2048.0, 1024.0, 1.0, 2048.0)
    prefill = StepInput(prefill_tokens=2048.0, prefill_ctx=1024.0, prefill_rank_tokens=2048.0)
    decode = StepInput(64.0, 4096.0)
    for engine, apart in (("sglang", True), ("vllm", False)):
        c = context(DSV3, DEP8, engine, H200, DEP8.gpus)
        sides = [_seconds(attention_terms(c, layer.attention, x)) for x in (prefill, decode)]
        half = _seconds(attention_terms(c, layer.attention, mixed))
        batch = _seconds(_op_terms(c, attention_ops(c, layer.attention, mixed)))
        assert half == (max(sides) if apart else batch)
        assert (batch > half * (1 + 1e-6)) if apart else (half != max(sides))
    # the busiest rank's prefill reads its own tokens only: the same half whatever the other ranks prefill
    c = context(DSV3, DEP8, "sglang", H200, DEP8.gpus)
    wide = mixed._replace(prefill_tokens=6000.0)
    assert attention_terms(c, layer.attention, wide) == attention_terms(c, layer.attention, mixed)
    # and the step (same MoE tokens) is cheaper than the decode rows and the prompt run as one batch
    sglang = step_fn(DSV3, DEP8, "sglang", H200, DEP8.gpus, "mixed")
    vllm = step_fn(DSV3, DEP8, "vllm", H200, DEP8.gpus, "mixed")
    assert sglang(mixed).rates_ms != vllm(mixed).rates_ms
