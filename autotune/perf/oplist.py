"""The op list of one forward step: the ops one layer kind (and the LM head) runs on the busiest GPU of an engine
instance for a step input. perf/ops.py costs them against the box's rates table and the topology.

A step carries `decode_seqs` decode sequences (at mean context `decode_ctx`, each running `decode_width`
tokens: 1, or 1 + the draft tokens it verifies under speculative decoding) and `prefill_tokens` prompt tokens
(chunked prefill, mean attended prefix `prefill_ctx`). Ops are built per distinct layer kind (layer_groups) for
one pipeline stage and one micro-batch. Parallelism (tp/dp/ep/pp/dcp), quantisation (kernels.gemm_dtype, the
checkpoint's formats), fusion, speculative decoding and overlap are transforms in the op builders below: each
changes ops (shapes, bytes, counts, collectives) or the rate they are costed at (kernels.*, the engine's auto kernel).
"""

from __future__ import annotations

from autotune.perf import efficiency as eff
from autotune.perf import fa2_decode, linear_attention_ops, mla, mla_ops, precision, rates, tiles
from autotune.perf.attention_shape import _attention_shape, _fa3_paged
from autotune.perf.dp_gather import DpGather, dp_pair
from autotune.perf.ffn_shape import FfnShape, busiest_load, ep_spread, ffn_shape, router_ops
from autotune.perf.layers import attended_entries, indexer_scored
from autotune.perf.lm_head import head_ops as head_ops  # the op list's LM head (perf/lm_head.py)
from autotune.perf.opcore import (
    ADD_NORM_PASSES,
    FUSED_ALLREDUCE,
    AttentionShape,
    Context,
    Op,
    StepInput,
    _act_bytes,
    _collective,
    _gemm,
    _gemm_waves,
    _narrow_speed,
    _op_new,
    _quant,
    _tile_speed,
    activation_op,
    attention_rows,
    dense_op_dtype,
    prefill_fill,
    rope_op,
)
from autotune.perf.routing import experts_hit
from autotune.perf.sharding import TOPK_SLOT_BYTES, dense_layout
from autotune.specs import (
    DTYPE_BYTES,
    AttentionSpec,
    FfnSpec,
    LayerSpec,
    PhasePlan,
)

PERMUTE_BYTES = 2  # bf16 rows moved by MoE permute / unpermute


def ep_imbalance(c: Context, top_k: int, tokens: float) -> float:
    """Routed rows on the busiest expert-parallel rank over the mean at `tokens` tokens (ffn_shape.busiest_load)."""
    return busiest_load(ep_spread(c), top_k, tokens)


def speculation(phase: PhasePlan, family: str = "", acceptance: float = 0.0) -> tuple[int, float]:
    """(tokens each decoding sequence runs through the target model per step, tokens it advances on average):
    k drafts verified at once, each accepted with probability `a` given its predecessors were, advance
    E = (1 - a^(k+1)) / (1 - a) tokens (the bonus token included). `a` is eff.draft_acceptance of the model
    `family` and the method, or `acceptance` when given (Workload.draft_acceptance)."""
    spec = phase.speculative
    k = spec.draft_tokens if spec.method != "none" else 0
    if k <= 0:
        return 1, 1.0
    a = eff.draft_acceptance(family, spec.method, acceptance)
    return k + 1, (1.0 - a ** (k + 1)) / (1.0 - a)


