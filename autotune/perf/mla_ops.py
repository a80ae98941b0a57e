"""The absorbed-MLA layer's ops besides its projections and attention kernel (DeepSeek-V3 / GLM-5 family): the
module's norms, RoPE and absorbed kv_b launches, short prefills on the absorbed (decode) path, the MHA prefill's key
concat and output copy, and its cached prefix's up-projection, each an engine fact read from the Context (the
engine profile's MLA fields). `perf/mla.py` holds the kernels' byte counts; `perf/oplist.py` calls these while
building a layer's attention ops (`_projection_ops`, `_kernel_ops`)."""

from __future__ import annotations

from autotune.perf import mla, precision, rates, tiles
from autotune.perf.costing import _rate_terms
from autotune.perf.layers import attended_entries
from autotune.perf.opcore import AttentionShape, Context, Op, StepInput, _act_bytes, _gemm, _op_new, _tile_speed
from autotune.specs import AttentionSpec


def absorbed_prefill(c: Context, att: AttentionSpec, x: StepInput, dp: int) -> bool:
    """Whether the step's prefill rows run on a dense absorbed-MLA layer's decode path: at most
    Context.mla_absorbed_prefill_rows query rows per sequence (tiles.prefill_rows_per_seq), or a step of at most
    Context.mla_absorbed_step_tokens tokens (the engine's prefill CUDA graph pins the absorbed method, SGLang:
    attention_choice.mla_graph_absorbed_tokens). Not a DSA layer's (attended_cap: its own indexer's or a shared
    top-k's): the sparse backends decide those (sparse_prefill)."""
    if not x.prefill_tokens or att.compress_ratio != 1 or att.attended_cap:
        return False
    if not (c.mla_absorbed_prefill_rows or c.mla_absorbed_step_tokens) or not mla.is_absorbed_mla(att):
        return False
    if x.decode_seqs * x.decode_width + x.prefill_tokens <= c.mla_absorbed_step_tokens:  # _step's graph rule
        return True
    if not c.mla_absorbed_prefill_rows:
        return False
    tokens = x.prefill_rank_tokens or x.prefill_tokens / dp  # the busiest DP rank's (rank_prompt_tokens)
    return tiles.prefill_rows_per_seq(tokens, x.prefill_ctx) <= c.mla_absorbed_prefill_rows


def absorbed_prefill_ops(ops: list, c: Context, att: AttentionSpec, x: StepInput, shape: AttentionShape,
                          with_decodes: bool) -> None:  # fmt: skip
    """The prefill rows of an absorbed-MLA layer on its decode path (absorbed_prefill): every head scores the
    latent key (score_dim_decode) of each attended entry, the causal diagonal block computed whole as in the MHA
    prefill; each sequence's latent KV is read once, its queries and latent outputs once per row. The engine runs
    them in the decode rows' kernel (forward_mqa on the whole decode batch), so with decode rows this op's FLOPs
    and bytes join the decode op just appended, else it is a kernel of its own. No key concat, no output copy."""
    tokens = x.prefill_rank_tokens or x.prefill_tokens / c.phase.dp  # the busiest DP rank's (rank_prompt_tokens)
    rows = tiles.prefill_rows_per_seq(tokens, x.prefill_ctx)
    entries = attended_entries(att, x.prefill_ctx)
    flops = 2 * shape.heads_per_rank * shape.score_dim_decode * (entries + tiles.causal_diagonal_entries(entries))
    flops *= tokens
    whole = attended_entries(att, x.prefill_ctx + rows / 2)  # the last row's prefix: a sequence's whole KV
    nbytes = tokens / rows * whole * att.kv_read_elems_per_token * c.kv_elem_bytes / shape.decode_shard
    nbytes += tokens * shape.q_o_bytes
    if with_decodes:  # the decode op _kernel_ops appended (by bucket: an MLA fixed-time wave op may follow it)
        i = next(j for j in range(len(ops) - 1, -1, -1) if ops[j].kind == "attention" and ops[j].bucket == "decode")
        decode = ops[i]
        ops[i] = decode._replace(m=decode.m + tokens, flops=decode.flops + flops, nbytes=decode.nbytes + nbytes)
    else:
        ops.append(Op("attention", "bf16", "decode", tokens, 0.0, 0.0, flops, nbytes, tiles.ATTENTION_DECODE_LAUNCHES,
                      "kernels.attention (absorbed prefill)", c.attention_speed))  # fmt: skip


