"""The evaluation round spd27 (tests/bench/bench_predict.py after the merges of skew26, fa2-26, pf26 and spd26):
memo keys that carry everything their builders read, and the eager host's launch counts taken without building op
lists that the halves' memos built already. Each is checked against the form before (the same numbers) and for
what its key tells apart."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import costing, eager_host, halves
from autotune.perf.layers import layer_groups
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import ffn_kernel_ops, step_tokens
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


@pytest.mark.parametrize("name, preset", (("deepseek-v4.1-flash", "rtx-pro-6000-x8"), ("qwen3-235b-a22b", "h200-x8")))
def test_eager_ffn_launches_come_from_the_costed_halves(name, preset, monkeypatch):
    """Once a step has costed its FFN halves (halves.ffn_kernel_terms), the eager host counts their launches
    without building oplist.ffn_ops again (the kernels' and norms' counts noted where the halves built them, the
    collectives built alone), and the count is the op list's, counted afresh on a new Context (pf26's rule:
    eager_host.op_launches)."""
    m, hw = load_model(name), load_preset(preset)
    plan = PhasePlan(gpus=tuple(range(8)), tp=4, dp=2, ep=8, dp_attention=True)
    groups = layer_groups(m)
    for x in (
        StepInput(decode_seqs=300.0, decode_ctx=2000.0),
        StepInput(prefill_tokens=8192.0, prefill_ctx=4096.0),
        StepInput(decode_seqs=12.0, decode_ctx=5000.0, prefill_tokens=700.0, prefill_ctx=350.0),
    ):
        fresh = eager_host.stage_launches(context(m, plan, "vllm", hw, plan.gpus), groups, x)
        c = context(m, plan, "vllm", hw, plan.gpus)
        ffn_groups, c.memo_keys["ffn_ids"] = _ffn_facts(m)  # as ops._step costs the FFN halves
        decode = StepInput(x.decode_seqs, x.decode_ctx)  # the input of a layer that skips prompt tokens
        for ffn, in_prefill, _ in ffn_groups:
            halves.ffn_kernel_terms(c, ffn, step_tokens(x if in_prefill else decode))
        with monkeypatch.context() as patch:
            patch.setattr(eager_host, "ffn_ops", _not_built)
            eager_host._HALF_LAUNCHES.clear()
            assert eager_host.stage_launches(c, groups, x) == fresh


def _not_built(*args):
    raise AssertionError("ffn_ops built only to count launches")