def _projection_ops(ops: list, c: Context, att: AttentionSpec, rows: float, absorbed_rows: float) -> None:
    """The attention half's ops before its kernels (attention_parts): projections (split over TP, but MLA's q_a /
    kv_a replicated: `replicated_params`) on the busiest DP rank's `rows` (attention_rows), their quant kernels, an
    absorbed-MLA module's kernels (`absorbed_rows` of the rows on its absorbed path: _absorbed_rows), RoPE and the
    KV-cache write. They read of the layer kind only what halves.projection_signature lists."""
    shape = _attention_shape(c, att)
    hidden = c.model.hidden_size
    tp = c.phase.tp
    dense_dtype, dense_speed = c.dense_dtype, c.dense_speed
    bucket = rates.m_bucket(rows)
    split_n, split_flops, split_bytes, count = (
        mla_ops.split_projections(att, shape, rows, absorbed_rows, tp, hidden, c.dense_bytes)
        if absorbed_rows and mla.is_absorbed_mla(att)  # kv_b runs on the MHA-path rows only
        else (shape.split_n, shape.split_flops * rows / tp, shape.split_bytes, shape.split_count)
    )
    split_bytes += _act_bytes(rows, split_n, hidden, count, c.act_in_bytes)
    split_speed = dense_speed * _tile_speed(c, dense_dtype, rows, split_n / count)
    ops.append(
        _op_new(Op, ("gemm", dense_op_dtype(c), bucket, rows, split_n, hidden, split_flops, split_bytes, count, "tp",
                     split_speed, ()))
    )  # fmt: skip
    _gemm_waves(ops, c, dense_dtype, rows, split_n / count, count, "tp")
    if shape.quant_count:  # the projections' inputs (hidden rows; o_proj's per-rank width is taken as hidden), _quant
        ops.append(
            _op_new(Op, ("quant", "bf16", "any", rows, 0.0, hidden, 0.0, rows * shape.quant_row_bytes,
                         shape.quant_count, "kernels.gemm_dtype", 1.0, ()))
        )  # fmt: skip
    if shape.rep:  # every TP rank runs the whole down-projection on all its group's rows
        rep_flops = 2 * shape.rep * rows
        rep_bytes = shape.rep_bytes + _act_bytes(rows, shape.rep_n, hidden, 1.0, c.act_in_bytes)
        ops.append(
            _op_new(Op, ("gemm", dense_op_dtype(c), bucket, rows, shape.rep_n, hidden, rep_flops, rep_bytes, 1,
                         "tp (replicated q_a/kv_a)",
                         dense_speed * _tile_speed(c, dense_dtype, rows, shape.rep_n, hidden), ()))
        )  # fmt: skip
        _gemm_waves(ops, c, dense_dtype, rows, shape.rep_n, 1.0, "tp (replicated q_a/kv_a)")
    if mla.is_absorbed_mla(att):  # the module's norms, RoPE and absorbed kv_b launches (perf/mla.py)
        mla_ops.module_ops(ops, att, rows, shape, absorbed_rows, c.mla_query_concat)
    if att.kind == "gqa":  # RoPE on q and k, its own kernel in both engines (opcore.rope_op)
        ops.append(rope_op(rows, shape, att.score_dim / 2))
    if shape.cache_row_bytes:  # the new tokens' K/V written to the paged cache, its own kernel in both engines
        ops.append(_op_new(Op, ("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, rows * shape.cache_row_bytes,
                                1.0, "kv cache write", 1.0, ())))  # fmt: skip


def _absorbed_rows(att: AttentionSpec, x: StepInput, dp: int, absorbed_prefill: bool) -> float:
    """Rows of step `x` on an absorbed-MLA layer's absorbed (decode) path: the rank's decode rows and, where they run
    there (mla_ops.absorbed_prefill), its prompt tokens (rank_prompt_tokens); 0 for other layers."""
    if not mla.is_absorbed_mla(att):
        return 0.0
    return x.decode_seqs * x.decode_width / dp + (
        (x.prefill_rank_tokens or x.prefill_tokens / dp) if absorbed_prefill else 0.0  # rank_prompt_tokens
    )