def module_ops(ops: list, att: AttentionSpec, rows: float, shape: AttentionShape, absorbed_rows: float,
                    concat: bool) -> None:  # fmt: skip
    """The absorbed-MLA module's kernels besides its projections and attention (mla.module_kernels); `absorbed_rows`
    of the `rows` run the absorbed path (decode rows, and short prefills where absorbed_prefill), their query
    concatenated first where `concat` (Context.mla_query_concat)."""
    k = mla.module_kernels(att, rows, shape.heads_per_rank, shape.rep_n, absorbed_rows, precision.ACTIVATION_BYTES)
    # Ops made as tuples (opcore._op_new): this runs for every projection terms' miss of an absorbed-MLA model
    ops.append(_op_new(Op, ("norm", "bf16", "any", rows, 0.0, 0.0, 0.0, k.norm_bytes, k.norm_kernels,
                            "mla q_a/kv_a norms", 1.0, ())))  # fmt: skip
    ops.append(_op_new(Op, ("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, k.rope_bytes, k.rope_kernels,
                            "mla rope", 1.0, ())))  # fmt: skip
    if k.absorb_gemms:  # the W_UK_T / W_UV batched GEMMs on the absorbed rows, in bf16 (mla.py)
        ops.append(_op_new(Op, ("gemm", "bf16", rates.m_bucket(absorbed_rows), absorbed_rows, 0.0, 0.0,
                                k.absorb_flops, k.absorb_bytes, k.absorb_gemms, "mla absorb", 1.0, ())))  # fmt: skip
    if absorbed_rows and concat:  # the decode backend joins the latent query and its rope part (mla.py)
        nbytes = mla.query_concat_bytes(att, absorbed_rows, shape.heads_per_rank, precision.ACTIVATION_BYTES)
        ops.append(_op_new(Op, ("elementwise", "bf16", "any", absorbed_rows, 0.0, 0.0, 0.0, nbytes, 1.0,
                                "mla query concat", 1.0, ())))  # fmt: skip


def split_projections(att: AttentionSpec, shape: AttentionShape, rows: float, absorbed_rows: float, tp: int,
                      hidden: int, weight_bytes: float) -> tuple[float, float, float, int]:  # fmt: skip
    """(output width per rank, FLOPs, weight bytes per rank, kernels) of an absorbed-MLA layer's TP-split
    projections (q_b, kv_b, o_proj) on `rows` rows, `absorbed_rows` of them on the absorbed path, where kv_b_proj
    does not run (its W_UK / W_UV batched GEMMs do: module_ops, mla.py): kv_b's FLOPs on the other rows only, and
    its weights and launch only where there are such rows (an MHA prefill in the step: vLLM's split batch)."""
    kv_b = mla.kv_b_params(att)
    flops = (shape.split_flops * rows - 2 * kv_b * absorbed_rows) / tp
    if rows - absorbed_rows > 1e-9 * rows:  # MHA-path rows (above the rounding of rows' own sum)
        return shape.split_n, flops, shape.split_bytes, shape.split_count
    return (
        shape.split_n - kv_b / tp / hidden,
        flops,
        shape.split_bytes - kv_b * weight_bytes / tp,
        shape.split_count - 1,
    )


def prefill_ops(ops: list, c: Context, att: AttentionSpec, tokens: float, shape: AttentionShape) -> None:
    """A dense MLA layer's prefill kernels besides its projections and attention (mla.prefill_kernels): the key
    concat, and vLLM's output copy (Context.mla_output_copy)."""
    k = mla.prefill_kernels(att, tokens, shape.heads_per_rank, precision.ACTIVATION_BYTES, c.mla_output_copy)
    ops.append(Op("elementwise", "bf16", "any", tokens, 0.0, 0.0, 0.0, k.concat_bytes, 1.0, "mla prefill key concat"))
    if k.copy_bytes:
        ops.append(
            Op("elementwise", "bf16", "any", tokens, 0.0, 0.0, 0.0, k.copy_bytes, 1.0, "mla prefill output copy")
        )


