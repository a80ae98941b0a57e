"""Absorbed-MLA decode runs kv_b_proj's weights as two bf16 batched GEMMs (W_UK_T before the decode kernel, W_UV
after it), not kv_b_proj's GEMM, which runs only on the rows of the MHA (prefill) path: vLLM 0.34.0
model_executor/layers/attention/mla_attention.py:1096-1165 (the batch split into decode and MHA rows), :1362 and
:1633 (the bmms), :416-431 and :1457-1464 (kv_b dequantised to the activation dtype for them), :3469 (kv_b_proj in
forward_mha); SGLang 0.5.23 forward_mla.py:586, :926 and deepseek_weight_loader.py:691-708 (block-FP8 kv_b
dequantised to bf16 by default). The model before priced kv_b's FP8 GEMM (FLOPs, weights, launch) on every row inside
the TP-split projection op and the absorbed GEMMs as launches and activations only: each test fails on it."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import mla
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")  # FP8 (block-quantised) checkpoint: its projections are FP8 GEMMs
ATT = DSV3.layers[-1].attention
TP = 8
PHASE = PhasePlan(gpus=tuple(range(TP)), tp=TP)
KV_B = 512 * 128 * (128 + 128)  # kv_lora x heads x (qk_nope + v), DeepSeek-V3's config.json
SPLIT = ATT.params - ATT.replicated_params  # q_b, kv_b, o_proj
DECODE = StepInput(decode_seqs=64.0, decode_ctx=4096.0)
PREFILL = StepInput(prefill_tokens=8192.0, prefill_ctx=4096.0)
MIXED = StepInput(decode_seqs=64.0, decode_ctx=4096.0, prefill_tokens=2048.0, prefill_ctx=1024.0)


def _ops(x, engine="vllm", model=DSV3):
    c = context(model, PHASE, engine, H200, PHASE.gpus)
    return c, {op.source: op for op in attention_ops(c, model.layers[-1].attention, x)}


def test_kv_b_params_are_deepseek_v3s():
    assert mla.kv_b_params(ATT) == KV_B


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_decode_projection_op_leaves_kv_b_out(engine):
    """A decode-only step's TP-split projections are q_b and o_proj: two launches, their FLOPs and FP8 weights
    (old: three launches, kv_b's FLOPs and weights in)."""
    c, ops = _ops(DECODE, engine)
    tp = ops["tp"]
    assert tp.count == 2
    assert tp.flops == pytest.approx(2 * (SPLIT - KV_B) * 64 / TP)
    assert tp.nbytes < (SPLIT - KV_B) / TP * c.dense_bytes + 64 * (2 * DSV3.hidden_size + tp.n) * 2 + 1


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_decode_absorbed_gemms_carry_kv_b_flops_and_bf16_weights(engine):
    """The two absorbed bmms do kv_b's FLOPs on the decode rows and read its weights in bf16, twice the FP8
    checkpoint's bytes; their FLOPs and the projection op's add up to the old projection op's."""
    c, ops = _ops(DECODE, engine)
    absorb = ops["mla absorb"]
    assert (absorb.count, absorb.dtype, absorb.m) == (2, "bf16", 64.0)
    assert absorb.flops == pytest.approx(2 * 64 * KV_B / TP)
    assert absorb.nbytes >= KV_B / TP * 2
    assert c.dense_bytes == 1  # the FP8 checkpoint: the bmms read twice its kv_b bytes
    assert ops["tp"].flops + absorb.flops == pytest.approx(2 * SPLIT * 64 / TP)


def test_prefill_runs_kv_b_in_the_projection_op_and_no_absorbed_gemms():
    """An MHA prefill (long prompts) runs kv_b_proj on its rows: three launches, all split FLOPs, no bmms."""
    c, ops = _ops(PREFILL)
    assert ops["tp"].count == 3
    assert ops["tp"].flops == pytest.approx(2 * SPLIT * 8192 / TP)
    assert "mla absorb" not in ops


def test_mixed_step_reads_kv_b_twice_and_splits_its_flops():
    """vLLM's mixed batch: kv_b_proj (FP8) on the 2,048 prompt rows in the projection op, whose weights stay in,
    and the bmms (bf16 weights) on the 64 decode rows; kv_b's FLOPs once per row between them."""
    c, ops = _ops(MIXED)
    tp, absorb = ops["tp"], ops["mla absorb"]
    assert tp.count == 3
    assert tp.flops == pytest.approx(2 * (SPLIT * 2112 - KV_B * 64) / TP)
    assert absorb.m == 64.0 and absorb.flops == pytest.approx(2 * 64 * KV_B / TP)
    _, prefill = _ops(StepInput(prefill_tokens=2048.0, prefill_ctx=1024.0))
    assert tp.nbytes > prefill["tp"].nbytes  # the decode rows' activations on top of the same weights


def test_bf16_checkpoint_moves_kv_b_at_equal_weight_bytes():
    """A bf16 checkpoint's kv_b weighs the same in the bmms: the bytes only move between the two ops."""
    bf16 = dataclasses.replace(DSV3, dense_dtype="bf16")
    c, ops = _ops(DECODE, model=bf16)
    assert c.dense_bytes == 2
    assert ops["tp"].count == 2 and ops["mla absorb"].nbytes >= KV_B / TP * 2


def test_memoised_attention_terms_follow_the_split():
    """The attention memo (halves.attention_terms) keys the projections on the rows and the absorbed rows, the
    layer kind's fields and the dense dtype's sizes: decode, prefill and mixed steps of the FP8 and the bf16
    checkpoint, asked in turn on one memo, each give their own op list's terms."""
    from autotune.perf import halves
    from autotune.perf.costing import _op_terms

    bf16 = dataclasses.replace(DSV3, dense_dtype="bf16")
    for model in (DSV3, bf16, DSV3):
        c = context(model, PHASE, "vllm", H200, PHASE.gpus)
        att = model.layers[-1].attention
        for x in (DECODE, PREFILL, MIXED, DECODE):
            assert halves.attention_terms(c, att, x) == _op_terms(c, attention_ops(c, att, x))
