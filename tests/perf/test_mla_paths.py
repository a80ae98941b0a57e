"""Which path an MLA prefill takes: vLLM's FLASH_ATTN_MLA (the `auto` MLA backend on sm_90) runs requests of at most
512 query tokens with the decodes, on the latent KV (vllm/v1/attention/backends/mla/flashattn_mla.py:128-129;
the engine profile's mla_absorbed_prefill_rows, perf/oplist.py _absorbed_prefill). Each test fails on the model
before it was modelled (every prefill took the MHA path)."""

from __future__ import annotations

import dataclasses

from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf import halves, mla
from autotune.perf.attention_choice import mla_absorbed_prefill_rows
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import Kernels, PhasePlan

H200 = load_preset("h200-x8")
DSV3 = dataclasses.replace(load_model("deepseek-v3"), dense_dtype="bf16")
PHASE = PhasePlan(gpus=(0,))


def _b200():
    from autotune.catalog.devices import DEVICES_BY_KEY

    spec = DEVICES_BY_KEY["b200"]
    gpus = tuple(dataclasses.replace(a, name=spec.name, arch=spec.arch) for a in H200.accelerators)
    return dataclasses.replace(H200, accelerators=gpus)


def _ops(c, x):
    return {op.source: op for op in attention_ops(c, DSV3.layers[-1].attention, x)}


def test_absorbed_prefill_rows_are_vllm_flash_attn_mla_on_hopper_and_one_row_elsewhere():
    """512 query rows for FLASH_ATTN_MLA (auto on sm_90); the builders' default threshold of 1 elsewhere (a
    one-token prompt runs as a decode: the AIConfigurator tables' one-token prompts record FLASHINFER_MLA /
    TRITON_MLA as their kernel); SGLang not modelled."""
    assert profile("vllm").mla_absorbed_prefill_rows == (("sm_90", 512),)
    assert mla_absorbed_prefill_rows("vllm", "sm_90", "auto") == 512
    assert mla_absorbed_prefill_rows("vllm", "sm_100", "auto") == 1  # FLASHINFER_MLA: threshold 1
    assert mla_absorbed_prefill_rows("vllm", "sm_120", "auto") == 1  # TRITON_MLA: threshold 1
    assert mla_absorbed_prefill_rows("vllm", "sm_90", "triton") == 1  # a kernel the plan names
    assert mla_absorbed_prefill_rows("sglang", "sm_90", "auto") == 0
    one = StepInput(prefill_tokens=64.0, prefill_ctx=0.5)  # 64 one-token prompts
    assert "mla prefill key concat" not in _ops(context(DSV3, PHASE, "vllm", _b200(), (0,)), one)


def test_short_prompts_take_the_absorbed_path_on_vllm_hopper():
    """256-token prompts on an H200 under vLLM: one attention kernel on the decode path scoring the latent key
    (576 + 512 per head), the absorbed kv_b launches, and neither the MHA path's key concat nor its output copy;
    1024-token prompts, an eager SGLang step and B200 keep the MHA path."""
    heads = DSV3.layers[-1].attention.num_heads
    short = StepInput(prefill_tokens=8 * 256.0, prefill_ctx=128.0)
    c = context(DSV3, PHASE, "vllm", H200, (0,))
    ops = _ops(c, short)
    att = ops["kernels.attention (absorbed prefill)"]
    assert att.bucket == "decode"
    assert "mla prefill key concat" not in ops and "mla prefill output copy" not in ops
    assert "mla absorb" in ops
    assert att.flops >= 2 * heads * (576 + 512) * 128 * 8 * 256  # latent scores: at least the attended entries
    long = StepInput(prefill_tokens=8 * 1024.0, prefill_ctx=512.0)
    assert "mla prefill key concat" in _ops(c, long) and "mla absorb" not in _ops(c, long)
    # SGLang eagerly (no prefill graph: a step above it; tests/perf/test_sglang_graph_mla.py has the graph's rule)
    eager = context(DSV3, PHASE, "sglang", H200, (0,), graph_tokens=0.0)
    for other in (eager, context(DSV3, PHASE, "vllm", _b200(), (0,))):
        assert "mla prefill key concat" in _ops(other, short)
    named = context(DSV3, dataclasses.replace(PHASE, kernels=Kernels(attention="flashinfer")), "vllm", H200, (0,))
    assert "mla prefill key concat" in _ops(named, short)


