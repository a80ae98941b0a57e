"""A fused-MoE kernel variant's speed moved to a part slower per SM (perf/opcore._moe_variant_speed,
fractions.variant_speed): the Triton fused MoE's extra time is CUDA-core work (its per-K-block scale promotion),
which the H20 keeps at the H100's rate per SM. calibration.yaml kernel-triton-moe-h20-down-tma (sglang#10567) is
the public figure; each test but the last fails on the model before the change."""

from __future__ import annotations

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import costing, efficiency, fractions, rates
from autotune.perf.opcore import Op, context
from autotune.specs import Kernels, PhasePlan

R1 = load_model("deepseek-v3")
EIGHT = tuple(range(8))


def _ctx(preset: str, moe: str = "auto"):
    return context(R1, PhasePlan(gpus=EIGHT, tp=8, kernels=Kernels(moe=moe)), "sglang", load_preset(preset), EIGHT)


def test_triton_moe_speed_moves_on_the_h20_not_on_the_reference_part():
    triton = efficiency.MOE_VARIANT_SPEED["triton"]
    assert _ctx("h200-x8").moe_speed == pytest.approx(triton)
    assert triton < _ctx("h20-x8").moe_speed < 1.0


def test_sglang_triton_moe_down_projection_on_h20_is_within_10_percent_of_sglang_10567():
    # sglang#10567: H20 TP8 prefill, 8K tokens, the down projection 1.435 ms after its TMA change (2.430 before)
    c = _ctx("h20-x8")
    ffn = R1.layers[-1].ffn
    tokens, inter = 8192, ffn.expert_params / R1.hidden_size / 3 / 8
    per_expert = tokens * ffn.experts_per_token / ffn.num_experts
    flops = 2.0 * tokens * ffn.experts_per_token * inter * R1.hidden_size
    nbytes = ffn.num_experts * inter * R1.hidden_size * c.expert_bytes
    op = Op("grouped_moe", c.expert_dtype, rates.m_bucket(per_expert), per_expert, R1.hidden_size, inter, flops,
            nbytes, 1.0, "down", c.moe_speed)  # fmt: skip
    ms = costing.cost_ops(c, [op]).time_s * 1e3
    assert 1.435 * 0.9 <= ms <= 1.435 * 1.1


def test_variant_speed_is_the_identity_at_the_reference_and_shrinks_the_gap_below_it():
    assert fractions.variant_speed(0.85, 0.6375, 1.0) == 0.85
    assert 0.85 < fractions.variant_speed(0.85, 0.6375, 0.25) < fractions.variant_speed(0.85, 0.6375, 0.1) < 1.0
    assert fractions.variant_speed(1.1, 0.6375, 0.25) < 1.1  # a faster variant gains less too


def test_marlin_keeps_its_mma_sync_share_on_the_h20():
    assert _ctx("h20-x8", "marlin").moe_speed == pytest.approx(
        rates.MARLIN_MMA_SYNC_SPEED * rates.MMA_SYNC_SHARE["sm_90"]
    )
