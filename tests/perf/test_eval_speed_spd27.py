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