def _kernel_ops(ops: list, c: Context, att: AttentionSpec, x: StepInput, shape: AttentionShape,
                absorbed_prefill: bool, sparse_prefill: bool = False) -> None:  # fmt: skip
    """The attention kernels of step `x` (attention_parts): decode rows and prefill rows are separate kernels
    (decode reads each sequence's KV once). The step-independent parts come from _attention_shape."""
    dp = c.phase.dp
    heads_per_rank = shape.heads_per_rank
    kv_elem_bytes = c.kv_elem_bytes
    if x.decode_seqs:
        seqs = x.decode_seqs / dp
        queries = seqs * x.decode_width  # verified tokens attend the same KV as their sequence
        # decode context parallel: each of the dcp ranks holds and reads 1/dcp of every sequence's latent KV
        # and runs all its group's heads over it (the heads' partial outputs are combined: a dcp all-gather)
        entries = attended_entries(att, x.decode_ctx)
        flops = 2 * heads_per_rank * shape.score_dim_decode * entries * queries
        if c.mla_decode_q_tile and att.latent_shared and att.compress_ratio == 1 and not att.index_heads:
            rows = heads_per_rank * x.decode_width  # one tile's rows per sequence, padded (tiles.mla_decode_q_tile)
            flops *= tiles.padded_rows(rows, c.mla_decode_q_tile) / rows
        nbytes = entries * att.kv_read_elems_per_token * kv_elem_bytes / shape.decode_shard * seqs
        nbytes += queries * shape.q_o_bytes
        if c.triton_mla_split_tokens and mla.is_absorbed_mla(att):  # its split partials (perf/mla.py)
            splits = mla.triton_decode_splits(x.decode_ctx / c.phase.dcp, c.sms, c.triton_mla_split_tokens)
            nbytes += mla.triton_scratch_bytes(att, queries, heads_per_rank, splits)
        fill, launches = fa2_decode.decode_op_fill(ops, c, att, shape, seqs, x)
        fixed_waves = c.mla_decode_fixed_waves and mla.is_absorbed_mla(att) and att.compress_ratio == 1
        if fixed_waves and not att.index_heads:  # one cooperative launch (tiles.MLA_DECODE_FIXED_US)
            launches = 1.0
        ops.append(
            _op_new(Op, ("attention", "bf16", "decode", queries, 0.0, 0.0, flops, nbytes, launches,
                         "kernels.attention", c.attention_speed * fill, ()))
        )  # fmt: skip
        if not att.latent_shared:  # one CTA per (sequence, KV head) once the batch fills the SMs (tiles.py)
            ctas = tiles.attention_ctas(seqs, x.decode_width, shape.kv_heads_per_rank, shape.q_per_kv)
            if c.fa2_decode and not fa2_decode.swapped(att, shape, x):  # FA2 unswapped: one per query head too
                ctas = tiles.fa2_unpacked_ctas(seqs, x.decode_width, shape.kv_heads_per_rank, shape.q_per_kv)
            _attention_waves(ops, c, ctas)
        elif fixed_waves and not att.index_heads:
            # the dense MLA kernel's fixed time beyond the attention floor (tiles.MLA_DECODE_FIXED_US)
            ops.append(Op("attention", "bf16", "wave", queries, 0.0, 0.0, 0.0, 0.0, c.mla_decode_fixed_waves,
                          "kernels.attention (MLA decode fixed time)"))  # fmt: skip
        if att.index_heads:  # the indexer's logits and top-k (each sequence's keys read once: dcp splits them)
            scored = indexer_scored(att, x.decode_ctx, c.dsa_candidate_sparse)
            mla_ops.indexer_ops(ops, c, att, queries, scored, x.decode_width, scored * seqs / shape.decode_shard)
    if absorbed_prefill:  # short prompts run with the decodes on the latent KV (Context.mla_absorbed_prefill_rows)
        mla_ops.absorbed_prefill_ops(ops, c, att, x, shape, bool(x.decode_seqs))
    elif sparse_prefill:  # a DSA layer's prompts over the top-k (mla_ops.sparse_prefill)
        mla_ops.sparse_prefill_ops(ops, c, att, x, shape)
    elif x.prefill_tokens:
        _prefill_attention_ops(ops, c, att, x, shape)
    if att.index_heads and x.prefill_tokens:  # each prompt's keys read once (mla_ops.sparse_prefill_ops' rows)
        tokens = x.prefill_rank_tokens or x.prefill_tokens / dp  # the busiest DP rank's: rank_prompt_tokens
        rows = tiles.prefill_rows_per_seq(tokens, x.prefill_ctx)
        sparse = c.dsa_candidate_sparse
        keys = tokens / rows * indexer_scored(att, x.prefill_ctx + rows / 2, sparse) / shape.kv_shard
        mla_ops.indexer_ops(ops, c, att, tokens, indexer_scored(att, x.prefill_ctx, sparse), rows, keys)


