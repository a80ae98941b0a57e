"""The bit-identical speed-ups of the evaluation round spd26 (tests/bench/bench_predict.py, after the attention-DP
merge): the attention half's projections costed once for the layer kinds of equal projections (V4's kinds differ in
their kernels only) and equal layer kinds' attention costed once (DeepSeek-V3's dense and MoE layers). Each is
checked against the form before (the op list costed whole: the same floats) and for the sharing it adds."""

from __future__ import annotations

import pytest

from autotune.catalog import load_preset
from autotune.catalog.models import list_models, load_model
from autotune.perf import costing, halves, oplist
from autotune.perf.layers import layer_groups
from autotune.perf.opcore import StepInput, context
from autotune.search.random_plans import random_plans
from autotune.specs import PhasePlan, Workload
from autotune.specs.errors import MiTuneError

CASES = (
    ("deepseek-v4.1-flash", "rtx-pro-6000-x8"),
    ("deepseek-v3", "rtx-pro-6000-x8"),
    ("qwen3-235b-a22b", "h200-x8"),
    ("glm-5.3-flash", "rtx-pro-6000-x8"),
    ("qwen3.5-397b-a17b", "h200-x8"),
)
INPUTS = (
    StepInput(decode_seqs=1.0, decode_ctx=4608.0),
    StepInput(decode_seqs=37.5, decode_ctx=3000.0, decode_width=3.0),
    StepInput(prefill_tokens=2048.0, prefill_ctx=1024.0),
    StepInput(decode_seqs=12.0, decode_ctx=5000.0, prefill_tokens=700.0, prefill_ctx=350.0),
    StepInput(0.0, 0.0, 4096.0, 2048.0, 1.0, 4096.0),  # a lone prompt on one DP rank
    StepInput(31.9, 4608.0, 2048.0, 2048.0, 1.0, 2048.0),  # prompts and decodes, the busiest rank's prompt placed
    StepInput(decode_seqs=3.0, decode_ctx=200.0, prefill_tokens=24.0, prefill_ctx=12.0),  # short: MLA absorbed
)


def _clear() -> None:
    for value in vars(halves).values():
        if isinstance(value, costing.BoundedMemo):
            value.cache_clear()


def _contexts(model_name: str, preset: str, count: int):
    model, hw = load_model(model_name), load_preset(preset)
    for plan in random_plans(model, hw, Workload(), count, seed=26):
        for phase in plan.phases.values():
            yield model, context(model, phase, plan.engine, hw, phase.replica_gpus(0)[: phase.stage_ranks])


def _kinds(model):
    """The attention of each layer kind (layers.layer_groups), as the step costs them."""
    return [layer.attention for layer, _ in layer_groups(model)]


@pytest.mark.parametrize(("model_name", "preset"), CASES)
def test_attention_terms_are_the_whole_op_list_costed_bit_for_bit(model_name, preset):
    """attention_terms (projections' terms remembered across layer kinds, then the kernels') is _op_terms of
    attention_ops, the form before, for every layer kind and input, the DP-apart steps' sides included."""
    _clear()
    for _, c in _contexts(model_name, preset, 12):
        for att in _kinds(c.model):
            for x in INPUTS:
                if x.prefill_tokens and x.decode_seqs and halves.dp_prefill_apart(c.phase, c.engine):
                    continue  # _apart_terms: a side's terms, checked through its own input
                assert halves.attention_terms(c, att, x) == costing._op_terms(c, oplist.attention_ops(c, att, x))


def test_attention_parts_are_attention_ops_in_two():
    """attention_ops is the projections of attention_parts' (rows, absorbed rows) followed by its kernels."""
    for model_name, preset in CASES:
        for _, c in _contexts(model_name, preset, 4):
            for att in _kinds(c.model):
                for x in INPUTS:
                    rows, absorbed_rows, kernels = oplist.attention_parts(c, att, x)
                    ops: list = []
                    oplist._projection_ops(ops, c, att, rows, absorbed_rows)
                    assert oplist.attention_ops(c, att, x) == ops + kernels
                    assert all(op.kind != "collective" for op in ops)
                assert oplist.attention_parts(c, att, StepInput()) is None


