"""The DSA / V4 lightning indexer's ops (perf/mla_ops.py indexer_ops): its MQA logits on every index head of every
attention-TP rank (ReplicatedLinear in both engines: vLLM models/deepseek_v41/attention.py:1422-1450, SGLang
srt/layers/attention/dsa/dsa_indexer.py:344-372), on FP8 tensor cores where the engine runs DeepGEMM's FP8 MQA
logits (engine profile dsa_indexer_fp8_archs), its keys read in the FP8 + fp32-scale layout whatever the main KV
dtype, and the row top-k over fp32 logits. Each test fails on the model before this (the indexer's scoring folded
into the attention op, its heads divided by TP, at the BF16 attention rate, its keys at the KV element's bytes)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import precision, rates
from autotune.perf.layers import indexer_scored
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import PhasePlan

GLM5 = load_model("glm-5")
ATT = GLM5.layers[-1].attention
H200, RTX = load_preset("h200-x8"), load_preset("rtx-pro-6000-x8")
DECODE = StepInput(decode_seqs=64.0, decode_ctx=8192.0)


def _ops(x, tp=1, engine="vllm", box=H200, kv="auto", model=GLM5, att=ATT):
    phase = PhasePlan(gpus=tuple(range(tp)), tp=tp)
    phase = dataclasses.replace(phase, kernels=dataclasses.replace(phase.kernels, kv_cache_dtype=kv))
    c = context(model, phase, engine, box, tuple(range(tp)))
    return {op.source: op for op in attention_ops(c, att, x)}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("x", [DECODE, StepInput(prefill_tokens=8192.0, prefill_ctx=4096.0)])
def test_every_tp_rank_scores_with_all_the_index_heads(engine, x):
    """TP splits the attention heads, not the indexer's: its logits FLOPs per rank are the same at TP 1 and TP 4,
    2 x index_heads x index_dim per scored entry and query row (the op's FLOPs also carry its top-k's memory time:
    the top-k's bytes at the op's FLOP-a-byte ratio)."""
    one, four = _ops(x, 1, engine)["dsa indexer"], _ops(x, 4, engine)["dsa indexer"]
    assert (one.flops, one.nbytes) == (four.flops, four.nbytes)
    queries = x.decode_seqs or x.prefill_tokens
    scored = indexer_scored(ATT, x.decode_ctx or x.prefill_ctx)
    rate = rates.rates_table(H200).get(one.kind, one.dtype, one.bucket)
    topk_flops = (queries * scored * 4 + queries * ATT.attended_cap * 4) * rate.tflops * 1e3 / rate.gbs
    assert one.flops - topk_flops == pytest.approx(2 * ATT.index_heads * ATT.index_dim * scored * queries)


def test_the_attention_op_no_longer_carries_the_indexer():
    """The decode attention op's FLOPs are the top-k entries' only: heads x score_dim_decode x top-k a query."""
    att = _ops(DECODE)["kernels.attention"]
    assert att.flops == pytest.approx(2 * ATT.num_heads * ATT.score_dim_decode * ATT.attended_cap * 64.0)


def test_the_logits_run_on_fp8_tensor_cores_where_deepgemm_runs():
    """DeepGEMM's MQA logits on sm_90 / sm_100 / sm_120 (the main box's RTX PRO 6000 included): an FP8 GEMM op; on
    an A100, where neither engine has the kernel, BF16."""
    assert _ops(DECODE, box=RTX)["dsa indexer"].dtype == "fp8"
    assert _ops(DECODE, box=H200, engine="sglang")["dsa indexer"].dtype == "fp8"
    a100 = load_preset("a100-sxm-x8")
    assert _ops(DECODE, box=a100)["dsa indexer"].dtype == "bf16"


def test_index_keys_are_read_in_fp8_with_a_scale_whatever_the_kv_dtype():
    """Each decode sequence reads its scored keys once at 132 B a 128-wide key, with a BF16 or an FP8 main KV; the
    logits kernel also writes fp32 logits, which the top-k reads back, writing its int32 indices."""
    for kv in ("bf16", "fp8"):
        op = _ops(DECODE, kv=kv)["dsa indexer"]
        scored = indexer_scored(ATT, DECODE.decode_ctx)
        keys = 64.0 * scored * ATT.index_dim * precision.INDEX_KEY_BYTES_PER_ELEM
        logits = 64.0 * scored * 4
        queries = 64.0 * ATT.index_heads * (ATT.index_dim + 4)
        assert op.nbytes == pytest.approx(keys + queries + 2 * logits + 64.0 * ATT.attended_cap * 4)
        assert op.count == 2.0  # the logits kernel and the top-k
    assert ATT.index_dim * precision.INDEX_KEY_BYTES_PER_ELEM == 132.0


@pytest.mark.parametrize("x", [DECODE, StepInput(prefill_tokens=8192.0, prefill_ctx=4096.0)])
def test_the_indexer_takes_the_logits_kernel_then_the_top_k(x):
    """The one op costs the logits kernel's max(compute, memory) plus the top-k's read of the logits and write of its
    indices, each at the op's rates, and two launches: memory bound at decode, compute bound at prefill."""
    phase = PhasePlan(gpus=(0,), tp=1)
    c = context(GLM5, phase, "vllm", RTX, (0,))
    op = next(op for op in attention_ops(c, ATT, x) if op.source == "dsa indexer")
    rate = c.table.get(op.kind, op.dtype, op.bucket)
    queries = x.decode_seqs or x.prefill_tokens
    scored = indexer_scored(ATT, x.decode_ctx or x.prefill_ctx)
    topk = queries * scored * 4 + queries * ATT.attended_cap * 4
    logits_s = max(2 * ATT.index_heads * ATT.index_dim * scored * queries / (rate.tflops * 1e12),
                   (op.nbytes - topk) / (rate.gbs * 1e9))  # fmt: skip
    expected = logits_s + topk / (rate.gbs * 1e9) + 2 * rate.min_us * 1e-6
    assert cost_ops(c, [op]).time_s == pytest.approx(expected, rel=1e-9)


