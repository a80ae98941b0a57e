"""The evaluation round spd36 (bench_predict_ir after stop 35): calls taken out of the step's hot path. Each written-out
path is checked bit for bit against the calls it replaces (tests/bench/prediction_snapshot.py checks whole
predictions)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf import costing, halves, ops
from autotune.perf import efficiency as eff
from autotune.perf.costing import Cost, _add_terms
from autotune.perf.layers import layer_groups
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import decode_part
from autotune.specs import PhasePlan, Speculative

H200 = load_preset("h200-x8")
RTX = load_preset("rtx-pro-6000-x8")
GPUS = tuple(range(8))
STEPS = (
    StepInput(decode_seqs=24.0, decode_ctx=3000.0, decode_width=2.0),
    StepInput(decode_seqs=24.0, decode_ctx=3000.0, prefill_tokens=1500.0, prefill_ctx=700.0, decode_width=2.0),
    StepInput(prefill_tokens=4096.0, prefill_ctx=2048.0),
)
CASES = (  # (model, box, engine, phase): V4.1's layer kinds in and out of prefill, SGLang's DP ranks apart, V3
    ("deepseek-v4.1-flash", RTX, "vllm", PhasePlan(gpus=GPUS[:4], tp=4)),
    ("deepseek-v4.1-flash", RTX, "sglang", PhasePlan(gpus=GPUS[:4], tp=1, dp=4, ep=4, dp_attention=True)),
    ("deepseek-v3", H200, "vllm", PhasePlan(gpus=GPUS, tp=8, pp=1)),
    ("deepseek-v3", H200, "sglang", PhasePlan(gpus=GPUS, tp=4, pp=2)),
)


def _reference_halves(c, groups, inputs) -> Cost:
    """add_attention_halves as it was: _add_terms(total, attention_terms(...), count / pp) kind by kind."""
    total = Cost()
    for layer, count in groups:
        _add_terms(total, halves.attention_terms(c, layer.attention, inputs[layer.in_prefill]), count / c.phase.pp)
    return total


@pytest.mark.parametrize("model_name,hw,engine,phase", CASES)
def test_attention_halves_add_as_the_calls_did(model_name, hw, engine, phase):
    """The layer kinds' attention terms looked up (the memo read in place) and added in add_attention_halves give
    the floats and by_rate notes of the per-kind calls, cold and remembered."""
    halves._ATTENTION_TERMS.clear()
    halves._ATTENTION_SUMS.clear()
    model = load_model(model_name)
    c = context(model, phase, engine, hw, phase.gpus[: phase.stage_ranks])
    groups = layer_groups(model)
    for x in STEPS:
        inputs = {True: x, False: decode_part(x) if x.prefill_tokens else x}
        for _ in range(2):  # the first costs the halves, the second finds the step's sums remembered
            total = Cost()
            halves.add_attention_halves(total, c, groups, inputs, x)
            ref = _reference_halves(c, groups, inputs)
            assert (total.compute_s, total.memory_s, total.comm_s) == (ref.compute_s, ref.memory_s, ref.comm_s)
            assert total.by_rate == ref.by_rate


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("pp", [1, 2])
def test_step_facts_hold_the_scheduler_overhead_facts(engine, pp):
    """_step_facts reads eff.scheduler_overhead_ms's profile facts once: the engine's scheduler CPU time and whether
    it overlaps the GPU step at this pp; the step's overhead written from them is eff.scheduler_overhead_ms's."""
    model = load_model("deepseek-v3")
    phase = PhasePlan(gpus=GPUS, tp=8 // pp, pp=pp)
    c = context(model, phase, engine, H200, GPUS[: phase.stage_ranks])
    facts = ops._step_facts(c, 1, (), (0.0, 0.0))
    assert facts.scheduler_cpu_ms == profile(engine).scheduler_cpu_ms
    assert facts.scheduler_overlapped == eff.scheduler_overlapped(engine, pp)
    for gpu_ms in (0.01, 1.0, 50.0):
        written = (
            max(eff.OVERLAP_EXPOSED_MS, facts.scheduler_cpu_ms - gpu_ms)
            if facts.scheduler_overlapped
            else facts.scheduler_cpu_ms
        )
        assert written == eff.scheduler_overhead_ms(engine, pp, gpu_ms)


@pytest.mark.parametrize("model_name,hw,engine,phase", CASES)
def test_draft_layer_adds_as_add_layer_did(model_name, hw, engine, phase):
    """_add_draft off overlap and dcp (the attention terms, then _ffn_cost's memo in place) adds what _add_layer and
    the head added."""
    model = load_model(model_name)
    phase = PhasePlan(**{**phase.__dict__, "speculative": Speculative("mtp", 2)})
    c = context(model, phase, engine, hw, phase.gpus[: phase.stage_ranks])
    ops._step_facts(c, 3, (), (0.0, 0.0))  # notes the FFN id map (memo_keys "ffn_ids") as step_fn does
    x = StepInput(decode_seqs=16.0, decode_ctx=2500.0, decode_width=3.0)
    for _ in range(2):
        total, ref = Cost(), Cost()
        ops._add_draft(total, c, x, 0.5)
        one, passes = StepInput(x.decode_seqs, x.decode_ctx), (x.decode_width - 1) * 0.5
        ops._add_layer(ref, c, model.layers[-1], one, passes)
        halves.add_head(ref, c, x.decode_seqs, passes)
        assert (total.compute_s, total.memory_s, total.comm_s) == (ref.compute_s, ref.memory_s, ref.comm_s)
        assert total.by_rate == ref.by_rate


def test_rate_terms_are_shared_by_contexts_of_one_table_and_stream_caps():
    """A Context's rate terms (costing._rate_terms) are remembered for every Context of its rates table and weight-
    stream caps, which is all they read: ops.step_fn copies them in, and they equal the terms costed afresh."""
    model = load_model("deepseek-v4.1-flash")
    tp4, tp8 = PhasePlan(gpus=GPUS[:4], tp=4), PhasePlan(gpus=GPUS, tp=8)
    first = context(model, tp4, "vllm", RTX, GPUS[:4])
    key = ("gemm", first.dense_dtype, "m<=16")
    terms = costing._rate_terms(first, key)
    other = context(model, tp8, "sglang", RTX, GPUS)
    assert costing.shared_rate_terms(other)[key] == terms
    ops.step_fn(model, tp8, "sglang", RTX, GPUS, "decode")  # a step_fn's Context starts with them
    fresh = context(model, tp8, "sglang", RTX, GPUS)
    assert costing._rate_terms(fresh, key) == terms
    capped = dataclasses.replace(fresh, moe_stream_gbs=100.0)  # another cap: its own terms
    assert costing.shared_rate_terms(capped) is not costing.shared_rate_terms(fresh)
    moe_key = ("grouped_moe", fresh.expert_dtype, "m<=16")
    assert costing._rate_terms(capped, moe_key)[1] == 100.0 * costing.GB
