"""The step-independent parts of a layer kind's attention ops under one Context (opcore.AttentionShape), for the
op builders of perf/oplist.py, remembered per Context and across Contexts of one attention prefix."""

from __future__ import annotations

from autotune.perf import mla, precision, rates
from autotune.perf.costing import BoundedMemo
from autotune.perf.opcore import AttentionShape, Context
from autotune.specs import AttentionSpec

SHAPE_MEMO_MAX = 4096  # entries of the memo of attention shapes across Contexts (_attention_shape)
_SHAPES = BoundedMemo(SHAPE_MEMO_MAX)  # (attention prefix number, id(spec)) -> (the spec, its AttentionShape)


def _attention_shape(c: Context, att: AttentionSpec) -> AttentionShape:
    """The parts of the attention ops (oplist._projection_ops, _kernel_ops) that depend on the Context and the layer
    kind only, remembered per Context by the spec's id (which the Context's model keeps alive) and across Contexts
    by the attention prefix's number (halves._attention_prefix, in the Context's memo_keys as "attention" once a
    step has costed the attention half) and the spec: the prefix holds all that _shape reads of the Context (the
    model's hidden size and dense format by its identity, tp, dcp, the dense dtype and its stored and quantised
    bytes, the KV element's bytes, the attention kernel's speed, the rates table by identity (its prefill rate's
    provenance, arch and tensor-rate ratio), the FP8 prefill speed and FA3's paged prefill path). The entry holds
    the spec, so its id is not reused while it is remembered."""
    hit = c.attention_shapes.get(id(att))
    if hit is not None and hit[0] is att:
        return hit[1]
    prefix = c.memo_keys.get("attention")
    if prefix is None:
        shape = _shape(c, att)
    else:
        key = (prefix, id(att))
        hit = _SHAPES.get(key)
        shape = hit[1] if hit is not None else _SHAPES.put(key, (att, _shape(c, att)))[1]
    c.attention_shapes[id(att)] = (att, shape)
    return shape


def _shape(c: Context, att: AttentionSpec) -> AttentionShape:
    """_attention_shape, computed."""
    phase, hidden = c.phase, c.model.hidden_size
    tp = phase.tp
    w_bytes = c.dense_bytes
    split = att.params - att.replicated_params
    rep = att.replicated_params
    kv_shard = 1 if att.latent_shared else min(tp, att.num_kv_heads)
    q_width = mla.query_quant_width(att, rep / hidden, hidden) if hidden else 0.0  # MLA q_b's input, mla.py
    quants = precision.standalone_quants(c.dense_dtype, c.model.dense_format, 3 if q_width else 2)
    shape = AttentionShape(
        split_n=split / tp / hidden if hidden else 0.0,
        split_flops=2 * split,
        split_bytes=split * w_bytes / tp,
        split_count=3 if rep else 2,
        rep=rep,
        rep_n=rep / hidden if hidden else 0.0,
        rep_bytes=rep * w_bytes,
        heads_per_rank=att.num_heads / tp,
        kv_shard=kv_shard,
        decode_shard=kv_shard * (phase.dcp if att.latent_shared else 1),
        score_dim_decode=att.score_dim_decode or att.score_dim,
        quant_count=float(quants) if c.dense_quant_bytes else 0.0,  # q/kv (or q_a+kv_a) input, o_proj input, q_b's
        quant_row_bytes=precision.quant_row_bytes(quants, hidden, q_width, c.dense_quant_bytes),
        q_o_bytes=att.num_heads / tp * (att.score_dim_decode or att.score_dim) * precision.ACTIVATION_BYTES,
        kv_heads_per_rank=max(1.0, att.num_kv_heads / tp),
        q_per_kv=att.num_heads / tp / max(1.0, att.num_kv_heads / tp),
        cache_row_bytes=att.kv_elems_per_token / kv_shard * (precision.ACTIVATION_BYTES + c.kv_elem_bytes),
        prefill_speed=c.attention_speed * _prefill_head_dim_speed(c, att),
    )
    return shape


def _prefill_head_dim_speed(c: Context, att: AttentionSpec) -> float:
    """rates.prefill_head_dim_speed (times the FP8 kernel's speed where it runs in FP8) for a dense-prefix attention
    (every entry of the prefix, no compression or indexer: FlashAttention's varlen prefill); 1 for the sparse /
    compressed kernels."""
    if att.compress_ratio != 1 or att.index_heads:
        return 1.0
    probed = c.table.get("attention", "bf16", "prefill").provenance.startswith("probe")
    speed = rates.prefill_head_dim_speed(c.table.arch, att.score_dim / 2, probed, c.table.tensor_rate_ratio)
    speed *= c.fp8_prefill_speed  # FA3 on FP8 inputs (opcore._fp8_prefill_speed), 1 elsewhere
    return speed * rates.FA3_PAGED_KV_PREFILL_SPEED if _fa3_paged(c, att) and not probed else speed


def _fa3_paged(c: Context, att: AttentionSpec) -> bool:
    """True when the layer's prefill attention is FA3 reading a paged KV cache of short pages (Context
    .fa3_paged_prefill; a latent-KV layer's prefill attends its up-projected, contiguous keys instead)."""
    return c.fa3_paged_prefill and not att.latent_shared and att.compress_ratio == 1 and not att.index_heads