def _prefill_attention_ops(ops: list, c: Context, att: AttentionSpec, x: StepInput, shape: AttentionShape) -> None:
    """_kernel_ops' prefill rows on the prefill path: the attention kernel over each token's causal prefix (the
    diagonal blocks computed whole), bounded by its longest CTA where the kernel is FlashAttention's; an MLA
    layer's prefill kernels; the CTA waves."""
    dp, kv_elem_bytes = c.phase.dp, c.kv_elem_bytes
    heads_per_rank = shape.heads_per_rank
    tokens_per_rank = x.prefill_rank_tokens or x.prefill_tokens / dp  # the busiest DP rank's: rank_prompt_tokens
    entries = attended_entries(att, x.prefill_ctx)
    # the causal mask's diagonal blocks are computed whole: half a KV block more per query (tiles.py)
    computed = entries + tiles.causal_diagonal_entries(entries) if att.compress_ratio == 1 else entries
    flops = 2 * heads_per_rank * att.score_dim * computed * tokens_per_rank
    nbytes = entries * att.kv_read_elems_per_token * kv_elem_bytes / shape.kv_shard
    nbytes += tokens_per_rank * shape.q_o_bytes
    speed = shape.prefill_speed
    if not att.latent_shared and att.compress_ratio == 1 and not att.index_heads:  # bounded by its longest CTA
        speed *= prefill_fill(c, att, speed, shape.q_per_kv, tokens_per_rank, x.prefill_ctx, entries, flops, nbytes)
    ops.append(  # one kernel: FA splits a prompt's KV only below 0.8 of the SMs' tiles (tiles.PREFILL_LAUNCHES)
        _op_new(Op, ("attention", "bf16", "prefill", tokens_per_rank, 0.0, 0.0, flops, nbytes, tiles.PREFILL_LAUNCHES,
                     "kernels.attention", speed, ()))
    )  # fmt: skip
    # a DSA layer's short prompts run the dense MLA prefill where the engine's DSA rule is read (mla_ops.sparse_prefill)
    if mla.is_absorbed_mla(att) and att.compress_ratio == 1 and (not att.index_heads or c.dsa_prefill[0]):
        mla_ops.prefill_ops(ops, c, att, tokens_per_rank, shape)
        if c.mla_prefix_up_projection:
            mla_ops.prefix_ops(ops, c, att, tokens_per_rank, x.prefill_ctx, shape)
    if not att.latent_shared:  # one CTA per (sequence, KV head, block of packed query rows): tiles.prefill_ctas
        rows = tiles.prefill_rows_per_seq(tokens_per_rank, x.prefill_ctx)
        ctas = tiles.prefill_ctas(c.table.arch, tokens_per_rank / rows, rows, shape.kv_heads_per_rank, shape.q_per_kv)
        _attention_waves(ops, c, ctas, "paged_wave" if _fa3_paged(c, att) else "wave")


def _attention_waves(ops: list, c: Context, ctas: float, bucket: str = "wave") -> None:
    """The fixed time of the attention kernel's waves of CTAs (tiles.attention_waves): an op of no FLOPs or
    bytes whose count is the waves, each at the rates table's per-wave latency (`attention/bf16/wave`, or
    `attention/bf16/paged_wave` for FA3's prefill over short KV pages)."""
    waves = tiles.attention_waves(ctas, c.sms)
    if waves:
        ops.append(_op_new(Op, ("attention", "bf16", bucket, ctas, 0.0, 0.0, 0.0, 0.0, waves,
                                "kernels.attention (CTA waves)", 1.0, ())))  # fmt: skip