def prefix_ops(ops: list, c: Context, att: AttentionSpec, tokens: float, ctx: float,
                    shape: AttentionShape) -> None:  # fmt: skip
    """A dense MLA layer's MHA prefill over a cached prefix (Context.mla_prefix_up_projection, mla.prefix_kernels):
    each sequence's prefix is what its rows attend beyond their own half (ctx - rows / 2, tiles.
    prefill_rows_per_seq); the gather, kv_b's up-projection of the prefix rows in the dense dtype, the prefix's
    key concat and the output merge. Nothing for fresh prompts."""
    rows = tiles.prefill_rows_per_seq(tokens, ctx)
    prefix = (ctx - rows / 2) * tokens / rows
    if prefix <= 0:
        return
    k = mla.prefix_kernels(att, prefix, tokens, shape.heads_per_rank, c.kv_elem_bytes, precision.ACTIVATION_BYTES)
    dtype = c.dense_dtype
    ops.append(Op("elementwise", "bf16", "any", prefix, 0.0, 0.0, 0.0, k.gather_bytes, 1.0, "mla prefix gather"))
    ops.append(
        _gemm("mla prefix up-projection", dtype, prefix, k.up_n * k.up_k, k.up_k, 2 * prefix * k.up_n * k.up_k,
              k.up_n * k.up_k * c.dense_bytes + _act_bytes(prefix, k.up_n, k.up_k, 1.0, precision.ACTIVATION_BYTES),
              1.0, c.dense_speed * _tile_speed(c, dtype, prefix, k.up_n))
    )  # fmt: skip
    ops.append(Op("elementwise", "bf16", "any", prefix, 0.0, 0.0, 0.0, k.concat_bytes, 1.0, "mla prefix key concat"))
    ops.append(Op("elementwise", "bf16", "any", tokens, 0.0, 0.0, 0.0, k.merge_bytes, 1.0, "mla prefix merge"))


def sparse_prefill(c: Context, att: AttentionSpec, x: StepInput, dp: int) -> bool:
    """Whether the step's prompt rows of a DSA layer (absorbed MLA attending the indexer's top-k: attended_cap) run on
    the sparse absorbed path: where the engine's dense-MHA limit (Context.dsa_prefill[0] tokens, the engine profile's
    dsa_mha_prefill_max_kv) is below a sequence's whole KV (its prefix and rows: the last row's, as
    absorbed_prefill_ops reads it; eager_host.launch_key reads the same rule). Below it, and on engines not read (0),
    the MHA path."""
    limit = c.dsa_prefill[0]
    if not limit or not x.prefill_tokens or not att.attended_cap or att.compress_ratio != 1:
        return False
    if not mla.is_absorbed_mla(att):
        return False
    tokens = x.prefill_rank_tokens or x.prefill_tokens / dp  # the busiest DP rank's (rank_prompt_tokens)
    whole = x.prefill_ctx + tiles.prefill_rows_per_seq(tokens, x.prefill_ctx) / 2
    return whole > limit


