"""Tiles and waves (perf/tiles.py) in the op list: each test fails on the model before they were added."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import mla, tiles
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops, linear_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import Kernels, PhasePlan

H200 = load_preset("h200-x8")
LLAMA70 = load_model("llama-3.1-70b")


def phase(n=1, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(n)), **kw)


def _attention_s(c, x) -> float:
    att = c.model.layers[0].attention
    return cost_ops(c, [op for op in attention_ops(c, att, x) if op.kind == "attention"]).time_s


def test_sm_counts_follow_the_datasheets():
    assert tiles.sm_count("NVIDIA H200", "sm_90") == 132
    assert tiles.sm_count("NVIDIA H100 PCIe", "sm_90") == 114
    assert tiles.sm_count("NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm_120") == 188
    assert tiles.sm_count("NVIDIA L40S", "sm_89") == 142
    assert tiles.sm_count("some future part", "sm_100") == 148
    assert tiles.sm_count("Ascend910B", "ascend-910b") == 0  # not an NVIDIA SM: no wave terms
    assert tiles.attention_waves(1e6, 0) == 0 and tiles.gemm_tile_efficiency(4096, 256, 0) == 1.0


def test_many_short_decode_sequences_pay_waves_of_ctas():
    """2,048 sequences at 8 tokens of context read the same KV bytes as 16 at 1,024, but launch 128x the CTAs:
    the kernel runs them in waves (old: equal times, bytes only)."""
    c = context(LLAMA70, phase(), "vllm", H200, (0,))
    many = _attention_s(c, StepInput(decode_seqs=2048, decode_ctx=8))
    few = _attention_s(c, StepInput(decode_seqs=16, decode_ctx=1024))
    waves = tiles.attention_waves(2048 * 8, c.sms)  # 8 KV heads, GQA packed into one block per (seq, KV head)
    assert many >= few + (waves - 1) * tiles.CTA_FIXED_US * 1e-6


def test_attention_reads_queries_and_writes_outputs():
    """At one token of context a decode step still moves every query row and output row (old: KV bytes only)."""
    c = context(LLAMA70, phase(), "vllm", H200, (0,))
    att = LLAMA70.layers[0].attention
    decode = next(op for op in attention_ops(c, att, StepInput(decode_seqs=512, decode_ctx=1)) if op.bucket == "decode")
    q_o = 512 * att.num_heads * att.score_dim * 2  # Q read + O write (score_dim = q width + v width), bf16
    assert decode.nbytes >= q_o


def test_kv_cache_write_is_an_op():
    """The new tokens' K/V are written to the paged cache by a kernel of its own (vLLM reshape_and_cache_flash)."""
    c = context(LLAMA70, phase(), "vllm", H200, (0,))
    ops = attention_ops(c, LLAMA70.layers[0].attention, StepInput(decode_seqs=64, decode_ctx=1000))
    write = [op for op in ops if op.source == "kv cache write"]
    assert len(write) == 1 and write[0].nbytes >= 64 * LLAMA70.layers[0].attention.kv_elems_per_token * 2


def test_fp8_gemm_pays_wave_quantisation_bf16_does_not():
    """FP8 GEMMs of 27 x 2 = 54 and 27 x 4 = 108 output tiles each run one wave on 132 SMs: the smaller takes
    about as long (old: time proportional to the FLOPs). cuBLAS bf16 picks its own split: no penalty."""
    fp8 = context(LLAMA70, phase(kernels=Kernels(gemm_dtype="fp8")), "vllm", H200, (0,))
    few = cost_ops(fp8, linear_ops(fp8, 3456, 256, 7168, "t")[:1]).compute_s
    full = cost_ops(fp8, linear_ops(fp8, 3456, 512, 7168, "t")[:1]).compute_s
    assert few > 0.8 * full
    bf16 = context(dataclasses.replace(LLAMA70, dense_dtype="bf16"), phase(), "vllm", H200, (0,))
    few16 = cost_ops(bf16, linear_ops(bf16, 3456, 256, 7168, "t")).compute_s
    full16 = cost_ops(bf16, linear_ops(bf16, 3456, 512, 7168, "t")).compute_s
    assert few16 < 0.6 * full16