def _ffn_ops(ops: list, c: Context, ffn: FfnSpec, s: FfnShape, tokens: float) -> None:
    """Dense FFN or shared experts (a GEMM pair), then routed experts: one grouped GEMM op whose rows per expert
    come from the routing (tokens x top_k / experts), the weights of the distinct experts the batch hits, and the
    permute / unpermute of the routed rows (tokens x top_k x hidden x 2 B, each way). The step-independent parts
    come from `s`, ffn_shape(c, ffn) (layout, weights, quantisation kernels, EP spread: perf/ffn_shape.py)."""
    hidden = c.model.hidden_size
    if s.dense_weights:  # dense FFN, or the shared experts of a MoE layer
        rows = tokens / s.dense_rows_div  # 1 where the layout gathers every token to every rank (ffn_shape)
        speed = c.dense_speed * _tile_speed(c, c.dense_dtype, rows, s.dense_tile_n)
        nbytes = s.dense_weight_bytes + rows * s.dense_row_bytes
        ops.append(_gemm(s.dense_source, s.dense_op_dtype, rows, s.dense_weights, hidden,
                         s.dense_flops * tokens / s.ranks, nbytes, 2, speed))  # fmt: skip
        _gemm_waves(ops, c, c.dense_dtype, rows, s.dense_tile_n, 2.0, "dense ffn")
        if c.dense_quant_bytes:  # gate_up's and down's inputs (precision.standalone_quants)
            ops.append(_quant(rows, hidden, s.dense_quants, "kernels.gemm_dtype", c.dense_quant_bytes))
        else:  # SiluAndMul between gate_up and down (opcore.activation_op)
            ops.append(activation_op(rows, s.dense_act_n))
    if not s.moe:
        return
    imbalance = busiest_load(s.spread, ffn.experts_per_token, tokens)  # ep_imbalance
    routed = tokens * ffn.experts_per_token / s.ranks * imbalance  # routed rows the busiest rank computes
    per_expert = tokens * ffn.experts_per_token / ffn.num_experts * imbalance
    hit = experts_hit(s.miss_rates, tokens)  # routing.distinct_experts
    nbytes = hit * ffn.expert_params * c.expert_bytes / s.ranks * imbalance
    bucket = rates.m_bucket(per_expert)
    flops = s.expert_flops * routed
    ops.append(_op_new(Op, ("grouped_moe", c.expert_dtype, bucket, per_expert, s.expert_n, hidden, flops, nbytes, 1.0,
                            "kernels.moe / ep / eplb", c.moe_speed, ())))  # fmt: skip
    if s.fused_shared:  # the fused shared experts: more experts every token picks, in the same launch (no fixed
        # time of their own), their tiles of all the step's rows at that M's rate, their weights read once;
        # expert parallel 1 (ffn_shape: the engine's rule), so sharded as a routed expert over every rank
        shared = tokens * s.fused_shared / s.ranks
        ops.append(_op_new(Op, ("grouped_moe", c.expert_dtype, rates.m_bucket(tokens), tokens, s.expert_n, hidden,
                                s.expert_flops * shared, s.fused_shared * ffn.expert_params * c.expert_bytes / s.ranks,
                                0.0, "kernels.moe (fused shared expert)", c.moe_speed, ())))  # fmt: skip
        routed += shared  # the quant, waves, permute and combine below run its rows too
    if s.wave_gemms:
        _moe_waves(ops, c, s, routed * s.ranks / s.wave_div)
    if c.expert_quant_bytes:  # routed rows quantised in front of the two grouped GEMMs
        ops.append(_quant(routed, hidden, s.expert_quants, "kernels.moe", c.expert_quant_bytes))
    permute = 2 * 2 * routed * hidden * PERMUTE_BYTES  # permute + unpermute, each a read and a write
    ops.append(_op_new(Op, ("elementwise", "bf16", "any", routed, 0.0, 0.0, 0.0, permute, 2.0, "moe permute", 1.0, ())))


def _moe_waves(ops: list, c: Context, s: FfnShape, rows: float) -> None:
    """The fixed time of the routed experts' tile waves (opcore._gemm_waves, tiles.GEMM_WAVE_FIXED_US) for the GEMMs
    Context.moe_tile_waves names (ffn_shape.moe_wave_gemms): the Triton fused MoE computes one tile per CTA over the
    whole K loop (SGLang kernels/ops/moe/fused_moe_triton_kernels.py:557-611; block-FP8 scales applied outside the
    MMA each K step, :590-602). Expert TP shards the intermediate: at DeepSeek-R1 TP8 the down projection reduces
    over 256 columns, two K steps a tile, and sgl-project/sglang#10567 (H20, 8K tokens, TP8) timed it
    pointer-gathered at 2.43 ms (the grouped op 1.46 + 367 waves x 2.6 us), with TMA at 1.435 (the op alone).
    `rows`: routed rows this rank computes (all under expert TP, 1 / ep under EP)."""
    for n, source in s.wave_gemms:
        _gemm_waves(ops, c, c.expert_dtype, rows, n, 1.0, source)


