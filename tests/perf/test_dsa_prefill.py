"""Which path a DSA layer's prompt rows take (DeepSeek-V3.2 / GLM-5.x: absorbed MLA over the indexer's top-k).
vLLM 0.34 runs the dense MHA prefill while a batch's longest sequence is at most index_topk tokens and the sparse
absorbed kernel over each row's top-k beyond it (sparse_mla_attention.py:138-147); SGLang 0.5.23 the same at 2048
tokens (SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD, dsa_backend.py:4054-4078), its flashmla_sparse padding a
rank's heads to 64 on Hopper (dsa_backend.py:2819-2836). Each test fails on the model before this (every DSA prompt
priced as MHA over min(context, top-k) entries, with kv_b and without the MHA path's key concat)."""

from __future__ import annotations

import dataclasses

from autotune.capability.engine_profile import DSA_MHA_PREFILL_TOPK
from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf import mla
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
GLM5 = load_model("glm-5")
ATT = GLM5.layers[-1].attention
TP8 = PhasePlan(gpus=tuple(range(8)), tp=8)


def _ops(engine, x):
    c = context(GLM5, TP8, engine, H200, tuple(range(8)))
    return {op.source: op for op in attention_ops(c, ATT, x)}


def _prompts(length):
    """Fresh prompts of `length` tokens, 8192 tokens in the step (the mean row attends half its prompt)."""
    return StepInput(prefill_tokens=float(max(length, 8192)), prefill_ctx=length / 2)


def test_engine_profiles_carry_the_dense_mha_limit_and_sglang_hopper_head_padding():
    """vLLM's limit is the model's top-k, SGLang's 2048 tokens whatever the top-k."""
    assert profile("vllm").dsa_mha_prefill_max_kv == DSA_MHA_PREFILL_TOPK
    assert profile("vllm").dsa_prefill("sm_90", 4096) == (4096, 0)
    assert profile("sglang").dsa_prefill("sm_90", 4096) == (2048, 64)
    assert profile("sglang").dsa_prefill("sm_100", 4096) == (2048, 0)
    assert profile("vllm").dsa_prefill("sm_90", 0) == (0, 0)  # no DSA layer


def test_on_sm120_every_prompt_takes_the_sparse_path():
    """vLLM's sm_12x sparse backend has no dense MHA prefill, SGLang runs MHA_ONE_SHOT on SM90 / SM10x only: a
    1024-token prompt of a DSA model runs the sparse kernel there."""
    assert profile("vllm").dsa_prefill("sm_120", 2048)[0] == profile("sglang").dsa_prefill("sm_120", 2048)[0] == 1
    box = load_preset("rtx-pro-6000-x8")
    assert box.accelerators[0].arch == "sm_120"
    for engine in ("vllm", "sglang"):
        c = context(GLM5, TP8, engine, box, tuple(range(8)))
        ops = {op.source for op in attention_ops(c, ATT, _prompts(1024))}
        assert "kernels.attention (DSA sparse prefill)" in ops and "mla prefill key concat" not in ops
    assert context(GLM5, TP8, "vllm", H200, tuple(range(8))).dsa_prefill == (ATT.attended_cap, 0)


def test_vllm_keeps_the_mha_prefill_up_to_a_larger_top_k_and_sglang_does_not():
    """A GLM-5 with a 4096 top-k: 3072-token prompts stay on vLLM's MHA path, SGLang's go sparse past 2048."""
    layers = tuple(
        dataclasses.replace(layer, attention=dataclasses.replace(layer.attention, attended_cap=4096))
        if layer.attention.kind == "mla-dsa"
        else layer
        for layer in GLM5.layers
    )
    model = dataclasses.replace(GLM5, layers=layers)
    att = model.layers[-1].attention
    x = _prompts(3072)
    for engine, sparse in (("vllm", False), ("sglang", True)):
        c = context(model, TP8, engine, H200, tuple(range(8)))
        ops = {op.source for op in attention_ops(c, att, x)}
        assert ("kernels.attention (DSA sparse prefill)" in ops) is sparse


def test_long_prompts_run_the_sparse_absorbed_kernel_over_the_top_k():
    """8192-token prompts on vLLM: one sparse kernel whose FLOPs are heads x top-k x (576 + 512) per row (the
    indexer's scoring its own op), the absorbed W_UK / W_UV launches, no MHA key concat, and kv_b left out of the TP
    GEMM."""
    x = _prompts(8192)
    ops = _ops("vllm", x)
    att = ops["kernels.attention (DSA sparse prefill)"]
    assert "kernels.attention" not in ops and "mla prefill key concat" not in ops
    assert "mla absorb" in ops and "dsa indexer" in ops
    heads = ATT.num_heads / 8
    sparse = 2 * heads * (ATT.score_dim_decode) * ATT.attended_cap * x.prefill_tokens
    assert abs(att.flops - sparse) < 1e-6 * att.flops
    short = _ops("vllm", _prompts(1024))["tp"]
    kv_b = 2 * mla.kv_b_params(ATT) / 8
    assert abs(short.flops - ops["tp"].flops - kv_b * x.prefill_tokens) < 1e-6 * short.flops


def test_short_prompts_keep_the_dense_mha_prefill_with_its_key_concat():
    """Prompts within the top-k run the engines' dense MLA prefill: the MHA kernel and its key concat."""
    for engine in ("vllm", "sglang"):
        ops = _ops(engine, _prompts(2048))
        assert "kernels.attention" in ops and "mla prefill key concat" in ops
        assert "kernels.attention (DSA sparse prefill)" not in ops and "mla absorb" not in ops


def test_sglang_hopper_pads_the_sparse_kernel_heads_to_64():
    """GLM-5 at TP8 holds 8 heads a rank: SGLang's flashmla_sparse runs 64 (8x the attention FLOPs), vLLM's
    small-head kernel 8."""
    x = _prompts(16384)
    vllm = _ops("vllm", x)["kernels.attention (DSA sparse prefill)"].flops
    sglang = _ops("sglang", x)["kernels.attention (DSA sparse prefill)"].flops
    assert abs(sglang / vllm - 8.0) < 1e-9


def test_a_layer_sharing_another_layers_top_k_is_no_dense_mla_short_prompt_on_vllm_hopper():
    """A DSA layer without its own indexer (GLM IndexCache "shared": index_heads 0, the top-k still attended) runs
    the sparse backend's rule, not FLASH_ATTN_MLA's absorbed path for prompts of up to 512 rows."""
    shared = dataclasses.replace(ATT, index_heads=0)
    c = context(GLM5, TP8, "vllm", H200, tuple(range(8)))
    ops = {op.source for op in attention_ops(c, shared, StepInput(prefill_tokens=8 * 256.0, prefill_ctx=128.0))}
    assert "kernels.attention (absorbed prefill)" not in ops and "mla prefill key concat" in ops