def sparse_prefill_ops(ops: list, c: Context, att: AttentionSpec, x: StepInput, shape: AttentionShape) -> None:
    """The prompt rows of a DSA layer on the sparse absorbed path (sparse_prefill): the engines' sparse kernels
    (FlashMLA's sparse prefill, FA3's q_v path, FlashInfer / TRT-LLM's sparse MLA: the engine profiles'
    dsa_mha_prefill_max_kv cite each engine's) run the 576 / 512 MQA form: every head of a row
    scores the latent key (kv_lora + rope) of each of its top-k entries and sums their latent values (kv_lora), no
    causal diagonal (README of deepseek-ai/FlashMLA, "Sparse MLA Prefill": P = Q @ focused_kv^T over `indices`
    [s_q, topk]), on the rank's heads padded to the engine's tile (Context.dsa_prefill[1]). No kv_b up-projection,
    key concat or output copy: the absorbed rows' W_UK / W_UV launches are module_ops'. Bytes: each sequence's latent
    KV read once (its rows' top-k overlap in L2, an assumption), queries and outputs once per row. The indexer's
    scoring is its own ops (indexer_ops, from oplist._kernel_ops). Rate: the prefill rate
    (rates.ATTENTION_PREFILL_FRACTION of the BF16 peak, 0.60), which FlashMLA's README tops at 640 TFLOPS on H800
    SXM5 (0.65 of 989) and 1450 on B200 for the sparse prefill (calibration.yaml kernel-flashmla-sparse-prefill)."""
    tokens = x.prefill_rank_tokens or x.prefill_tokens / c.phase.dp  # the busiest DP rank's (rank_prompt_tokens)
    rows = tiles.prefill_rows_per_seq(tokens, x.prefill_ctx)
    heads, tile = shape.heads_per_rank, c.dsa_prefill[1]
    if tile:
        heads = -(-heads // tile) * tile
    entries = attended_entries(att, x.prefill_ctx)
    flops = 2 * heads * shape.score_dim_decode * entries * tokens
    whole = x.prefill_ctx + rows / 2  # a sequence's whole KV (the last row's prefix)
    nbytes = tokens / rows * whole * att.kv_read_elems_per_token * c.kv_elem_bytes / shape.kv_shard
    nbytes += tokens * shape.q_o_bytes
    # on FP8 MMA (Context.dsa_fp8_sparse_speed) the speed divides the op's memory term too: the op reads ~2,000
    # FLOPs a byte at 64 heads (8192-token prompts, top-k 2048), far above a B200's ~280 at BF16, so it is moot
    speed = c.attention_speed * c.dsa_fp8_sparse_speed
    ops.append(Op("attention", "bf16", "prefill", tokens, 0.0, 0.0, flops, nbytes, tiles.PREFILL_LAUNCHES,
                  "kernels.attention (DSA sparse prefill)", speed))  # fmt: skip


# The indexer's logits are fp32: the MQA-logits kernel writes one per (query row, scored entry) and the row top-k
# reads them back (vLLM's indexer_logits_dtype default float32: model_executor/layers/sparse_attn_indexer.py:1323-1325,
# as_fp32_logits :372, top_k_per_row_prefill :971; SGLang's fallback allocates them fp32 too,
# srt/layers/attention/dsa/utils.py:477-480); the top-k writes int32 indices (topk_indices_buffer)
INDEXER_LOGIT_BYTES = 4.0
INDEXER_INDEX_BYTES = 4.0


def indexer_ops(ops: list, c: Context, att: AttentionSpec, queries: float, scored: float, rows: float,
                keys: float) -> None:  # fmt: skip
    """A layer's lightning indexer (att.index_heads: the layer runs one), two kernels after its projections: the MQA
    logits, each of the rank's `queries` rows scoring `scored` entries (layers.indexer_scored) on ALL the index heads
    (the indexer is ReplicatedLinear, whole on every attention-TP rank and its DP ranks alike: vLLM
    model_executor/models/deepseek_v2.py:698-703, models/deepseek_v4/attention.py:920-954,
    models/deepseek_v41/attention.py:1422-1450; SGLang srt/layers/attention/dsa/dsa_indexer.py:301, :344-372), then
    the row top-k over the fp32 logits. Bytes: `keys` index keys read (each sequence's once, in the FP8 + scale layout:
    precision.INDEX_KEY_BYTES_PER_ELEM), the FP8 queries and fp32 head weights, the logits written; the top-k reads
    them back and writes its indices. Rate: the logits are a GEMM of M = `rows` (a sequence's query rows) x index
    heads against its keys, K = index_dim: the GEMM rate of that M in Context.dsa_indexer_dtype (FP8 where the engine
    runs DeepGEMM's FP8 MQA logits, engine profile dsa_indexer_fp8_archs). That the kernel reaches a GEMM's fraction
    of the peak at K = 128 is a prior (tests/bench/calibration_check.py dsaidx36_rows checks its memory-bound decode
    on a B200; no public timing of the sm_120 kernel). One op of two launches (a second op and its term in every
    step's attention half cost V4.1's prediction ~2.7% more instructions): the top-k's bytes join its memory term and,
    at the op's FLOP/s-to-B/s ratio, its FLOPs, so that its time is the logits kernel's max(compute, memory) plus the
    top-k's memory time, the two kernels' sum, at either bound."""
    heads, dim, dtype = att.index_heads, att.index_dim, c.dsa_indexer_dtype
    logits = queries * scored * INDEXER_LOGIT_BYTES
    topk = logits + queries * att.attended_cap * INDEXER_INDEX_BYTES
    nbytes = keys * dim * precision.INDEX_KEY_BYTES_PER_ELEM + queries * heads * (dim + 4.0) + logits + topk
    m = rows * heads
    key = ("gemm", dtype, rates.m_bucket(m))
    flops_per_s, bytes_per_s, _, _ = c.rate_terms.get(key) or _rate_terms(c, key)  # the costing's own rates
    flops = 2 * heads * dim * scored * queries + topk * flops_per_s / bytes_per_s
    ops.append(_op_new(Op, (*key, m, 0.0, 0.0, flops, nbytes, 2.0, "dsa indexer", 1.0, ())))