def test_a_layer_reusing_another_layers_top_k_runs_no_indexer():
    """GLM IndexCache "shared" layers (index_heads 0) attend a top-k they do not compute: no indexer op."""
    shared = dataclasses.replace(ATT, index_heads=0)
    ops = _ops(DECODE, att=shared)
    assert "dsa indexer" not in ops


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_the_kv_pool_holds_the_index_keys_in_fp8_with_a_scale(kv):
    """GLM-5's per-token KV: the 576-wide latent of every layer at the KV dtype, the 128-wide index key of each
    indexer layer at 132 B (vLLM _indexer_k_cache_head_dim; SGLang DSATokenToKVPool), whatever the KV dtype."""
    plain = PhasePlan(gpus=(0,), tp=1)
    phase = dataclasses.replace(plain, kernels=dataclasses.replace(plain.kernels, kv_cache_dtype=kv))
    indexers = sum(1 for layer in GLM5.layers if layer.attention.index_heads)
    assert indexers and all(layer.attention.compress_ratio == 1 for layer in GLM5.layers)
    latent = sum(layer.attention.kv_elems_per_token for layer in GLM5.layers) - indexers * ATT.index_dim
    expected = latent * {"bf16": 2, "fp8": 1}[kv] + indexers * 132.0
    assert precision.kv_bytes_per_token(GLM5, phase, "vllm", "sm_90") == pytest.approx(expected)
    assert precision.kv_bytes_per_elem(GLM5, phase, "vllm", "sm_90") == {"bf16": 2, "fp8": 1}[kv]


def test_v41_index_keys_take_their_fp8_layout_beside_the_native_kv():
    """DeepSeek-V4.1-Flash's official 890 B a token holds FP4 index keys; vLLM stores them FP8 + scale (the default
    indexer_kv_dtype, v1/attention/backends/mla/indexer.py:67-75): 320 index elements a token (layers 2, 8, 14 at
    ratio 2, 20 at ratio 1) at 132 / 128 B, the rest at the native mean."""
    model = load_model("deepseek-v4.1-flash")
    phase = PhasePlan(gpus=(0,), tp=1)
    index = sum(layer.attention.index_dim / layer.attention.compress_ratio for layer in model.layers
                if layer.attention.index_heads and layer.attention.kv_elems_per_token)  # fmt: skip
    assert index == 320.0
    mean = model.kv_bytes_per_token("auto") / model.kv_elems_per_token
    expected = (model.kv_elems_per_token - index) * mean + index * 132.0 / 128
    assert precision.kv_bytes_per_token(model, phase, "vllm", "sm_120") == pytest.approx(expected)
    assert precision.kv_bytes_per_token(model, phase, "vllm", "sm_120") > model.kv_bytes_per_token("auto")
