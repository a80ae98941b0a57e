"""A Marlin MoE (W4A16: 4-bit expert weights dequantised in registers into mma.sync) streams its weights at most at
SMs x rates.MARLIN_PER_SM_STREAM_GBS (22.1 GB/s per SM: vLLM's fused_marlin_moe on H20, calibration.yaml
kernel-marlin-moe-h20-dsv3), Context.moe_stream_gbs: on an HBM3 part its SMs, not device memory, set the rate while
it is weight-bound. The model before streamed Marlin's weights at the rates table's bandwidth (0.8 of the
datasheet's), 2.9x the cap on B200."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import halves, opcore, rates
from autotune.perf.oplist import ffn_ops
from autotune.perf.ops import cost_ops
from autotune.specs import FfnSpec, Kernels, PhasePlan
from tests.perf.boxes import b200_box

H200 = load_preset("h200-x8")
RTX = load_preset("rtx-pro-6000-x8")
DSV3 = dataclasses.replace(load_model("deepseek-v3"), expert_dtype="int4", expert_format="int4")
FFN = FfnSpec("moe", 0, 256, 8, 3 * 7168 * 2048)  # DeepSeek-V3's routed experts, no shared expert


B200 = b200_box()


def _ctx(hw=B200, moe: str = "marlin"):
    return opcore.context(DSV3, PhasePlan(gpus=(0,), kernels=Kernels(moe=moe)), "vllm", hw, (0,))


def _routed_s(c, tokens: float) -> float:
    return cost_ops(c, [op for op in ffn_ops(c, FFN, tokens) if op.kind == "grouped_moe"]).time_s


def test_marlin_cap_is_sms_times_the_per_sm_figure():
    """148 B200 SMs x 22.1 GB/s = 3.27 TB/s, under the rates table's 6.4 TB/s; other MoE kernels: no cap."""
    c = _ctx()
    assert c.moe_stream_gbs == pytest.approx(148 * rates.MARLIN_PER_SM_STREAM_GBS)
    assert c.moe_stream_gbs < c.table.get("grouped_moe", "int4", "m<=16").gbs
    assert _ctx(moe="triton").moe_stream_gbs == 0.0


def test_one_token_marlin_moe_streams_at_the_sms_rate():
    """One token on B200: 8 experts' 187 MB at 3.27 TB/s, 57 us, plus the 12 us floor (old: 29 us + 12 us)."""
    c = _ctx()
    op = next(op for op in ffn_ops(c, FFN, 1.0) if op.kind == "grouped_moe")
    floor_s = rates.MIN_US["grouped_moe"] * 1e-6
    assert _routed_s(c, 1.0) == pytest.approx(op.nbytes / (c.moe_stream_gbs * 1e9) + floor_s)
    assert _routed_s(c, 1.0) > 1.5 * (op.nbytes / (c.table.get("grouped_moe", "int4", "m<=16").gbs * 1e9) + floor_s)


def test_cap_does_not_bind_on_gddr_parts():
    """RTX PRO 6000 (188 SMs x 22.1 GB/s = 4.2 TB/s against 1.6 TB/s of GDDR7): the time as without the cap."""
    c = _ctx(hw=RTX)
    uncapped = dataclasses.replace(c, moe_stream_gbs=0.0, rate_terms={})
    assert _routed_s(c, 1.0) == _routed_s(uncapped, 1.0)


def test_ffn_memo_key_carries_the_cap():
    """halves.ffn_kernel_terms remembers FFN terms across plans: two Contexts differing only in the cap must not
    share them."""
    c = _ctx()
    off = dataclasses.replace(c, moe_stream_gbs=0.0, memo_keys={}, rate_terms={})
    capped, uncapped = halves.ffn_kernel_terms(c, FFN, 1.0), halves.ffn_kernel_terms(off, FFN, 1.0)
    assert c.memo_keys["ffn"] != off.memo_keys["ffn"]
    assert capped != uncapped
