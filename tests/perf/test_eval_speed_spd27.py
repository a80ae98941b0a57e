"""The evaluation round spd27 (tests/bench/bench_predict.py after the merges of skew26, fa2-26, pf26 and spd26):
memo keys that carry everything their builders read, and the eager host's launch counts taken without building op
lists that the halves' memos built already. Each is checked against the form before (the same numbers) and for
what its key tells apart."""

from __future__ import annotations

import dataclasses

from autotune.catalog import load_model, load_preset
from autotune.perf import costing, halves
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_kernel_ops
from autotune.perf.ops import _ffn_facts
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
R1 = load_model("deepseek-v3")  # block-FP8 experts: vLLM's Triton MoE pays tile-wave time (test_moe_tile_waves)


def test_ffn_memo_key_carries_the_moe_tile_waves():
    """halves.ffn_kernel_terms remembers the FFN terms across plans; ffn_shape.moe_wave_gemms reads
    Context.moe_tile_waves, so a Context differing only in it gets its own terms (the key before shared them)."""
    gpus = tuple(range(8))
    c = context(R1, PhasePlan(gpus=gpus, tp=8), "vllm", H200, gpus)
    assert c.moe_tile_waves
    off = dataclasses.replace(c, moe_tile_waves=(), memo_keys={}, rate_terms={}, ffn_shapes={})
    ffn = R1.layers[-1].ffn
    waves, none = halves.ffn_kernel_terms(c, ffn, 8192.0), halves.ffn_kernel_terms(off, ffn, 8192.0)
    assert c.memo_keys["ffn"] != off.memo_keys["ffn"]
    assert waves[0] != none[0]
    assert none[0] == costing._op_terms(off, ffn_kernel_ops(off, ffn, 8192.0))  # off's own, not c's


def test_equal_ffn_specs_share_their_costed_kernels():
    """V4's layers that skip prompt tokens hold FfnSpecs equal to (not the same objects as) the others': once
    ops._ffn_cost has noted the model's id map (ops._ffn_facts), halves.ffn_kernel_terms keys them as the model's
    first, so the two step groups share one entry (the key before held each object's id: two entries, each
    costed), and the shared terms are each spec's own."""
    m, hw = load_model("deepseek-v4.1-flash"), load_preset("rtx-pro-6000-x8")
    plan = PhasePlan(gpus=tuple(range(4)), tp=4)
    (first, _, _), (other, in_prefill, _) = _ffn_facts(m)[0]
    assert first == other and first is not other and not in_prefill
    c = context(m, plan, "vllm", hw, plan.gpus)
    c.memo_keys["ffn_ids"] = _ffn_facts(m)[1]
    shared = halves.ffn_kernel_terms(c, first, 96.0)
    assert halves.ffn_kernel_terms(c, other, 96.0) is shared
    fresh = context(m, plan, "vllm", hw, plan.gpus)
    assert shared[0] == costing._op_terms(fresh, ffn_kernel_ops(fresh, other, 96.0))