def test_short_prompts_join_the_decode_kernel():
    """With decode rows in the step the short prompts add to the decode kernel (forward_mqa runs the whole decode
    batch): one attention op, its rows the decode rows plus the prompt tokens."""
    c = context(DSV3, PHASE, "vllm", H200, (0,))
    x = StepInput(decode_seqs=32.0, decode_ctx=4096.0, prefill_tokens=256.0, prefill_ctx=128.0)
    attention = [op for op in attention_ops(c, DSV3.layers[-1].attention, x) if op.kind == "attention"]
    assert len(attention) == 1 and attention[0].m == 32.0 + 256.0
    alone = [op for op in attention_ops(c, DSV3.layers[-1].attention, StepInput(decode_seqs=32.0, decode_ctx=4096.0))
             if op.kind == "attention"]  # fmt: skip
    assert attention[0].flops > alone[0].flops and attention[0].nbytes > alone[0].nbytes


def test_absorbed_prefill_rows_enter_the_attention_memo_key():
    """Two Contexts that differ only in the absorbed-prefill threshold must not share memoised attention terms."""
    c = context(DSV3, PHASE, "vllm", H200, (0,))
    off = dataclasses.replace(c, mla_absorbed_prefill_rows=0, memo_keys={}, attention_shapes={})
    x = StepInput(prefill_tokens=8 * 256.0, prefill_ctx=128.0)
    att = DSV3.layers[-1].attention
    assert halves._attention_prefix(c) != halves._attention_prefix(off)
    on, cut = halves.attention_terms(c, att, x), halves.attention_terms(off, att, x)  # memoised after the first
    assert on != cut
    assert cost_ops(c, attention_ops(c, att, x)).time_s != cost_ops(off, attention_ops(off, att, x)).time_s


def test_triton_mla_decode_splits_follow_vllm():
    """vLLM's TRITON_MLA splits a decode's KV into the power of two at or above max_seq_len / 512, at most 2 per SM
    (vllm/v1/attention/backends/mla/triton_mla.py:41-53)."""
    assert mla.triton_decode_splits(300, 188, 512) == 1
    assert mla.triton_decode_splits(8192, 188, 512) == 16
    assert mla.triton_decode_splits(9000, 188, 512) == 32  # 17 -> 32
    assert mla.triton_decode_splits(65536, 188, 512) == 128
    assert mla.triton_decode_splits(1_000_000, 188, 512) == 376  # capped at 2 x SMs


def test_triton_mla_decode_writes_and_reads_its_split_partials():
    """DeepSeek-V3 decode on an RTX PRO 6000 (vLLM's auto MLA kernel there: TRITON_MLA) moves the fp32 partials of
    every (row, head, split) twice besides the latent KV and the queries / outputs: at 64k context and 128 heads
    they are 128 splits x 513 values x 4 B x 2 per row and head (old: the KV and q / o bytes only); SGLang's
    decode on the same box has no such term."""
    rtx = load_preset("rtx-pro-6000-x8")
    att = DSV3.layers[-1].attention
    x = StepInput(decode_seqs=32.0, decode_ctx=65536.0)
    c = context(DSV3, PHASE, "vllm", rtx, (0,))
    assert c.triton_mla_split_tokens == 512
    op = next(o for o in attention_ops(c, att, x) if o.kind == "attention")
    kv = 32 * 65536 * att.kv_read_elems_per_token * c.kv_elem_bytes
    q_o = 32 * att.num_heads * att.score_dim_decode * 2
    splits = mla.triton_decode_splits(65536, c.sms, 512)
    assert op.nbytes == kv + q_o + 2 * 32 * att.num_heads * splits * 513 * 4
    sglang = context(DSV3, PHASE, "sglang", rtx, (0,))
    assert sglang.triton_mla_split_tokens == 0
    assert next(o for o in attention_ops(sglang, att, x) if o.kind == "attention").nbytes == kv + q_o


