"""The engines' default KV-cache dtype for a DSA model (DeepSeek-V3.2 / GLM-5.x: absorbed MLA over an indexer's
top-k). SGLang 0.5.23 resolves `--kv-cache-dtype auto` to fp8_e4m3 for a DeepSeek-family DSA model on compute
capability 10 and above (srt/arg_groups/overrides.py:491-547); vLLM 0.34 for GlmMoeDsaForCausalLM on the sm_10x family
only (model_executor/models/config.py:163-175). A plan's `auto` follows it (capability.kv_cache_dtype_on): the KV
pool's bytes per token, the attention kernels' KV bytes and the plan best.yaml shows. Each test fails on the model
before this (`auto` was the checkpoint's bf16 on every engine and arch)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune import capability
from autotune.catalog import load_model, load_preset
from autotune.engines import build_launch
from autotune.perf import precision
from autotune.perf.memory import memory_fit
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput
from autotune.specs import Kernels, PhasePlan, Plan
from tests.perf.boxes import b200_box

B200 = b200_box()
H200 = load_preset("h200-x8")
RTX = load_preset("rtx-pro-6000-x8")
GLM5 = load_model("glm-5")
GLM53 = load_model("glm-5.3")  # block FP8: fits 8x H200 as well as 8x B200
ATT = GLM5.layers[-1].attention
DP8 = PhasePlan(gpus=tuple(range(8)), tp=1, dp=8, ep=8, dp_attention=True)


def _kv(phase: PhasePlan, dtype: str) -> PhasePlan:
    return dataclasses.replace(phase, kernels=Kernels(kv_cache_dtype=dtype))


def test_auto_resolves_to_fp8_where_each_engine_says_so():
    on = capability.kv_cache_dtype_on
    assert on("sglang", DP8, GLM5, "sm_100") == on("sglang", DP8, GLM5, "sm_120") == "fp8"
    assert on("sglang", DP8, GLM5, "sm_90") == "auto"  # Hopper keeps bf16
    assert on("vllm", DP8, GLM5, "sm_100") == "fp8"
    assert on("vllm", DP8, GLM5, "sm_120") == "auto"  # vLLM: the sm_10x family only
    hybrid = load_model("glm-5.3-flash")  # Glm5NextForConditionalGeneration: in SGLang's DeepSeek family, not vLLM's
    assert on("sglang", DP8, hybrid, "sm_100") == "fp8" and on("vllm", DP8, hybrid, "sm_100") == "auto"
    assert on("sglang", DP8, load_model("deepseek-v3"), "sm_100") == "auto"  # MLA without DSA
    assert on("sglang", _kv(DP8, "bf16"), GLM5, "sm_100") == "bf16"  # an explicit dtype is kept


def test_the_kv_pool_holds_twice_the_tokens_under_the_fp8_default():
    """SGLang on B200: `auto` sizes the pool as an explicit fp8 cache does (half the bytes a token of the latent
    rows; the indexer keys take 132 B either way: precision.INDEX_KEY_BYTES_PER_ELEM), not as bf16."""
    auto = memory_fit(GLM53, DP8, B200, 9216, "sglang")
    fp8 = memory_fit(GLM53, _kv(DP8, "fp8"), B200, 9216, "sglang")
    bf16 = memory_fit(GLM53, _kv(DP8, "bf16"), B200, 9216, "sglang")
    assert bf16.kv_tokens > 0
    assert auto.kv_tokens == fp8.kv_tokens
    per_token = {kv: precision.kv_bytes_per_token(GLM53, _kv(DP8, kv), "sglang", "sm_100") for kv in ("bf16", "fp8")}
    assert 1.7 < per_token["bf16"] / per_token["fp8"] < 2.0
    assert auto.kv_tokens == pytest.approx(bf16.kv_tokens * per_token["bf16"] / per_token["fp8"], rel=1e-5)
    hopper_auto = memory_fit(GLM53, DP8, H200, 9216, "sglang")  # sm_90 keeps the checkpoint's bf16
    assert 0 < hopper_auto.kv_tokens == memory_fit(GLM53, _kv(DP8, "bf16"), H200, 9216, "sglang").kv_tokens


def test_decode_and_sparse_prefill_read_fp8_kv_bytes():
    """The DSA decode and the sparse prefill read the FP8 latent rows: half the KV bytes of bf16."""
    x = StepInput(decode_seqs=64.0, decode_ctx=8192.0, prefill_tokens=4096.0, prefill_ctx=6144.0)

    def attention_bytes(phase):
        c = context(GLM5, phase, "sglang", B200, tuple(range(8)))
        ops = attention_ops(c, ATT, x)
        return {op.source: op.nbytes for op in ops if op.kind == "attention"}, c.kv_elem_bytes

    auto, auto_elem = attention_bytes(DP8)
    bf16, bf16_elem = attention_bytes(_kv(DP8, "bf16"))
    assert auto_elem == 1.0 and bf16_elem == 2.0
    sparse = "kernels.attention (DSA sparse prefill)"
    assert auto["kernels.attention"] < 0.6 * bf16["kernels.attention"]  # the decode rows: KV reads dominate
    assert sparse in auto and auto[sparse] < bf16[sparse]  # a prompt chunk's: its queries and outputs stay bf16


def test_best_yaml_and_the_launch_show_the_fp8_cache_the_engine_runs():
    """with_engine_defaults writes fp8 where `auto` resolves to it, so SGLang launches with --kv-cache-dtype
    fp8_e4m3 (what it picks itself); elsewhere the plan is left as it is."""
    plan = Plan("sglang", "aggregated", {"both": DP8})
    shown = capability.with_engine_defaults(plan, GLM5, B200)
    assert shown.phases["both"].kernels.kv_cache_dtype == "fp8"
    args = " ".join(build_launch(shown, GLM5, B200).processes[0].argv)
    assert "--kv-cache-dtype fp8_e4m3" in args
    assert capability.with_engine_defaults(plan, GLM5, H200).phases["both"].kernels.kv_cache_dtype == "auto"


def test_sglang_sparse_prefill_runs_fp8_mma_on_sm100_only():
    """SGLang's sm_10x default runs the sparse prefill on trtllm-gen with FP8 queries and KV: the op's speed is the
    B200's FP8 / BF16 peak ratio (a prior on the fraction) over the BF16 kernel's; 1 with an explicit bf16 cache, on
    Hopper, and on vLLM (its sm_100 kernel not read)."""
    x = StepInput(prefill_tokens=8192.0, prefill_ctx=4096.0)
    sparse = "kernels.attention (DSA sparse prefill)"

    def speed(phase, engine="sglang", hw=B200):
        c = context(GLM5, phase, engine, hw, tuple(range(8)))
        return next(op.speed for op in attention_ops(c, ATT, x) if op.source == sparse) / c.attention_speed

    peaks = B200.gpu.peak_tflops
    assert peaks["fp8"] > peaks["bf16"]
    assert speed(DP8) == peaks["fp8"] / peaks["bf16"]
    assert speed(_kv(DP8, "bf16")) == speed(DP8, "vllm") == speed(DP8, hw=load_preset("rtx-pro-6000-x8")) == 1.0
