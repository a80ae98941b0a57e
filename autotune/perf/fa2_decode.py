"""The decode attention op's fill of the SMs in the op list (decode_op_fill): FA3's capped KV splits under vLLM's CUDA
graphs, and vLLM's FlashAttention-2 decode (Context.fa2_decode: sm_80 / sm_86 / sm_89 / sm_120): whether a step's
call packs its heads and splits its KV, the speed and launches of its decode op, the copy kernels of the head swap
(the kernel rules: perf/tiles.py fa2_*). Pure functions, no I/O."""

from __future__ import annotations

from autotune.perf import rates, tiles
from autotune.perf.layers import attended_entries
from autotune.perf.opcore import AttentionShape, Context, Op, StepInput
from autotune.specs import AttentionSpec

FA2_COPIES_SOURCE = "kernels.attention (FA2 head-swap copies)"  # Op.source of tiles.fa2_swap_copies


def decode_fill(
    ops: list, c: Context, att: AttentionSpec, shape: AttentionShape, seqs: float, x: StepInput
) -> tuple[float, float]:
    """decode_op_fill of vLLM's FA2 (tiles.fa2_decode_streams): one call per step, so a prompt in the step or a
    verify leaves the heads unswapped and the KV unsplit, one kernel without the combine (tiles.fa2_decode_launches);
    a swapped call's copy kernels (tiles.fa2_swap_copies) go to `ops`, each moving a query row's Q or O per query
    (shape.q_o_bytes)."""
    q_per_kv, width, kv_heads = shape.q_per_kv, x.decode_width, shape.kv_heads_per_rank
    swapped_ = swapped(att, shape, x)
    splits = 1
    if swapped_:
        entries = attended_entries(att, x.decode_ctx)
        splits = tiles.fa2_swapped_splits(seqs, kv_heads, q_per_kv, entries, att.score_dim / 2, c.sms)
        copies, moved = tiles.fa2_swap_copies(seqs, kv_heads, splits)
        ops.append(Op("elementwise", "bf16", "any", seqs, 0.0, 0.0, 0.0, moved * seqs * shape.q_o_bytes, copies,
                      FA2_COPIES_SOURCE))  # fmt: skip
    streams = tiles.fa2_decode_streams(seqs, width, kv_heads, q_per_kv, splits, c.sms, swapped_)
    fill = rates.decode_fill_speed(streams, c.table.get("attention", "bf16", "decode").gbs)
    return fill, tiles.fa2_decode_launches(splits)


def swapped(att: AttentionSpec, shape: AttentionShape, x: StepInput) -> bool:
    """Whether FA2 packs the step's decode heads and may split their KV (tiles.py, seqlenq_ngroups_swapped): every
    query of the call one token (no verify, no prompt in the step), more query than KV heads, no sliding window."""
    return x.decode_width == 1 and not x.prefill_tokens and shape.q_per_kv > 1 and not att.window


def decode_op_fill(
    ops: list, c: Context, att: AttentionSpec, shape: AttentionShape, seqs: float, x: StepInput
) -> tuple[float, float]:
    """(speed, launch count) of the decode attention op. Speed: of a kernel whose KV splits are capped
    (Context.decode_split_cap: FA3 under vLLM's CUDA graphs) or ruled by FA2 (Context.fa2_decode:
    decode_fill) for the SMs it leaves idle: its CTAs (tiles.decode_split_ctas; a latent-KV layer has one
    KV head) each stream at most rates.PER_SM_STREAM_GBS; 1 for kernels that split to fill the SMs and sparse /
    compressed attention.
    Launch count: the kernels of a split-KV call (tiles.ATTENTION_DECODE_LAUNCHES: the split kernel and its
    combine), one where FA2 runs unsplit (tiles.fa2_decode_launches)."""
    launches = float(tiles.ATTENTION_DECODE_LAUNCHES)
    if att.compress_ratio != 1 or att.index_heads:
        return 1.0, launches
    if c.fa2_decode and not att.latent_shared:
        return decode_fill(ops, c, att, shape, seqs, x)
    if not c.decode_split_cap:
        return 1.0, launches
    kv_heads, q_per_kv = (1.0, shape.heads_per_rank) if att.latent_shared else (shape.kv_heads_per_rank, shape.q_per_kv)
    mblocks = tiles.attention_ctas(seqs, x.decode_width, kv_heads, q_per_kv)
    ctx = x.decode_ctx / c.phase.dcp if att.latent_shared else x.decode_ctx  # a rank's share of each sequence
    ctas = tiles.decode_split_ctas(mblocks, ctx, c.sms, c.decode_split_cap)
    return rates.decode_fill_speed(ctas, c.table.get("attention", "bf16", "decode").gbs), launches
