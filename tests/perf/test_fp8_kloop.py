"""Per-tensor FP8 GEMMs on sm_89 / sm_90 / sm_100 run vLLM's CUTLASS scaled-mm, one CTA per output tile over the whole K
(perf/tiles.py cutlass_fp8_tile; no split-K): a GEMM of few tiles and a long K takes at least one tile's K loop on
one SM, which receives at most rates.GEMM_CTA_LOAD_GBS (calibration.yaml kernel-deepgemm-h800-kloop-per-sm).
Each behavioural test fails on the model before, which streamed a narrow FP8 weight at the whole GPU's bandwidth
however few CTAs loaded it."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import opcore, rates, tiles
from autotune.perf.oplist import linear_ops
from autotune.perf.ops import cost_ops
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
L40S = load_preset("l40s-x8")
RTX = load_preset("rtx-pro-6000-x8")
LLAMA70 = load_model("llama-3.1-70b")


def _ctx(hw=H200, fmt: str = "fp8_tensor", engine: str = "vllm"):
    model = dataclasses.replace(LLAMA70, dense_dtype="fp8", dense_format=fmt)
    return opcore.context(model, PhasePlan(gpus=(0,)), engine, hw, (0,))


def _gemm_s(c, m: float, n: int, k: int) -> float:
    return cost_ops(c, [op for op in linear_ops(c, m, n, k, "test") if op.kind == "gemm"]).time_s


def test_cutlass_fp8_tiles_follow_vllms_dispatch():
    """sm_90: swap-AB 64 x 16 (n along the 64) to m 16 and to m 64 for n <= 1280, 64 x 64 above; 64 x 128 to m 128;
    256 x 128 from m 8192 at k >= 6144; 128 x 128 else. sm_100: swap-AB 128 x 32 to m 16; 64 x 64 at m == 64 and
    k < 4096, else swap-AB 128 x 64 to m 64; 128 x 128 per SM above. sm_89: by m's and n's powers of two
    (tiles.SM89_FP8_TILES). Other archs: none."""
    sm90 = [tiles.cutlass_fp8_tile("sm_90", m, n, k) for m, n, k in
            ((1, 8192, 4096), (32, 1024, 4096), (32, 4096, 4096), (100, 4096, 4096), (9000, 4096, 8192),
             (9000, 4096, 4096), (2000, 4096, 8192))]  # fmt: skip
    assert sm90 == [(16, 64), (16, 64), (64, 64), (64, 128), (256, 128), (128, 128), (128, 128)]
    sm100 = [tiles.cutlass_fp8_tile("sm_100", m, 4096, k) for m, k in ((8, 4096), (64, 2048), (64, 8192), (200, 4096))]
    assert sm100 == [(32, 128), (64, 64), (64, 128), (128, 128)]
    sm89 = [tiles.cutlass_fp8_tile("sm_89", m, n, 4096) for m, n in
            ((1, 32), (1, 16384), (1, 32768), (20, 12000), (64, 8192), (100, 32), (100, 20000), (200, 4096),
             (4096, 4096), (4096, 6144), (4096, 16384))]  # fmt: skip
    assert sm89 == [(16, 64), (16, 128), (32, 64), (32, 128), (64, 64), (64, 128), (128, 64), (64, 128),
                    (128, 128), (256, 128), (128, 128)]  # fmt: skip
    assert tiles.cutlass_fp8_tile("sm_80", 1, 4096, 4096) is None


def test_kloop_cta_loads_both_whole_tiles_every_k_step():
    """DeepGEMM's m=64 row (calibration.yaml kernel-deepgemm-h800-kloop-per-sm): a 64 x 16 tile over k=7168 loads
    (64 + 16) x 7168 FP8 bytes and computes 2 x 64 x 16 x 7168 FLOPs."""
    assert tiles.kloop_cta(7168, (64, 16), 1.0) == (2.0 * 64 * 16 * 7168, 573440.0)
    assert tiles.kloop_cta(0, (64, 16), 1.0) == (0.0, 0.0)


def test_narrow_long_k_fp8_gemm_takes_one_ctas_k_loop():
    """m=1, n=32, k=65536 on H200: one 64-column tile, so one SM loads (16 + 64) x 65536 B at GEMM_CTA_LOAD_GBS:
    at least 48 us (old: ~5 us, the 2 MB weight at the whole GPU's bandwidth plus the floor)."""
    c = _ctx()
    kloop_s = (16 + 64) * 65536 / (rates.GEMM_CTA_LOAD_GBS * 1e9)
    assert _gemm_s(c, 1, 32, 65536) >= kloop_s
    # the time now grows with k at a fixed narrow n (old: both at the kernel floor, within 15% of each other)
    assert _gemm_s(c, 1, 32, 65536) > 4 * _gemm_s(c, 1, 32, 4096)


def test_wide_fp8_gemm_stays_bandwidth_bound():
    """m=1, n=8192, k=8192: 128 tiles, one per SM: each SM's K loop (80 x 8192 B, 6 us) is shorter than streaming
    the 64 MB weight over the whole GPU, so the rule does not bind (the time as before)."""
    vllm, sglang = _ctx(), _ctx(engine="sglang")  # SGLang's profile names no K-loop archs: the model before
    assert _gemm_s(vllm, 1, 8192, 8192) == pytest.approx(_gemm_s(sglang, 1, 8192, 8192))
    assert _gemm_s(vllm, 1, 8192, 8192) > 80 * 8192 / (rates.GEMM_CTA_LOAD_GBS * 1e9)


def test_kloop_is_an_engine_fact_of_per_tensor_fp8():
    """The engine profile names where the rule holds (vLLM 0.34: cutlass_fp8_tile_archs sm_89 / sm_90 / sm_100);
    SGLang's profile names none, sm_120 keeps its own tile rule (tests/perf/test_sm120_gemm_tiles.py), and a
    block-scaled checkpoint runs other kernels: no bound there."""
    assert _ctx().fp8_kloop and _ctx(hw=L40S).fp8_kloop
    assert not _ctx(engine="sglang").fp8_kloop
    assert not _ctx(hw=RTX).fp8_kloop
    assert not _ctx(fmt="fp8_block").fp8_kloop
    sglang = _ctx(engine="sglang")
    assert _gemm_s(sglang, 1, 32, 65536) < (16 + 64) * 65536 / (rates.GEMM_CTA_LOAD_GBS * 1e9)


def test_ada_narrow_long_k_fp8_gemm_takes_one_ctas_k_loop():
    """L40S (sm_89, CUTLASS 2.x): m=128, n=32, k=65536 runs two 64 x 128 tiles, each a whole K loop on one SM:
    at least 2 x 64 x 128 x 65536 FLOPs at an SM's share of the 733 TFLOPS FP8 peak, 207 us (old: ~20 us)."""
    c = _ctx(hw=L40S)
    cta_s = 2.0 * 64 * 128 * 65536 / (L40S.gpu.peak_tflops["fp8"] * 1e12 / c.sms)
    assert _gemm_s(c, 128, 32, 65536) >= cta_s


def test_serving_op_list_bounds_only_the_gemms_it_shapes_whole():
    """In a step's op list the K-loop bound goes on MLA's fused q_a / kv_a down-projection (one GEMM, n=2112,
    k=7168: DeepGEMM's README shape), not on the paired q/kv + o projections, which the op list costs at averaged
    shapes (k = hidden for both). DeepSeek-V3 with per-tensor FP8 dense weights, TP8 decode of 8 sequences on H200:
    the fused GEMM takes at least one 16 x 64 tile's K loop, (16 + 64) x 7168 B at GEMM_CTA_LOAD_GBS, 5.2 us, plus
    the kernel floor (old: its 15 MB at the whole GPU's bandwidth, 3.9 us, plus the floor)."""
    from autotune.perf.oplist import attention_ops
    from autotune.perf.ops import StepInput

    dsv3 = dataclasses.replace(load_model("deepseek-v3"), dense_dtype="fp8", dense_format="fp8_tensor")
    c = opcore.context(dsv3, PhasePlan(gpus=tuple(range(8)), tp=8), "vllm", H200, tuple(range(8)))
    ops = attention_ops(c, dsv3.layers[-1].attention, StepInput(decode_seqs=8, decode_ctx=1000))
    rep = next(op for op in ops if op.source == "tp (replicated q_a/kv_a)")
    split = next(op for op in ops if op.source == "tp" and op.kind == "gemm")
    kloop_s = (16 + 64) * 7168 / (rates.GEMM_CTA_LOAD_GBS * 1e9)
    assert cost_ops(c, [rep]).time_s >= kloop_s + rates.MIN_US["gemm"] * 1e-6  # old: 3.9 + 3 us
    assert split.speed == c.dense_speed * opcore._tile_speed(c, "fp8", split.m, split.n / split.count)  # no K loop
