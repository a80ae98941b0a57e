"""Marlin MoE (INT4 experts, mma.sync) on sm_100: the B200's BF16 peak is tcgen05's; an mma.sync kernel runs there at
about the H100's TFLOPS (FlashAttention-2: calibration.yaml kernel-fa2-b200-fwd against kernel-fa2-h100-fwd), so
Marlin's compute on a B200 is not 2.3x an H200's as a shared share of the BF16 rate (the old 0.7 prior) made it."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.catalog.devices import DEVICES_BY_KEY
from autotune.perf import efficiency as eff
from autotune.perf import opcore, rates
from autotune.perf.oplist import ffn_ops
from autotune.perf.ops import cost_ops
from autotune.specs import FfnSpec, PhasePlan

H200 = load_preset("h200-x8")


def _box(device: str):
    spec = DEVICES_BY_KEY[device]
    gpus = tuple(
        dataclasses.replace(a, name=spec.name, memory_gib=spec.memory_gib, mem_bw_gbs=spec.mem_bw_gbs,
                            peak_tflops=dict(spec.peak_tflops), arch=spec.arch, features=spec.features)
        for a in H200.accelerators
    )  # fmt: skip
    return dataclasses.replace(H200, accelerators=gpus, measured=None, corrections={})


KIMI = dataclasses.replace(load_model("deepseek-v3"), hidden_size=7168, expert_dtype="int4", expert_format="int4_awq")
FFN = FfnSpec("moe", 0, 384, 8, 3 * 7168 * 2048)  # Kimi K2's routed experts


def _compute_s(device: str, tokens: float) -> float:
    c = opcore.context(KIMI, PhasePlan(gpus=(0,)), "vllm", _box(device), (0,))
    ops = [op for op in ffn_ops(c, FFN, tokens) if op.kind == "grouped_moe"]
    return cost_ops(c, ops).compute_s


def test_marlin_takes_the_mma_sync_share_of_the_arch():
    """Marlin = 0.9 of an mma.sync GEMM (MARLIN paper) x the share of the BF16 rate mma.sync gets: FA2 / FA3 on
    H100 (370 / 646), FA2 / FA4 on B200 (361.6 / 1,289), all of it on sm_120 (old: a 0.7 prior on sm_90 and sm_100,
    0.9 on sm_120)."""
    speed = {
        dev: opcore.context(KIMI, PhasePlan(gpus=(0,)), "vllm", _box(dev), (0,)).moe_speed
        for dev in ("b200", "h200-sxm", "rtx-pro-6000-server")
    }
    assert speed["h200-sxm"] == pytest.approx(0.9 * 370 / 646)
    assert speed["b200"] == pytest.approx(0.9 * 361.6 / 1289)
    assert speed["rtx-pro-6000-server"] == pytest.approx(rates.MARLIN_MMA_SYNC_SPEED)
    assert eff.MOE_VARIANT_SPEED["marlin"] == 0.7  # the prior stays for archs the share does not name


def test_marlin_compute_on_b200_is_near_hopper_not_tcgen05():
    """At 16k tokens (compute bound) Marlin's grouped GEMMs on a B200 take 0.8-1.1x an H200's time, as FA2's
    TFLOPS are ~0.98x between the two (old: 0.45x, the B200's 2.3x BF16 peak at the same 0.7)."""
    ratio = _compute_s("b200", 16384) / _compute_s("h200-sxm", 16384)
    assert 0.8 <= ratio <= 1.1