def _comm_ops(ops: list, c: Context, ffn: FfnSpec, tokens: float, dense: str, gather: DpGather | None = None) -> None:
    """The layer's collectives: attention's TP all-reduce, then the FFN's: its TP all-reduce, DeepEP's all-to-alls,
    or attention DP's gather before it and return after it, `gather`'s pair where the engine picks them per step
    (perf/dp_gather.py), else an all-gather and a reduce-scatter of the step's rows."""
    phase, stage = c.phase, c.stage
    tp, dp = phase.tp, phase.dp
    tp_group = stage[:tp]
    row_bytes = c.model.hidden_size * precision.ACTIVATION_BYTES
    ops.append(_collective("allreduce", tp_group, tokens / dp * row_bytes, "tp"))
    if ffn.kind != "moe" or len(stage) == 1:
        if dense == "tp":
            ops.append(_collective("allreduce", tp_group, tokens / dp * row_bytes, "tp"))
        elif dense == "all":  # dense MLP sharded over every rank (dense_layout); "dp" has nothing to reduce
            dp_pair(ops, stage, tokens, row_bytes, row_bytes, gather)
        return
    if phase.comm.all2all == "deepep" and phase.ep > 1:
        per_rank = tokens / len(stage) * ffn.experts_per_token * c.model.hidden_size
        ops.append(_collective("all2all", stage, per_rank * DTYPE_BYTES["fp8"], "comm.all2all"))  # fp8 dispatch
        ops.append(_collective("all2all", stage, per_rank * precision.ACTIVATION_BYTES, "comm.all2all"))  # combine
    elif dp > 1 and c.dispatch_act_bytes:  # rows quantised for the experts, with their routing slots
        gathered = c.model.hidden_size * c.dispatch_act_bytes + ffn.experts_per_token * TOPK_SLOT_BYTES
        dp_pair(ops, stage, tokens, gathered, row_bytes, None)  # (sharding.dispatch_act_bytes)
    elif dp > 1:  # gather every token to every rank of the MoE group, return the outputs
        dp_pair(ops, stage, tokens, row_bytes, row_bytes, gather)
    else:
        ops.append(_collective("allreduce", stage, tokens * row_bytes, "ep"))


def _fused_norms(c: Context, ffn: FfnSpec, dense: str, rows: float) -> int:
    """Norms folded into the all-reduce before them (fusion allreduce_rmsnorm, TP > 1): the one after the
    attention all-reduce, and the one after the FFN's when its output is all-reduced (see _comm_ops); none on a step
    of more rows per rank than the engine fuses (Context.fused_norm_max_tokens)."""
    phase = c.phase
    if phase.tp == 1 or rows > c.fused_norm_max_tokens:
        return 0
    if ffn.kind != "moe":
        return 2 if dense == "tp" else 1
    deepep = phase.comm.all2all == "deepep" and phase.ep > 1
    return 2 if phase.dp == 1 and not deepep else 1


def layer_input(layer: LayerSpec, x: StepInput) -> StepInput:
    """The part of the step a layer runs: layers outside prefill (V4 CED) see only the decode rows (decode_part)."""
    return x if layer.in_prefill else decode_part(x)


def decode_part(x: StepInput) -> StepInput:
    """The step's decode rows alone: what a layer outside prefill runs (layer_input)."""
    return StepInput(x.decode_seqs, x.decode_ctx, decode_width=x.decode_width)


def step_tokens(x: StepInput) -> float:
    return x.decode_seqs * x.decode_width + x.prefill_tokens


def _rows(x: StepInput, tokens: float, dp: int) -> float:
    """opcore.attention_rows of a step of `tokens` tokens: tokens / dp for the even spread (the hot path's one
    division)."""
    return attention_rows(x, dp) if x.prefill_rank_tokens else tokens / dp