def test_absorbed_gemms_move_their_activations():
    """The absorbed kv_b's two batched GEMMs read the nope query (128 per head) and write the latent query (512),
    then read the latent output (512) and write the value (128), per decode row and head
    (model_executor/layers/attention/mla_attention.py:1362, :1633; old: launches only, no bytes), besides their
    bf16 weights, kv_b's 512 x 128 x (128 + 128) (tests/perf/test_mla_kv_b.py). Rows of an MHA prefill in the same
    step do not run them."""
    c = context(DSV3, PHASE, "vllm", H200, (0,))
    heads = DSV3.layers[-1].attention.num_heads
    weights = 512 * heads * (128 + 128) * 2
    decode = _ops(c, StepInput(decode_seqs=64.0, decode_ctx=4096.0))
    assert decode["mla absorb"].nbytes == 64 * heads * (128 + 512 + 512 + 128) * 2 + weights
    mixed = _ops(c, StepInput(decode_seqs=64.0, decode_ctx=4096.0, prefill_tokens=2048.0, prefill_ctx=1024.0))
    assert mixed["mla absorb"].nbytes == decode["mla absorb"].nbytes
    short = _ops(c, StepInput(prefill_tokens=8 * 256.0, prefill_ctx=128.0))  # absorbed prefill: every row
    assert short["mla absorb"].nbytes == 8 * 256 * heads * (128 + 512 + 512 + 128) * 2 + weights


def test_decode_query_concat_where_the_backend_joins_the_parts():
    """FLASHINFER_MLA (vLLM's auto on B200) and TRITON_MLA join the latent query (512) and its rope part (64) in a
    kernel of their own before attention (vllm/v1/attention/backends/mla/flashinfer_mla.py:327-329,
    triton_mla.py:287-288: read both, write the joined query); FLASH_ATTN_MLA (auto on H200) passes them apart
    (old: no concat anywhere). SGLang is not modelled for it."""
    heads = DSV3.layers[-1].attention.num_heads
    x = StepInput(decode_seqs=64.0, decode_ctx=4096.0)
    b200 = _ops(context(DSV3, PHASE, "vllm", _b200(), (0,)), x)
    assert b200["mla query concat"].nbytes == 2 * 64 * heads * (512 + 64) * 2
    assert "mla query concat" not in _ops(context(DSV3, PHASE, "vllm", H200, (0,)), x)
    triton = context(DSV3, dataclasses.replace(PHASE, kernels=Kernels(attention="triton")), "vllm", H200, (0,))
    assert "mla query concat" in _ops(triton, x)
    assert "mla query concat" not in _ops(context(DSV3, PHASE, "sglang", _b200(), (0,)), x)


def test_mha_prefill_up_projects_its_cached_prefix_on_vllm():
    """A 4096-token chunk of a prompt whose first 28,672 tokens are cached: vLLM's forward_mha gathers the prefix's
    latent KV, runs kv_b over all 28,672 prefix rows (2 x 28,672 x 512 x 128 heads x 256 FLOPs), builds their keys
    and merges the two attention outputs (model_executor/layers/attention/mla_attention.py:3174-3298; old: kv_b
    over the new rows only). A fresh prompt and SGLang (not modelled for it) have none of it."""
    heads = DSV3.layers[-1].attention.num_heads
    chunk = StepInput(prefill_tokens=4096.0, prefill_ctx=28672.0 + 2048.0)
    c = context(DSV3, PHASE, "vllm", H200, (0,))
    ops = _ops(c, chunk)
    up = ops["mla prefix up-projection"]
    assert up.m == 28672 and up.flops == 2 * 28672 * 512 * heads * 256
    assert ops["mla prefix gather"].nbytes == 28672 * 576 * (c.kv_elem_bytes + 2)
    assert ops["mla prefix key concat"].nbytes == 28672 * (heads * (2 * 192 - 64) + 64) * 2
    assert ops["mla prefix merge"].nbytes == 3 * 4096 * heads * 128 * 2
    fresh = _ops(c, StepInput(prefill_tokens=4096.0, prefill_ctx=2048.0))
    assert not any(source.startswith("mla prefix") for source in fresh)
    assert not any(s.startswith("mla prefix") for s in _ops(context(DSV3, PHASE, "sglang", H200, (0,)), chunk))
