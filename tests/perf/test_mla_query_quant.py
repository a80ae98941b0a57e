"""An absorbed-MLA layer of an FP8 checkpoint quantises three GEMM inputs in the attention half, not two: the
replicated q_a / kv_a down-projection's (the hidden rows), o_proj's, and q_b's own input, q_a_layernorm's bf16
output of q_lora columns (SGLang 0.5.23 srt/layers/quantization/fp8_utils.py:1556-1578 quantises every block-FP8
linear's input in its own kernel; deepseek_v2.py:2565-2570 runs q_b_proj on the norm's output; DeepSeek's H800 decode
trace times q_b_quant as its own kernel, calibration.yaml trace-deepseek-h800-decode-kernels). Fails on the op list
before sgmla28 (two quant kernels, both of hidden width)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import mla, precision
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import attention_ops
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
EIGHT = tuple(range(8))
DSV3 = load_model("deepseek-v3")  # FP8 block, q_lora 1536, kv_lora 512 + rope 64
FOUR = StepInput(decode_seqs=4, decode_ctx=8192)


def _quant(m, engine: str, x: StepInput = FOUR):
    c = context(m, PhasePlan(gpus=EIGHT, tp=8), engine, H200, EIGHT)
    ops = [op for op in attention_ops(c, m.layers[-1].attention, x) if op.kind == "quant"]
    assert len(ops) == 1
    return ops[0]


def test_q_lora_width_from_the_replicated_down_projections():
    """DeepSeek-V3's q_a + kv_a is 1536 + 576 columns wide: q_b reads the 1536."""
    att = DSV3.layers[-1].attention
    assert mla.query_quant_width(att, att.replicated_params / DSV3.hidden_size, DSV3.hidden_size) == 1536


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_fp8_mla_attention_half_runs_three_quant_kernels(engine):
    """Three kernels a step; per row, two of the hidden width (7168) and one of q_lora (1536), each a bf16 read,
    an FP8 write and a 4-byte scale."""
    op = _quant(DSV3, engine)
    assert op.count == 3
    row = (DSV3.hidden_size * 2 + 1536) * (precision.ACTIVATION_BYTES + 1.0) + 3 * 4.0
    assert op.nbytes == pytest.approx(4 * row)


def test_bf16_mla_and_gqa_quantise_nothing_new():
    """A bf16 checkpoint has no quant kernels; a GQA layer keeps its two."""
    bf16 = dataclasses.replace(DSV3, dense_dtype="bf16")
    c = context(bf16, PhasePlan(gpus=EIGHT, tp=8), "sglang", H200, EIGHT)
    assert not [op for op in attention_ops(c, bf16.layers[-1].attention, FOUR) if op.kind == "quant"]
    att = DSV3.layers[-1].attention
    gqa = dataclasses.replace(att, kind="gqa", latent_shared=False, score_dim_decode=0, replicated_params=0)
    assert mla.query_quant_width(gqa, 0.0, DSV3.hidden_size) == 0.0