def attention_ops(c: Context, att: AttentionSpec, x: StepInput) -> list[Op]:
    """The attention half of a layer (projections and kernels) for the layer's own input (layer_input)."""
    parts = attention_parts(c, att, x)
    if parts is None:
        return []
    rows, absorbed_rows, kernels = parts
    ops: list[Op] = []
    _projection_ops(ops, c, att, rows, absorbed_rows)
    return ops + kernels


def attention_parts(c: Context, att: AttentionSpec, x: StepInput) -> tuple[float, float, list[Op]] | None:
    """attention_ops(c, att, x) in two parts, None for a step without tokens: (rows, absorbed_rows) that its
    projections read of the step (_projection_ops) and its kernel ops, which follow the projections' (the kernels:
    _kernel_ops; a linear-attention layer's scan / recurrent kernels, perf/linear_attention_ops.py)."""
    tokens = step_tokens(x)
    if not tokens > 0:
        return None
    dp = c.phase.dp
    rows = _rows(x, tokens, dp)
    if att.is_linear:  # projections as any attention layer (of no decode or prompt rows: no absorbed path)
        return rows, 0.0, linear_attention_ops.linear_kernel_ops(c, att, x, rows)
    kernels: list[Op] = []
    absorbed_prefill = mla_ops.absorbed_prefill(c, att, x, dp)
    sparse = mla_ops.sparse_prefill(c, att, x, dp)  # a DSA layer's long prompts: absorbed over the top-k
    _kernel_ops(kernels, c, att, x, _attention_shape(c, att), absorbed_prefill, sparse)
    return rows, _absorbed_rows(att, x, dp, absorbed_prefill or sparse), kernels


def ffn_ops(c: Context, ffn: FfnSpec, tokens: float) -> list[Op]:
    """The FFN half of a layer and the layer's collectives and norms: a function of the FFN and the layer's
    token count only, so layers of different attention share it."""
    if tokens <= 0:
        return []
    return ffn_kernel_ops(c, ffn, tokens) + ffn_comm_ops(c, ffn, tokens) + ffn_norm_ops(c, ffn, tokens)


def padded_ffn_rows(c: Context, ffn: FfnSpec, tokens: float, gather: DpGather | None) -> float | None:
    """The rows the FFN half's kernels (ffn_kernel_ops) compute on a step of `tokens` tokens whose attention-DP
    gather pads every rank to the prompt graph's bucket (`gather`, perf/dp_gather.py: its buffer's rows), None where
    they compute the step's tokens. SGLang hands the FFN the gathered buffer, padding included
    (srt/layers/layer_boundary/prepare.py:183-225, ops.py:249-258: get_global_dp_buffer, sized dp x the bucket on a
    MAX_LEN step, srt/model_executor/forward_batch_info.py:1793-1828), and leaves its padded rows unmasked: the
    MoE's bound on real rows is None for a buffer gathered over attention-DP ranks (forward_batch_info.py:1409-1440
    moe_num_token_non_padded), so the router, the shared and routed experts and the dense MLP run every row of it
    (srt/models/deepseek_v2.py:1128-1250); a rank's own rows (the dense MLP under --moe-dense-tp-size 1) are its
    bucket. Not an a2a MoE layer nor a quantised dispatch: those route the rank's own rows, padded rows masked
    (the same bound, :1428-1431)."""
    if gather is None or gather.rows <= tokens:
        return None
    phase = c.phase
    if ffn.kind == "moe" and (phase.comm.all2all == "deepep" and phase.ep > 1 or c.dispatch_act_bytes):
        return None
    return gather.rows


def ffn_kernel_ops(c: Context, ffn: FfnSpec, tokens: float) -> list[Op]:
    """ffn_ops' GEMMs (dense or shared, routed experts) and router, in ffn_ops' order (tokens > 0)."""
    ops: list[Op] = []
    s = ffn_shape(c, ffn)
    _ffn_ops(ops, c, ffn, s, tokens)
    if s.moe:  # after the FFN's ops: the shared-expert GEMM stays first (ops._overlapped_shared)
        router_ops(ops, c, s, tokens)
    return ops


