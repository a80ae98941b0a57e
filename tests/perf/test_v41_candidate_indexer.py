"""DeepSeek-V4.1's two-level indexer: the candidate source layer (candidate_source_layer_id) scores every
compressed entry and publishes its best blocks; the later index layers score only those blocks where the engine
runs DeepGEMM's sparse MQA logits (sm_10x, no DCP: vLLM model_executor/models/config.py:709-760; SGLang
srt/layers/attention/dsv4/v41_indexer/__init__.py:78-123), and elsewhere compute dense logits over the whole
context and mask them (vLLM model_executor/layers/sparse_attn_indexer.py:940-961). Each test fails on f56e7fc,
which capped the source layer too and every consumer on every GPU."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput
from autotune.specs import PhasePlan
from tests.perf.boxes import b200_box

V41 = load_model("deepseek-v4.1-flash")
SOURCE, CONSUMER = V41.layers[20].attention, V41.layers[24].attention
CAP = 2048 * 8  # candidate_topk_blocks x candidate_block_size (catalog/models/deepseek-v4.1-flash.json)
LONG = StepInput(decode_seqs=8.0, decode_ctx=4.0 * CAP)  # ratio 1: four times the candidates


def test_only_the_layers_after_the_candidate_source_are_capped():
    """Layer 20 publishes the candidates (candidate_write) from dense logits; 24-36 consume them (vLLM
    models/deepseek_v41/attention.py:531-532; SGLang srt/layers/attention/dsv4/dsv41_sparse.py:204-205)."""
    assert SOURCE.index_heads and SOURCE.index_scored_cap == 0
    capped = [i for i, layer in enumerate(V41.layers) if layer.attention.index_scored_cap]
    assert capped == [24, 28, 32, 36] and CONSUMER.index_scored_cap == CAP


def _indexer(engine, box, att, dcp=1, x=LONG):
    tp = max(dcp, 1)
    phase = dataclasses.replace(PhasePlan(gpus=tuple(range(tp)), tp=tp), dcp=dcp)
    c = context(V41, phase, engine, box, tuple(range(tp)))
    return next(op for op in attention_ops(c, att, x) if op.source == "dsa indexer")


def _dense_logits_flops(att, x=LONG):
    """The logits' FLOPs over every compressed entry (ratio 1 here: the whole context)."""
    return 2 * att.index_heads * att.index_dim * x.decode_ctx / att.compress_ratio * x.decode_seqs


@pytest.mark.parametrize(("engine", "preset"), [("vllm", "rtx-pro-6000-x8"), ("sglang", "h200-x8")])
def test_consumers_score_every_entry_off_sm100(engine, preset):
    """On the RTX PRO 6000 (sm_120; SGLang does not start V4.1 there, capability/sglang_0_5_23.py) and on an H200
    (sm_90) a consumer's logits cover all 4 x CAP entries, as the source's do."""
    box = load_preset(preset)
    assert _indexer(engine, box, CONSUMER).flops == pytest.approx(_indexer(engine, box, SOURCE).flops)
    assert _indexer(engine, box, CONSUMER).flops > _dense_logits_flops(CONSUMER)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_consumers_score_only_the_candidates_on_sm100(engine):
    """On a B200 the sparse kernel scores CAP entries, a quarter of the source's at this context (logits FLOPs
    2 x heads x dim a scored entry; the op's FLOPs also carry its top-k's memory time, so compare below 0.3)."""
    b200 = b200_box()
    assert _indexer(engine, b200, CONSUMER).flops < 0.3 * _indexer(engine, b200, SOURCE).flops


def test_vllm_scores_densely_under_decode_context_parallelism():
    """vLLM's sparse-logits indexer needs decode_context_parallel_size 1 (model_executor/models/config.py:721)."""
    assert _indexer("vllm", b200_box(), CONSUMER, dcp=2).flops > _dense_logits_flops(CONSUMER)
