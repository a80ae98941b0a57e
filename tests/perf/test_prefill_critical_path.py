"""Prefill attention bounded by its longest CTA (perf/rates.py critical_path_speed, perf/tiles.py
prefill_longest_cta): a causal prompt's last query block attends the whole prompt on one SM, so a grid of few or
unequal CTAs takes at least that block's time at the SM's share of the rate. Fails on the model before it (the
prefill op ran at the full-GPU rate whatever its grid)."""

from __future__ import annotations

import dataclasses

from autotune.catalog import load_model, load_preset
from autotune.perf import rates, tiles
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
L40S = load_preset("l40s-x8")
LLAMA70 = load_model("llama-3.1-70b")


def _prefill(c, x):
    att = c.model.layers[0].attention
    return next(op for op in attention_ops(c, att, x) if op.kind == "attention" and op.bucket == "prefill")


def _tp8(hw):
    phase = PhasePlan(gpus=tuple(range(8)), tp=8)
    return context(LLAMA70, phase, "vllm", hw, phase.gpus)


def test_longest_cta_is_the_last_query_block():
    assert tiles.prefill_longest_cta(4096, 2048, 1) == (128, 4096)  # fresh prompt: attends all 4,096
    assert tiles.prefill_longest_cta(64, 32, 8) == (128, 64)  # 8 query heads packed: 512 rows, one block of 128
    assert tiles.prefill_longest_cta(16, 8, 1) == (16, 16)  # fewer rows than a block
    assert tiles.prefill_longest_cta(512, 8192 + 256, 1) == (128, 8192 + 512)  # a chunk after an 8k prefix
    assert tiles.prefill_longest_cta(0, 0, 1) == (0, 0)


def test_critical_path_speed_bounds():
    assert rates.critical_path_speed(1e-3, 1e6, 1e3, 600.0, 132) == 1.0  # the full grid dominates
    # one CTA of 1 GFLOP at 600 / 132 TFLOPS per SM takes 220 us: a 22 us full-GPU time runs at a tenth
    assert abs(rates.critical_path_speed(22e-6, 1e9, 0.0, 600.0, 132) - 22e-6 / (1e9 / (600e12 / 132))) < 1e-12
    assert rates.critical_path_speed(1e-6, 1e9, 0.0, 600.0, 0) == 1.0  # no SM count: no rule


def test_one_long_prompt_on_one_kv_head_takes_its_last_block():
    """Llama-3.1-70B at TP 8 keeps one KV head (8 query heads) per rank: one 1,024-token prompt runs 64 packed
    query blocks (fewer than the 132 SMs) whose last attends all 1,024 keys; the op takes at least that block's
    FLOPs at one SM's share of the prefill rate (old: the full-GPU rate, about 4x faster)."""
    c = _tp8(H200)
    att = LLAMA70.layers[0].attention
    op = _prefill(c, StepInput(prefill_tokens=1024, prefill_ctx=512))
    tflops = c.table.get("attention", "bf16", "prefill").tflops * _full_speed(c)
    cta_s = 2 * 128 * 1024 * att.score_dim / (tflops * 1e12 / c.sms)
    assert cost_ops(c, [op]).time_s >= 0.99 * cta_s
    assert op.speed < 0.5 * _full_speed(c)
    # a batch of 64 such prompts fills the GPU: full rate
    assert _prefill(c, StepInput(prefill_tokens=64 * 1024, prefill_ctx=512)).speed == _full_speed(c)


def test_unpacked_heads_fill_more_sms_on_fa2():
    """FA2 (vLLM on sm_89) keeps one query head per CTA: a 64-token prompt's CTA holds 64 rows where FA3 packs its
    8 query heads into 128-row blocks, so the longest CTA is half as long and the grid loses less to it."""
    x = StepInput(prefill_tokens=4 * 64, prefill_ctx=32)
    hopper, ada = _tp8(H200), _tp8(L40S)
    assert _prefill(hopper, x).speed / _full_speed(hopper) < _prefill(ada, x).speed / _full_speed(ada)


def test_sparse_and_latent_prefill_keep_their_speed():
    dsv3 = dataclasses.replace(load_model("deepseek-v3"), dense_dtype="bf16")
    c = context(dsv3, PhasePlan(gpus=(0,)), "vllm", H200, (0,))
    att = dsv3.layers[-1].attention
    # 2048-token prompt: above the 512 query rows vLLM's FLASH_ATTN_MLA runs on the absorbed path (test_mla_paths)
    op = next(o for o in attention_ops(c, att, StepInput(prefill_tokens=2048, prefill_ctx=1024))
              if o.kind == "attention" and o.bucket == "prefill")  # fmt: skip
    from autotune.perf.oplist import _attention_shape

    assert op.speed == _attention_shape(c, att).prefill_speed


def _full_speed(c):
    from autotune.perf.oplist import _attention_shape

    return _attention_shape(c, c.model.layers[0].attention).prefill_speed


def test_hopper_causal_prefill_reproduces_the_fa3_causal_panel():
    """A serving prefill is causal: at 16k tokens (the FA3 paper's setup, hidden 2048, batch x seqlen = 16k,
    calibration.yaml kernel-fa3-h100-fwd-headdim) the model's H100 causal prefill, counted as the paper counts it
    (half the square), sits within 5% of the paper's causal panel at head dims 64 / 128 / 256: 473 / 616 / 642
    TFLOPS (old: the non-causal rates put head dim 256 at 739, 15% fast). The H200 has the H100 SXM's 132 SMs and
    989 dense TFLOPS. The paper's FA3 reads contiguous K/V (TMA), not vLLM's paged cache: the Context without
    the paged-KV path (Context.fa3_paged_prefill, tests/perf/test_fa3_paged_prefill.py)."""
    c = context(LLAMA70, PhasePlan(gpus=(0,)), "vllm", H200, (0,))
    c = dataclasses.replace(c, fa3_paged_prefill=False, attention_shapes={}, rate_terms={}, memo_keys={})
    for head_dim, paper_tflops in ((64, 473), (128, 616), (256, 642)):
        heads = 2048 // head_dim
        att = dataclasses.replace(LLAMA70.layers[0].attention, num_heads=heads, num_kv_heads=heads,
                                  score_dim=2 * head_dim, kv_elems_per_token=2 * heads * head_dim,
                                  kv_read_elems_per_token=2 * heads * head_dim)  # fmt: skip
        ops = [op for op in attention_ops(c, att, StepInput(prefill_tokens=16384, prefill_ctx=8192))
               if op.kind == "attention"]  # fmt: skip
        tflops = 4 * 16384**2 * head_dim * heads / 2 / cost_ops(c, ops).time_s / 1e12
        assert abs(tflops / paper_tflops - 1) <= 0.05, (head_dim, tflops)