def test_v4_layer_kinds_of_equal_projections_share_their_terms():
    """V4.1's six layer kinds have four distinct projections (their compressed / sparse / windowed kernels differ
    only): one decode step's attention halves cost four projection op lists, not six (before: every kind its own)."""
    model = load_model("deepseek-v4.1-flash")
    kinds = _kinds(model)
    distinct = {(a.params, a.replicated_params, a.kv_elems_per_token, a.num_heads, a.num_kv_heads) for a in kinds}
    assert len(kinds) == 6 and len(distinct) == 4
    _, c = next(_contexts("deepseek-v4.1-flash", "rtx-pro-6000-x8", 1))
    _clear()
    x = StepInput(decode_seqs=13.25, decode_ctx=4608.0)
    first = {}
    for att in kinds:
        halves.attention_terms(c, att, x)
        first.setdefault(halves._attention_ids(model)[1][id(att)], att)
    assert len(halves._PROJECTION_TERMS) == len(first) == len(distinct)
    assert len(halves._ATTENTION_TERMS) == len(kinds)


def test_equal_layer_kinds_share_one_attention_half(monkeypatch):
    """DeepSeek-V3's dense and MoE layers have equal attention: one costed half for both (before: one per kind,
    equal floats)."""
    model = load_model("deepseek-v3")
    dense, moe = _kinds(model)
    assert dense == moe and dense is not moe
    _, c = next(_contexts("deepseek-v3", "rtx-pro-6000-x8", 1))
    _clear()
    x = StepInput(decode_seqs=9.0, decode_ctx=2500.0)
    built = []
    monkeypatch.setattr(halves, "attention_parts", lambda *a: built.append(a) or oplist.attention_parts(*a))
    assert halves.attention_terms(c, dense, x) is halves.attention_terms(c, moe, x)
    assert len(built) == 1


def test_layer_kinds_sharing_projections_build_equal_projection_ops():
    """The projection ids (_attention_ids, PROJECTION_FREE) join only layer kinds whose projection ops are equal,
    for every catalog model under contexts of each engine, layout and dtype the search samples."""
    hw = load_preset("h200-x8")
    for model in list_models():
        shared = halves._attention_ids(model)[1]
        kinds = _kinds(model)
        groups = {}
        for att in kinds:
            groups.setdefault(shared[id(att)], []).append(att)
        try:
            plans = random_plans(model, hw, Workload(), 6, seed=26)
        except MiTuneError:  # a checkpoint only vllm-ascend loads
            continue
        for plan in plans:
            phase = next(iter(plan.phases.values()))
            c = context(model, phase, plan.engine, hw, phase.replica_gpus(0)[: phase.stage_ranks])
            for members in groups.values():
                for rows, absorbed_rows in ((1.0, 1.0), (300.5, 12.0), (8192.0, 0.0)):
                    built = []
                    for att in members:
                        ops: list = []
                        oplist._projection_ops(ops, c, att, rows, absorbed_rows)
                        built.append(ops)
                    assert all(ops == built[0] for ops in built)


def test_projections_are_shared_by_plans_that_differ_beyond_them():
    """The projections' memo key holds only what they read of the Context (_projection_prefix): a DP-2 phase whose
    rank runs the rows of a DP-1 phase's costs them once (before: per attention prefix, which holds dp), and the
    terms are each phase's own op list's."""
    hw = load_preset("rtx-pro-6000-x8")
    model = load_model("deepseek-v4.1-flash")
    one = PhasePlan(tp=2, gpus=(0, 1))
    two = PhasePlan(tp=2, dp=2, dp_attention=True, gpus=(0, 1, 2, 3))
    contexts = [context(model, phase, "vllm", hw, phase.gpus) for phase in (one, two)]
    att = _kinds(model)[0]
    _clear()
    for c, x in zip(contexts, (StepInput(5.0, 4608.0), StepInput(10.0, 4608.0)), strict=True):
        assert halves.attention_terms(c, att, x) == costing._op_terms(c, oplist.attention_ops(c, att, x))
    assert halves._projection_prefix(contexts[0]) == halves._projection_prefix(contexts[1])
    assert halves._attention_prefix(contexts[0]) != halves._attention_prefix(contexts[1])
    assert len(halves._PROJECTION_TERMS) == 1 and len(halves._ATTENTION_TERMS) == 2
