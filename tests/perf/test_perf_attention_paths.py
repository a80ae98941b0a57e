"""Decode attention with capped KV splits (vLLM's FA3 under CUDA graphs on sm_90: perf/tiles.py
FA3_GRAPH_MAX_SPLITS, perf/rates.py PER_SM_STREAM_GBS) and the MLA prefill path's extra kernels (perf/mla.py). Each test
fails on the model before they were modelled."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import rates, tiles
from autotune.perf.attention_choice import decode_split_cap
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import Kernels, PhasePlan

H200 = load_preset("h200-x8")
DSV3 = dataclasses.replace(load_model("deepseek-v3"), dense_dtype="bf16")
LLAMA70 = load_model("llama-3.1-70b")


def _decode(c, x):
    att = c.model.layers[-1].attention
    return next(op for op in attention_ops(c, att, x) if op.kind == "attention" and op.bucket == "decode")


def test_split_cap_is_vllm_fa3_on_hopper_only():
    assert decode_split_cap("vllm", "sm_90", "auto") == tiles.FA3_GRAPH_MAX_SPLITS == 32
    assert decode_split_cap("sglang", "sm_90", "auto") == 0  # SGLang passes num_splits=0: FA3's own heuristic
    assert decode_split_cap("vllm", "sm_90", "flashinfer") == 0
    assert decode_split_cap("vllm", "sm_100", "auto") == 0  # FlashInfer / FlashInfer MLA by default there


def test_split_ctas_follow_fa3_rules():
    assert tiles.decode_split_ctas(1, 512, 132, 32) == 1  # <= 4 KV blocks: one split
    assert tiles.decode_split_ctas(1, 131072, 132, 32) == 32  # capped
    assert tiles.decode_split_ctas(2, 131072, 132, 32) == 64
    assert tiles.decode_split_ctas(200, 131072, 132, 32) == 200  # more tiles than SMs: unsplit
    assert tiles.decode_split_ctas(1, 131072, 0, 32) == 0  # no SM count: no rule


def test_one_mla_sequence_streams_at_32_ctas_on_vllm_hopper():
    """One long DeepSeek-V3 sequence on an H200: one latent KV head, 32 splits, 32 SMs streaming; the op takes at
    least its KV bytes over 32 x PER_SM_STREAM_GBS (old: the full decode bandwidth), while SGLang (uncapped)
    and a batch that fills the SMs keep the full bandwidth."""
    phase = PhasePlan(gpus=(0,))
    vllm, sglang = (context(DSV3, phase, engine, H200, (0,)) for engine in ("vllm", "sglang"))
    x = StepInput(decode_seqs=1, decode_ctx=131072)
    op = _decode(vllm, x)
    kv_bytes = 131072 * DSV3.layers[-1].attention.kv_read_elems_per_token * vllm.kv_elem_bytes
    assert cost_ops(vllm, [op]).time_s >= kv_bytes / (32 * rates.PER_SM_STREAM_GBS * 1e9)
    assert op.speed < 0.5 * vllm.attention_speed
    assert _decode(sglang, x).speed == sglang.attention_speed
    full = StepInput(decode_seqs=64, decode_ctx=131072)  # 64 x 2 splits = 128 CTAs: the SMs stream at full rate
    assert _decode(vllm, full).speed == vllm.attention_speed


def test_gqa_tp8_single_kv_head_pays_the_cap():
    """Llama-3.1-70B at TP 8 keeps one KV head per rank: one sequence runs 32 CTAs on vLLM's FA3 (old: full rate)."""
    phase = PhasePlan(gpus=tuple(range(8)), tp=8, kernels=Kernels())
    c = context(LLAMA70, phase, "vllm", H200, phase.gpus)
    one = _decode(c, StepInput(decode_seqs=1, decode_ctx=65536))
    gbs = c.table.get("attention", "bf16", "decode").gbs
    assert one.speed == c.attention_speed * min(1.0, 32 * rates.PER_SM_STREAM_GBS / gbs) < c.attention_speed
    # TP 4 keeps two KV heads per rank; every rank reads each sequence's whole context (17 KV blocks of 128 at
    # 2,100 tokens: 17 splits), TP splits heads, not the context
    phase = PhasePlan(gpus=tuple(range(4)), tp=4, kernels=Kernels())
    c = context(LLAMA70, phase, "vllm", H200, phase.gpus)
    short = _decode(c, StepInput(decode_seqs=1, decode_ctx=2100))
    assert short.speed == c.attention_speed * min(1.0, 2 * 17 * rates.PER_SM_STREAM_GBS / gbs)


def test_mla_prefill_builds_the_key_and_vllm_copies_the_output():
    """A DeepSeek-V3 prefill row takes the MHA path: the key is materialised per head (nope part from kv_b, the rope
    part broadcast) and vLLM copies the attention output into the layer output (perf/mla.py); a GQA layer has
    neither (old: no such ops)."""
    phase = PhasePlan(gpus=(0,))
    tokens, heads = 4096.0, DSV3.layers[-1].attention.num_heads
    x = StepInput(prefill_tokens=tokens, prefill_ctx=2048)
    for engine, copies in (("vllm", 1), ("sglang", 0)):
        c = context(DSV3, phase, engine, H200, (0,), graph_tokens=0.0)  # SGLang: an eager step (no prefill graph)
        ops = {op.source: op for op in attention_ops(c, DSV3.layers[-1].attention, x)}
        assert ops["mla prefill key concat"].nbytes == tokens * (heads * (2 * 192 - 64) + 64) * 2  # DeepSeek: k 192
        assert ("mla prefill output copy" in ops) == bool(copies)
        if copies:
            assert ops["mla prefill output copy"].nbytes == 2 * tokens * heads * 128 * 2  # v 128, read + write
    c = context(LLAMA70, phase, "vllm", H200, (0,))
    assert not any(op.source.startswith("mla") for op in attention_ops(c, LLAMA70.layers[0].attention, x))


def test_blackwell_prefill_rate_follows_head_dim():
    """B200 prefill attention at head dim 64 runs at 0.391 of the dense peak against 0.591 at 128
    (calibration.yaml kernel-fa4-b200-fwd-headdim; old: one 0.60 fraction for every head dim on sm_100)."""
    assert rates.prefill_head_dim_speed("sm_100", 64, False) * rates.ATTENTION_PREFILL_FRACTION == pytest.approx(0.391)
    assert rates.prefill_head_dim_speed("sm_100", 128, False) * rates.ATTENTION_PREFILL_FRACTION == pytest.approx(0.591)
    assert rates.prefill_head_dim_speed("sm_100", 256, False) == rates.prefill_head_dim_speed("sm_100", 128, False)
    assert rates.prefill_head_dim_speed("sm_100", 64, True) == 1.0  # a probed prefill rate is the box's own
