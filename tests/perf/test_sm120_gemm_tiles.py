"""Narrow-dtype GEMMs on sm_120 (RTX PRO 6000): vLLM's CUTLASS kernels there take one fixed tile per M range
(perf/tiles.py SM120_FP4_TILE / SM120_FP8_TILES), so a GEMM of few rows computes whole padded tiles and one of
few tiles runs on few SMs, each at its SM's share of the datasheet peak (tiles.tile_bound_speed). Each test fails
on the model before: it streamed small-m FP4 / FP8 weights at the full bandwidth and spread a few tiles'
FLOPs over the whole GPU at the rates table's large-shape rate x tiles / SMs."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import opcore, tiles
from autotune.perf.oplist import linear_ops
from autotune.perf.ops import cost_ops
from autotune.specs import PhasePlan

RTX = load_preset("rtx-pro-6000-x8")
H200 = load_preset("h200-x8")
LLAMA70 = load_model("llama-3.1-70b")


def _ctx(hw, dtype: str, fmt: str):
    model = dataclasses.replace(LLAMA70, dense_dtype=dtype, dense_format=fmt)
    return opcore.context(model, PhasePlan(gpus=(0,)), "vllm", hw, (0,))


def _gemm_s(c, m: float, n: int, k: int) -> float:
    return cost_ops(c, [op for op in linear_ops(c, m, n, k, "test") if op.kind == "gemm"]).time_s


def _tile_s(c, dtype: str, tile: tuple[int, int], k: int) -> float:
    """One tile's K loop on one SM at the SM's share of the datasheet peak."""
    return 2.0 * tile[0] * tile[1] * k / (c.hw.gpu.peak_tflops[dtype] * 1e12 / c.sms)


def test_tiles_follow_vllm_sm120_dispatch():
    assert tiles.sm120_narrow_tile("fp4", 1) == tiles.sm120_narrow_tile("fp4", 9000) == (128, 128)
    assert [tiles.sm120_narrow_tile("fp8", m) for m in (8, 32, 200, 257)] == [(16, 64), (32, 64), (64, 64),
                                                                              (128, 128)]  # fmt: skip
    assert tiles.sm120_narrow_tile("bf16", 64) is None


def test_fp4_decode_gemm_of_one_tile_takes_a_tile_on_one_sm():
    """m=1, n=64, k=16384 NVFP4: one 128 x 128 CTA runs the whole K loop (old: 0.5 MB of weights at 1.3 TB/s,
    about 5 us); now at least the tile's 537 MFLOP on one SM."""
    c = _ctx(RTX, "fp4", "nvfp4")
    assert c.sms == 188
    t = _gemm_s(c, 1, 64, 16384)
    assert t >= 0.9 * _tile_s(c, "fp4", (128, 128), 16384) > 40e-6  # 0.9: the FP4 K prior (rates.narrow_k_speed)
    # 32 column tiles still fit one wave: the same bound, not 32 x it
    one_tile = _tile_s(c, "fp4", (128, 128), 7168)
    assert 0.9 * one_tile <= _gemm_s(c, 1, 4096, 7168) < 2 * one_tile


def test_fp8_few_tiles_run_at_the_sms_share_of_peak():
    """m=193, n=4096, k=7168 FP8: 64 x 64 tiles (M <= 256), 3.02 x 64 = 193 CTAs over 188 SMs, about one wave;
    old: 128 x 128 tiles at the large-shape rate x 48 / 188, over 2x the whole-GPU time."""
    c = _ctx(RTX, "fp8", "fp8_tensor")
    t = _gemm_s(c, 193, 4096, 7168)
    full = 2.0 * 193 * 4096 * 7168 / (c.table.get("gemm", "fp8", "m<=1024").tflops * 1e12)
    assert full <= t < 0.5 * full / (193 / 128 * 32 / 188)  # never faster than the whole GPU at the table's rate


def test_other_archs_keep_the_wave_efficiency():
    """Hopper keeps tiles.gemm_tile_efficiency (no sm_120 tile rule there): unchanged below 129 rows but for the
    CUTLASS K-loop bound of vLLM's FP8 GEMM there (opcore._kloop_speed, tests/perf/test_fp8_kloop.py)."""
    c = _ctx(H200, "fp8", "fp8_tensor")
    op = next(op for op in linear_ops(c, 64, 4096, 7168, "test") if op.kind == "gemm")
    assert op.speed == c.dense_speed * opcore._kloop_speed(c, c.table, "fp8", 64, 4096, 7168)


def test_marlin_moe_speed_by_tensor_instruction():
    """Marlin MoE (INT4 experts) on sm_120 runs mma.sync like the BF16 kernels there: rates.MARLIN_MMA_SYNC_SPEED
    (MARLIN paper, 0.9 of FP16 at large batch); on sm_90 that times mma.sync's share of the wgmma rate,
    rates.MMA_SYNC_SHARE (FA2 / FA3 on H100; old: 0.7 everywhere, then a 0.7 prior on sm_90)."""
    kimi = dataclasses.replace(load_model("deepseek-v3"), expert_dtype="int4", expert_format="int4_awq")
    rtx = opcore.context(kimi, PhasePlan(gpus=(0,)), "vllm", RTX, (0,))
    h200 = opcore.context(kimi, PhasePlan(gpus=(0,)), "vllm", H200, (0,))
    assert rtx.moe_speed == 0.9
    assert h200.moe_speed == pytest.approx(0.9 * 370 / 646)
