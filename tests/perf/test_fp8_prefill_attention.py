"""SGLang's FA3 prefill over an FP8 KV cache runs on FP8 queries, keys and values (engine profile
fp8_kv_prefill_attention_archs; perf/fractions.py fp8_prefill_speed from the FA3 paper's FP8 figure): each test but the
last two fails on the model before it, which priced that kernel at the BF16 rate."""

from __future__ import annotations

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf import fractions
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import Kernels, PhasePlan

R1 = load_model("deepseek-v3")
EIGHT = tuple(range(8))


def _prefill_attention_ms(engine: str, preset: str, kv: str, attention: str = "auto") -> float:
    hw = load_preset(preset)
    phase = PhasePlan(gpus=EIGHT, tp=8, kernels=Kernels(kv_cache_dtype=kv, attention=attention))
    c = context(R1, phase, engine, hw, EIGHT)
    att = R1.layers[-1].attention
    x = StepInput(prefill_tokens=16384.0, prefill_ctx=2048.0)  # the LMSYS H20 prefill chunk: 4 prompts of 4k
    return cost_ops(c, [op for op in attention_ops(c, att, x) if op.kind == "attention"]).time_s * 1e3


def test_sglang_profile_names_fa3_fp8_prefill_on_hopper_only():
    assert profile("sglang").fp8_kv_prefill_attention_archs == ("sm_90",)
    assert profile("vllm").fp8_kv_prefill_attention_archs == ()


@pytest.mark.parametrize("preset", ["h20-x8", "h200-x8"])
def test_fp8_kv_cache_speeds_up_the_sglang_mla_prefill_attention(preset):
    bf16 = _prefill_attention_ms("sglang", preset, "auto")
    fp8 = _prefill_attention_ms("sglang", preset, "fp8")
    # compute bound at 16k tokens: at least the H100's causal FP8 / BF16 ratio (1.595x) less the memory term's share
    assert fp8 < bf16 / 1.5


def test_the_fp8_kernel_gains_more_on_a_part_slower_per_sm():
    h20 = _prefill_attention_ms("sglang", "h20-x8", "auto") / _prefill_attention_ms("sglang", "h20-x8", "fp8")
    h200 = _prefill_attention_ms("sglang", "h200-x8", "auto") / _prefill_attention_ms("sglang", "h200-x8", "fp8")
    assert h20 > h200 * 1.1


def test_speed_is_the_papers_ratio_on_the_reference_part():
    peak_ratio = fractions.FP8_REFERENCE_PEAK_RATIO["sm_90"]
    assert fractions.fp8_prefill_speed("sm_90", 0.6, 1.0, peak_ratio) == pytest.approx(1024.0 / 642.0)
    # an arch without a figure keeps the BF16 rate
    assert fractions.fp8_prefill_speed("sm_100", 0.6, 1.0, 2.0) == 1.0


@pytest.mark.parametrize(("engine", "attention"), [("vllm", "auto"), ("sglang", "flashinfer")])
def test_other_engines_and_kernels_keep_the_bf16_rate(engine, attention):
    bf16 = _prefill_attention_ms(engine, "h20-x8", "auto", attention)
    fp8 = _prefill_attention_ms(engine, "h20-x8", "fp8", attention)
    assert fp8 == pytest.approx(bf16, rel=0.02)


def test_the_attention_memo_tells_the_fp8_kernel_apart():
    import dataclasses

    from autotune.perf import halves

    hw = load_preset("h20-x8")
    phase = PhasePlan(gpus=EIGHT, tp=8, kernels=Kernels(kv_cache_dtype="fp8"))
    fp8 = context(R1, phase, "sglang", hw, EIGHT)
    bf16 = dataclasses.replace(fp8, fp8_prefill_speed=1.0, memo_keys={}, rate_terms={}, attention_shapes={})
    att, x = R1.layers[-1].attention, StepInput(prefill_tokens=16384.0, prefill_ctx=2048.0)
    fast, slow = halves.attention_terms(fp8, att, x), halves.attention_terms(bf16, att, x)
    assert sum(t[2] for t in fast) < sum(t[2] for t in slow)
