"""FA3's prefill over a paged KV cache of short pages (PagedKVNonTMA; perf/tiles.py FA3_PAGED_CTA_FIXED_US, rates.py
FA3_PAGED_KV_PREFILL_SPEED, engine profile fa3_paged_kv_non_tma_archs): each test fails on the model before them."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.catalog.devices import DEVICES_BY_KEY
from autotune.perf import rates, tiles
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import Kernels, PhasePlan

H200 = load_preset("h200-x8")
LLAMA70 = load_model("llama-3.1-70b")
PHASE = PhasePlan(gpus=(0,))


def _b200():
    spec = DEVICES_BY_KEY["b200"]
    gpus = tuple(dataclasses.replace(a, name=spec.name, arch=spec.arch) for a in H200.accelerators)
    return dataclasses.replace(H200, accelerators=gpus)


def _mha(heads: int, kv_heads: int, head_dim: int):
    return dataclasses.replace(
        LLAMA70.layers[0].attention, num_heads=heads, num_kv_heads=kv_heads, score_dim=2 * head_dim,
        kv_elems_per_token=2 * kv_heads * head_dim, kv_read_elems_per_token=2 * kv_heads * head_dim,
    )  # fmt: skip


def _prefill_us(c, att, batch: int, seqlen: int) -> float:
    x = StepInput(prefill_tokens=float(batch * seqlen), prefill_ctx=seqlen / 2.0)
    return cost_ops(c, [op for op in attention_ops(c, att, x) if op.kind == "attention"]).time_s * 1e6


def test_vllm_fa3_prefill_waves_pay_the_paged_fixed_time_on_hopper():
    """vLLM's FA3 prefill on sm_90 pages its KV by fewer tokens than FA3's KV block: its waves of query tiles each
    pay FA3_PAGED_CTA_FIXED_US, not the contiguous kernel's CTA_FIXED_US (old: one `wave` op at 2 us)."""
    assert "sm_90" in profile("vllm").fa3_paged_kv_non_tma_archs
    c = context(LLAMA70, PHASE, "vllm", H200, (0,))
    assert c.fa3_paged_prefill
    ops = attention_ops(c, LLAMA70.layers[0].attention, StepInput(prefill_tokens=64 * 256, prefill_ctx=128))
    waves = [op for op in ops if op.kind == "attention" and op.bucket in ("wave", "paged_wave")]
    assert [op.bucket for op in waves] == ["paged_wave"]
    assert c.table.get("attention", "bf16", "paged_wave").min_us == tiles.FA3_PAGED_CTA_FIXED_US
    assert tiles.FA3_PAGED_CTA_FIXED_US > tiles.CTA_FIXED_US


@pytest.mark.parametrize(("seqlen", "measured_us"), [(2048, 313.268), (4096, 1087.082), (8192, 4006.394)])
def test_paged_prefill_follows_the_public_vllm_fa3_timings(seqlen, measured_us):
    """calibration.yaml kernel-fa3-vllm-paged-prefill-hopper (flagos-ai/FlagGems#4956: vLLM's FA3, 16-token pages,
    causal, batch 4, 32 / 32 heads, head dim 128) within 5% (old: 0.87 / 0.90 / 0.93 of it)."""
    c = context(LLAMA70, PHASE, "vllm", H200, (0,))
    assert _prefill_us(c, _mha(32, 32, 128), 4, seqlen) == pytest.approx(measured_us, rel=0.05)


def test_short_prompts_lose_more_to_the_paged_path_than_long_ones():
    """The fixed time per query tile weighs on a 256-token prompt's few KV blocks more than on a 16k one's: the
    paged path's time over the contiguous path's (the same Context without the profile fact) falls with length."""
    c = context(LLAMA70, PHASE, "vllm", H200, (0,))
    contiguous = dataclasses.replace(c, fa3_paged_prefill=False, attention_shapes={}, rate_terms={}, memo_keys={})
    att = _mha(32, 8, 128)
    short = _prefill_us(c, att, 64, 256) / _prefill_us(contiguous, att, 64, 256)
    long = _prefill_us(c, att, 1, 16384) / _prefill_us(contiguous, att, 1, 16384)
    assert short > long > 1.0
    assert long == pytest.approx(1 / rates.FA3_PAGED_KV_PREFILL_SPEED, rel=0.05)


def test_mla_prefill_and_other_archs_keep_the_contiguous_kernel():
    """An MLA layer's prefill attends its up-projected (contiguous) keys, and sm_100 / SGLang / a named kernel are
    not this path: their ops are those of a Context without the flag."""
    deepseek = load_model("deepseek-v3")
    c = context(deepseek, PHASE, "vllm", H200, (0,))
    off = dataclasses.replace(c, fa3_paged_prefill=False, attention_shapes={}, rate_terms={}, memo_keys={})
    att, x = deepseek.layers[0].attention, StepInput(prefill_tokens=8 * 2048, prefill_ctx=1024)
    assert attention_ops(c, att, x) == attention_ops(off, att, x)
    assert not context(LLAMA70, PHASE, "vllm", _b200(), (0,)).fa3_paged_prefill
    assert not context(LLAMA70, PhasePlan(gpus=(0,), kernels=Kernels(attention="flashinfer")), "vllm", H200,
                       (0,)).fa3_paged_prefill  # fmt: skip


def test_fa2_prefill_runs_64_row_tiles_of_one_head():
    """FA2 (sm_89 / sm_120 / sm_80) over a paged KV cache runs its split-KV kernel's 64-row tile of one query head
    (tiles.FA2_PAGED_Q_BLOCK): 64 prompts of 256 tokens, 64 query heads over 8 KV heads, make 64 x 64 x 4 CTAs,
    where the packed count (old, as FA3) is 64 x 8 x ceil(256 x 8 / 128)."""
    l40s = load_preset("l40s-x8")
    c = context(LLAMA70, PHASE, "vllm", l40s, (0,))
    att = _mha(64, 8, 128)
    ops = attention_ops(c, att, StepInput(prefill_tokens=64 * 256, prefill_ctx=128))
    (wave,) = [op for op in ops if op.kind == "attention" and op.bucket == "wave"]
    assert wave.count == tiles.attention_waves(64 * 64 * 4, c.sms)
    assert tiles.prefill_ctas("sm_89", 64, 256, 8, 8) == 2 * tiles.prefill_ctas("sm_90", 64, 256, 8, 8)
    assert tiles.prefill_q_block("sm_120") == tiles.FA2_PAGED_Q_BLOCK == tiles.ATTENTION_Q_BLOCK // 2