def test_mla_decode_runs_the_modules_norms_rope_and_absorb_gemms():
    """DeepSeek-V3's decode attention is costed as vLLM's MLA module runs it: the q_a / kv_a norms, RoPE and the
    absorbed kv_b's two batched GEMMs are kernels of their own (old: projections + attention kernel only), with
    kv_b's FLOPs (the projection op leaves them out: tests/perf/test_mla_kv_b.py)."""
    dsv3 = load_model("deepseek-v3")
    c = context(dsv3, phase(), "vllm", H200, (0,))
    att = dsv3.layers[-1].attention
    ops = attention_ops(c, att, StepInput(decode_seqs=1, decode_ctx=1000))
    by_source = {op.source: op for op in ops}
    assert by_source["mla q_a/kv_a norms"].count == 2 and by_source["mla rope"].count == 1
    assert by_source["mla absorb"].count == 2 and by_source["mla absorb"].flops == 2 * mla.kv_b_params(att)
    # a 2048-token prompt: above the 512 query rows vLLM's FLASH_ATTN_MLA runs on the absorbed path (test_mla_paths)
    prefill = attention_ops(c, att, StepInput(prefill_tokens=2048, prefill_ctx=1024))
    assert "mla absorb" not in {op.source for op in prefill}  # prefill runs the un-absorbed kv_b
    gqa = attention_ops(context(LLAMA70, phase(), "vllm", H200, (0,)), LLAMA70.layers[0].attention,
                        StepInput(decode_seqs=1, decode_ctx=1000))  # fmt: skip
    assert not {op.source for op in gqa} & {"mla rope", "mla absorb"}


def test_causal_prefill_computes_the_diagonal_blocks_whole():
    """256-token prompts attend 128 keys per query on average, but FlashAttention computes the masked diagonal
    128 x 128 blocks whole: 1.5x the useful FLOPs (old: the useful FLOPs only)."""
    c = context(LLAMA70, phase(), "vllm", H200, (0,))
    att = LLAMA70.layers[0].attention
    ops = attention_ops(c, att, StepInput(prefill_tokens=256 * 16, prefill_ctx=128))
    kernel = next(op for op in ops if op.bucket == "prefill")
    useful = 2 * att.num_heads * att.score_dim * 128 * 256 * 16
    assert kernel.flops == useful * 1.5


def test_fp8_gemm_pays_a_fixed_time_per_wave_of_tiles():
    """DeepGEMM's K sweep (calibration.yaml kernel-deepgemm-h800-grouped): at m=4096 n=32768 k=512 FP8 runs at 590
    TFLOPS against 1,304 at k=7168, because each of its 62 waves of 128 x 128 tiles pays a fixed ~2 us. The op list
    adds those waves (beyond the first) for FP8 GEMMs and none for bf16 (old: no wave op, and the k=512 GEMM at
    the large-K rate)."""
    fp8 = context(LLAMA70, phase(kernels=Kernels(gemm_dtype="fp8")), "vllm", H200, (0,))
    bf16 = context(dataclasses.replace(LLAMA70, dense_dtype="bf16"), phase(), "vllm", H200, (0,))
    waves = [op for op in linear_ops(fp8, 4096, 32768, 512, "t") if op.bucket == "wave"]
    assert len(waves) == 1 and waves[0].count == pytest.approx(4096 / 128 * 256 / 132 - 1)
    assert cost_ops(fp8, waves).time_s == pytest.approx(waves[0].count * tiles.GEMM_WAVE_FIXED_US * 1e-6)
    assert not [op for op in linear_ops(bf16, 4096, 32768, 512, "t") if op.bucket == "wave"]
    assert not [op for op in linear_ops(fp8, 64, 4096, 512, "t") if op.bucket == "wave"]  # one wave: none extra

    def tflops(k):
        return 2 * 4096 * 32768 * k / cost_ops(fp8, [op for op in linear_ops(fp8, 4096, 32768, k, "t")
                                                     if op.kind == "gemm"]).time_s / 1e12  # fmt: skip

    assert tflops(512) < 0.6 * tflops(7168)  # DeepGEMM: 590 / 1,304 = 0.45


def test_prefill_attention_rate_follows_the_head_dimension_on_hopper():
    """FlashAttention-3 (calibration.yaml kernel-fa3-h100-fwd-headdim) reaches 497 / 648 / 756 TFLOPS at head dims
    64 / 128 / 256 on H100: the same prefill FLOPs take longer at head dim 64 (old: one rate for every head dim)."""
    c = context(LLAMA70, phase(), "vllm", H200, (0,))
    x = StepInput(prefill_tokens=16384, prefill_ctx=8192)
    base = LLAMA70.layers[0].attention

    def per_flop(head_dim):
        att = dataclasses.replace(base, num_heads=2048 // head_dim, num_kv_heads=2048 // head_dim,
                                  score_dim=2 * head_dim)  # fmt: skip
        ops = [op for op in attention_ops(c, att, x) if op.kind == "attention" and op.bucket == "prefill"]
        return cost_ops(c, ops).time_s / sum(op.flops for op in ops)

    assert per_flop(64) / per_flop(128) == pytest.approx(0.655 / 0.503, rel=0.01)
    assert per_flop(256) < per_flop(128)
