"""vLLM's FlashAttention-2 decode (sm_80 / sm_86 / sm_89 / sm_120): KV splits and packed query heads only for
one-token GQA batches, one CTA per (sequence, query head) walking the whole KV otherwise (perf/tiles.py
fa2_decode_streams, perf/fa2_decode.py)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import rates, tiles
from autotune.perf.fa2_decode import FA2_COPIES_SOURCE
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput
from autotune.specs import Kernels, PhasePlan
from tests.perf.boxes import mha_model, sm80_box

LLAMA70 = load_model("llama-3.1-70b")  # 64 query heads, 8 KV heads, head dim 128
A100 = sm80_box()
TP8 = PhasePlan(gpus=tuple(range(8)), tp=8, kernels=Kernels())


def _ops(c, x):
    return attention_ops(c, c.model.layers[-1].attention, x)


def _decode(ops):
    return next(op for op in ops if op.kind == "attention" and op.bucket == "decode")


def _fill(c, streams):
    return rates.decode_fill_speed(streams, c.table.get("attention", "bf16", "decode").gbs)


def test_fa2_is_vllms_auto_kernel_below_hopper_only():
    assert context(LLAMA70, TP8, "vllm", A100, TP8.gpus).fa2_decode
    assert context(LLAMA70, TP8, "vllm", load_preset("l40s-x8"), TP8.gpus).fa2_decode  # sm_89
    assert not context(LLAMA70, TP8, "sglang", A100, TP8.gpus).fa2_decode  # FlashInfer there
    assert not context(LLAMA70, TP8, "vllm", load_preset("h200-x8"), TP8.gpus).fa2_decode  # FA3
    flashinfer = dataclasses.replace(TP8, kernels=Kernels(attention="flashinfer"))
    assert not context(LLAMA70, flashinfer, "vllm", A100, TP8.gpus).fa2_decode


def test_mha_decode_runs_one_unsplit_cta_per_head():
    """MHA never swaps, so never splits: a sequence's 8 heads on a rank are 8 CTAs each streaming their KV alone
    (old: the full decode bandwidth, as if split over the SMs), one launch without a combine."""
    c = context(mha_model(LLAMA70), TP8, "vllm", A100, TP8.gpus)
    op = _decode(_ops(c, StepInput(decode_seqs=1, decode_ctx=32768)))
    assert op.speed == pytest.approx(c.attention_speed * _fill(c, 8))
    assert op.speed < c.attention_speed / 4
    assert op.count == 1.0  # the split kernel alone: no combine
    # 64 sequences x 8 heads fill the A100's 108 SMs: the whole bandwidth
    assert _decode(_ops(c, StepInput(decode_seqs=64, decode_ctx=32768))).speed == c.attention_speed


def test_gqa_decode_keeps_its_splits_and_pays_the_swap_copies():
    """Llama-70B at TP 8: one KV head, 8 query heads per rank; one sequence at 64k is split 128 ways (at most
    128; its 512 KV blocks allow it) and keeps the full rate, with the split kernel's combine; the swap adds its
    output copy (one sequence: the query's reshape is a view)."""
    c = context(LLAMA70, TP8, "vllm", A100, TP8.gpus)
    assert tiles.fa2_swapped_splits(1, 1, 8, 65536, 128, 108) == 128
    ops = _ops(c, StepInput(decode_seqs=1, decode_ctx=65536))
    assert _decode(ops).speed == c.attention_speed and _decode(ops).count == tiles.ATTENTION_DECODE_LAUNCHES
    copies = next(op for op in ops if op.source == FA2_COPIES_SOURCE)
    assert copies.count == 1


@pytest.mark.parametrize(
    "x", [StepInput(decode_seqs=1, decode_ctx=65536, decode_width=2),  # a speculative verify
          StepInput(decode_seqs=1, decode_ctx=65536, prefill_tokens=512, prefill_ctx=256)],  # a mixed step
)  # fmt: skip
def test_a_longer_query_in_the_call_leaves_gqa_unswapped_and_unsplit(x):
    """max_seqlen_q > 1: no swap, no split; the 8 query-head CTAs each stream the one KV head (old: full rate)."""
    c = context(LLAMA70, TP8, "vllm", A100, TP8.gpus)
    ops = _ops(c, x)
    assert _decode(ops).speed == pytest.approx(c.attention_speed * _fill(c, 1))
    assert not any(op.source == FA2_COPIES_SOURCE for op in ops)


def test_sglang_and_fa3_decodes_are_unchanged():
    c = context(mha_model(LLAMA70), TP8, "sglang", A100, TP8.gpus)  # FlashInfer splits to fill the SMs
    op = _decode(_ops(c, StepInput(decode_seqs=1, decode_ctx=32768)))
    assert op.speed == c.attention_speed and op.count == tiles.ATTENTION_DECODE_LAUNCHES  # split kernel + combine


def test_num_splits_heuristic_follows_flash_api():
    # flash_api.cpp's own example: 48 tiles on 108 SMs take 2 splits (efficiency 0.89), not 3 (0.67)
    assert tiles.fa2_num_splits(48, 108, 64) == 2
    assert tiles.fa2_num_splits(173, 216, 64) == 1  # 0.8 of the slots filled: one split
    assert tiles.fa2_num_splits(1, 216, 3) == 3  # at most the KV blocks
    assert tiles.fa2_num_splits(4, 216, 1) == 1
    assert tiles.fa2_kv_block(64) == 256 and tiles.fa2_kv_block(128) == 128 and tiles.fa2_kv_block(256) == 64


def test_swap_copies_follow_the_reshapes():
    assert tiles.fa2_swap_copies(1, 8, 1) == (1, 1)  # one sequence: q and LSE reshape as views, out copied back
    assert tiles.fa2_swap_copies(32, 1, 1) == (1, 1)  # one KV head: the same
    assert tiles.fa2_swap_copies(32, 2, 1) == (3, 2)  # q and LSE copied too
    assert tiles.fa2_swap_copies(32, 2, 4) == (2, 2)  # split: the combine writes the LSE in place


def test_an_unswapped_gqa_call_runs_a_wave_of_ctas_per_query_head():
    """A verify of 64 sequences on Llama-70B TP 8: 64 x 8 query-head CTAs, 5 waves on 108 SMs (old: the packed
    64 CTAs, one wave); the one-token decode keeps the packed count."""
    c = context(LLAMA70, TP8, "vllm", A100, TP8.gpus)

    def waves(x):
        return next(op.count for op in _ops(c, x) if op.source == "kernels.attention (CTA waves)")

    assert waves(StepInput(decode_seqs=64, decode_ctx=4096, decode_width=2)) == 5 == -(-64 * 8 // 108)
    assert waves(StepInput(decode_seqs=64, decode_ctx=4096)) == 1
