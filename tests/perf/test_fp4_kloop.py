"""NVFP4 linears on sm_100 run FlashInfer's CuTe-DSL block-scaled GEMM under vLLM 0.34 (engine profile
cute_dsl_fp4_tile_archs): one CTA per output tile of at least 64 x 128 over the whole K (perf/tiles.py
CUTE_DSL_FP4_MIN_TILE, no split-K at any tactic), so a GEMM of few tiles and a long K takes at least one tile's K
loop on one SM, which receives rates.gemm_cta_load_gbs(sm_100) = 169 GB/s, after a 3.45 us floor (both from the
least-squares line through flashinfer#2540's m=1 rows, calibration.yaml kernel-flashinfer-cutedsl-fp4-sm100-kloop).
Each behavioural test fails on the model before, which streamed the 4-bit weight at the whole GPU's bandwidth
however few CTAs loaded it, above a 3 us floor."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import opcore, rates, tiles
from autotune.perf.oplist import linear_ops
from autotune.perf.ops import cost_ops
from autotune.specs import PhasePlan
from tests.perf.boxes import b200_box

H200 = load_preset("h200-x8")
RTX = load_preset("rtx-pro-6000-x8")
LLAMA70 = load_model("llama-3.1-70b")
TILE_STEP_BYTES = sum(tiles.CUTE_DSL_FP4_MIN_TILE) * tiles.NVFP4_OPERAND_BYTES  # 108 B per unit of k


B200 = b200_box()


def _ctx(hw=B200, fmt: str = "nvfp4", engine: str = "vllm"):
    model = dataclasses.replace(LLAMA70, dense_dtype="fp4", dense_format=fmt)
    return opcore.context(model, PhasePlan(gpus=(0,)), engine, hw, (0,))


def _gemm_s(c, m: float, n: int, k: int) -> float:
    return cost_ops(c, [op for op in linear_ops(c, m, n, k, "test") if op.kind == "gemm"]).time_s


def _kloop_s(k: int) -> float:
    return k * TILE_STEP_BYTES / (rates.gemm_cta_load_gbs("sm_100") * 1e9)


def test_minimal_tile_is_64_by_128_and_a_step_brings_108_bytes():
    """Swap-AB at small m puts the kernel's 128 along n and the 64 along m; an NVFP4 operand element is half a byte
    and an E4M3 scale per 16 elements."""
    assert tiles.CUTE_DSL_FP4_MIN_TILE == (64, 128)
    assert TILE_STEP_BYTES == 108.0  # (64 + 128) x (0.5 + 1 / 16), exact in binary
    assert tiles.kloop_cta(7168, tiles.CUTE_DSL_FP4_MIN_TILE, tiles.NVFP4_OPERAND_BYTES)[1] == pytest.approx(108 * 7168)


def test_narrow_long_k_fp4_gemm_takes_one_ctas_k_loop():
    """m=1, n=512, k=7168 on B200 (flashinfer#2540's first row): four tiles, each one CTA's whole K loop of
    108 x 7168 B at 169 GB/s, 4.6 us, above the 3.45 us floor (old: ~3.3 us, the 1.8 MB weight at the GPU's
    bandwidth plus a 3 us floor)."""
    c = _ctx()
    assert _gemm_s(c, 1, 512, 7168) >= (_kloop_s(7168) + 3.45e-6) * (1 - 1e-9)  # the two terms, summed
    # the time grows with k at a fixed narrow n (old: both within 0.5 us of the floor)
    assert _gemm_s(c, 1, 512, 65536) > 4 * _gemm_s(c, 1, 512, 4096)


def test_fp4_gemm_floor_is_the_cute_dsl_kernels():
    """sm_100 FP4 GEMMs start at 3.45 us (the line's value at k=0), other dtypes and archs at MIN_US["gemm"]."""
    b200 = rates.rates_table(B200)
    assert b200.get("gemm", "fp4", "m<=16").min_us == pytest.approx(3.45)
    assert "kernel-flashinfer-cutedsl-fp4-sm100-kloop" in b200.get("gemm", "fp4", "m<=16").provenance
    assert b200.get("gemm", "fp8", "m<=16").min_us == rates.MIN_US["gemm"]
    assert rates.rates_table(RTX).get("gemm", "fp4", "m<=16").min_us == rates.MIN_US["gemm"]


def test_wide_fp4_gemm_stays_bandwidth_bound():
    """m=1, n=16384, k=8192: 128 tiles on 148 SMs, each SM's K loop (108 x 8192 B, 5.2 us) is shorter than
    streaming the 75 MB weight over the whole GPU, so the bound does not bind: the same time without it."""
    on = _ctx()
    off = dataclasses.replace(on, fp4_kloop=False, memo_keys={}, rate_terms={})
    assert _gemm_s(on, 1, 16384, 8192) == pytest.approx(_gemm_s(off, 1, 16384, 8192))
    assert _gemm_s(on, 1, 16384, 8192) > _kloop_s(8192)


def test_fp4_kloop_is_an_engine_fact_of_nvfp4_on_sm100():
    """vLLM 0.34 and SGLang 0.5.23 both name sm_100 (cute_dsl_fp4_tile_archs); sm_120 keeps its own tile rule
    (tests/perf/test_sm120_gemm_tiles.py); FP8 contexts keep the FP8 rule only; a context without the bound
    streams a narrow long-K GEMM at the GPU's bandwidth."""
    assert _ctx().fp4_kloop
    assert not _ctx(hw=RTX).fp4_kloop
    assert not _ctx(hw=RTX, engine="sglang").fp4_kloop
    fp8 = opcore.context(dataclasses.replace(LLAMA70, dense_dtype="fp8", dense_format="fp8_tensor"),
                         PhasePlan(gpus=(0,)), "vllm", B200, (0,))  # fmt: skip
    assert fp8.fp8_kloop and not fp8.fp4_kloop
    off = dataclasses.replace(_ctx(), fp4_kloop=False, memo_keys={}, rate_terms={})
    assert _gemm_s(off, 1, 512, 65536) < _kloop_s(65536)


def test_sglang_nvfp4_linear_on_sm100_is_the_cute_dsl_gemm():
    """SGLang 0.5.23's --fp4-gemm-backend auto picks flashinfer_cutedsl on SM100 (srt/layers/quantization/
    fp4_utils.py:149-162) and its ModelOpt FP4 linear calls mm_fp4 with backend "cute-dsl": the same K-loop bound
    as vLLM's (old: SGLang named no CuTe-DSL arch, so m=1, n=512, k=65536 streamed its 18 MB at the GPU's
    bandwidth, under one CTA's 42 us K loop)."""
    sglang = _ctx(engine="sglang")
    assert sglang.fp4_kloop
    assert _gemm_s(sglang, 1, 512, 65536) >= _kloop_s(65536)
    assert _gemm_s(sglang, 1, 512, 65536) == pytest.approx(_gemm_s(_ctx(), 1, 512, 65536))


def test_sm100_fp8_kloop_takes_the_sm100_per_sm_figure():
    """vLLM's per-tensor FP8 CUTLASS GEMM on sm_100 (tests/perf/test_fp8_kloop.py) takes the same per-SM figure,
    not the H800 one: m=1, n=32, k=65536 runs one swap-AB 128 x 32 tile, (32 + 128) x 65536 B, 62 us at 169 GB/s
    (old: 95 us at 110 GB/s)."""
    c = opcore.context(dataclasses.replace(LLAMA70, dense_dtype="fp8", dense_format="fp8_tensor"),
                       PhasePlan(gpus=(0,)), "vllm", B200, (0,))  # fmt: skip
    assert rates.gemm_cta_load_gbs("sm_90") == rates.GEMM_CTA_LOAD_GBS
    step_bytes = (32 + 128) * 65536
    assert _gemm_s(c, 1, 32, 65536) >= step_bytes / (rates.gemm_cta_load_gbs("sm_100") * 1e9)
    assert _gemm_s(c, 1, 32, 65536) < step_bytes / (rates.GEMM_CTA_LOAD_GBS * 1e9)


def test_halves_memo_keys_carry_the_fp4_kloop():
    """halves.py remembers attention and FFN terms across plans by the Context's parts: two Contexts that differ
    only in the NVFP4 K-loop bound must not share them (as Context.fp8_kloop)."""
    from autotune.perf import halves
    from autotune.specs import FfnSpec

    c = _ctx()
    off = dataclasses.replace(c, fp4_kloop=False, memo_keys={})
    assert halves._attention_prefix(c) != halves._attention_prefix(off)
    ffn = FfnSpec("dense", 3 * LLAMA70.hidden_size * 28672)
    halves.ffn_kernel_terms(c, ffn, 8.0)
    halves.ffn_kernel_terms(off, ffn, 8.0)
    assert c.memo_keys["ffn"] != off.memo_keys["ffn"]