def ffn_comm_ops(c: Context, ffn: FfnSpec, tokens: float, gather: DpGather | None = None) -> list[Op]:
    """ffn_ops' collectives (tokens > 0), attention DP's gather and return as `gather` says (perf/dp_gather.py; None:
    the default pair); the all-reduces whose norm is fused (_fused_norms: the first ones, in _comm_ops' order) are
    the fused kernel's (opcore.FUSED_ALLREDUCE)."""
    ops: list[Op] = []
    dense = dense_layout(ffn, c.phase, c.engine)
    _comm_ops(ops, c, ffn, tokens, dense, gather)
    if c.fused_norm_max_tokens:
        for i, op in enumerate(ops[: _fused_norms(c, ffn, dense, tokens / c.phase.dp)]):
            if op.bucket == "allreduce":  # op._replace(bucket=...) without its Python-level _make
                ops[i] = _op_new(Op, (*op[:2], FUSED_ALLREDUCE, *op[3:]))
    return ops


def ffn_norm_ops(c: Context, ffn: FfnSpec, tokens: float) -> list[Op]:
    """ffn_ops' residual add + RMSNorm kernels (each fused with its residual add in vLLM/SGLang): bf16 reads of the
    residual and the input, writes of both; the ones fused into an all-reduce (fusion.allreduce_rmsnorm) are gone
    (tokens > 0). Reads tp / dp / ep, the fused-norm limit, comm.all2all and the dense layout (_fused_norms)."""
    phase = c.phase
    rows = tokens / phase.dp
    kernels = eff.NORMS_PER_LAYER - _fused_norms(c, ffn, dense_layout(ffn, phase, c.engine), rows)
    if kernels <= 0:
        return []
    nbytes = kernels * ADD_NORM_PASSES * rows * c.model.hidden_size * precision.ACTIVATION_BYTES
    return [_op_new(Op, ("norm", "bf16", "fused_add", rows, 0.0, 0.0, 0.0, nbytes, float(kernels), "fusion", 1.0, ()))]


def dcp_ops(c: Context, att: AttentionSpec, x: StepInput) -> list[Op]:
    """Decode context parallel: the partial attention outputs of the decode rows gathered over the dcp ranks."""
    phase = c.phase
    if phase.dcp == 1 or not x.decode_seqs or not att.latent_shared or step_tokens(x) <= 0:
        return []
    nbytes = x.decode_seqs * x.decode_width / phase.dp * c.model.hidden_size * precision.ACTIVATION_BYTES
    return [_collective("dcp_allgather", c.stage[: phase.dcp], nbytes, "dcp")]


def layer_ops(c: Context, layer: LayerSpec, x: StepInput) -> list[Op]:
    """The ops one layer of this kind runs on the busiest GPU for step input `x`: attention, FFN (with the
    layer's collectives and norms), decode-context-parallel gather."""
    x = layer_input(layer, x)
    att = layer.attention
    return attention_ops(c, att, x) + ffn_ops(c, layer.ffn, step_tokens(x)) + dcp_ops(c, att, x)


def linear_ops(c: Context, m: float, n: int, k: int, source: str) -> list[Op]:
    """One dense linear layer (m rows, n x k weights on this rank, in the Context's dense dtype) as the op list
    builds it: the GEMM streaming its weights, after its input's FP8 quantisation. Used by the per-op check
    (tests/bench/op_check.py)."""
    dtype = c.dense_dtype
    speed = c.dense_speed * _narrow_speed(c.hw, dtype, k) / _narrow_speed(c.hw, dtype, c.model.hidden_size)
    speed *= _tile_speed(c, dtype, m, n, k)
    nbytes = n * k * c.dense_bytes + _act_bytes(m, n, k, 1.0, c.act_in_bytes)
    ops = [_gemm(source, dense_op_dtype(c), m, n * k, k, 2.0 * m * n * k, nbytes, 1.0, speed)]
    _gemm_waves(ops, c, dtype, m, n, 1.0, source)
    return ops + ([_quant(m, k, 1.0, source, c.dense_quant_bytes)] if c.dense_quant_bytes else [])
