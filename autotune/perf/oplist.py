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

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from autotune.perf import comm, linear_attention, mla, precision, rates, tiles
from autotune.perf import efficiency as eff
from autotune.specs import (
    DTYPE_BYTES,
    AttentionSpec,
    FfnSpec,
    HardwareProfile,
    LayerSpec,
    ModelSpec,
    PhasePlan,
)

PERMUTE_BYTES = 2  # bf16 rows moved by MoE permute / unpermute


@dataclass(frozen=True)
class StepInput:
    decode_seqs: float = 0.0
    decode_ctx: float = 0.0
    prefill_tokens: float = 0.0
    prefill_ctx: float = 0.0
    decode_width: float = 1.0  # tokens each decode sequence runs per step (step_cost sets 1 + draft tokens)


class Op(NamedTuple):
    """One operation (one or `count` kernels of the same shape) on the busiest GPU. Immutable (a NamedTuple: a
    step builds tens of them, and frozen dataclasses cost several times more to construct)."""

    kind: str  # gemm | grouped_moe | attention | norm | elementwise | quant | sampling | collective
    dtype: str  # compute dtype (collectives: "")
    bucket: str  # rates-table shape bucket: m<=16 ... / decode | prefill / any; collectives: the collective
    m: float  # rows (tokens; tokens per expert for grouped_moe); 0 when shapeless
    n: float  # output width per rank (GEMMs), 0 otherwise
    k: float  # reduction width (GEMMs), 0 otherwise
    flops: float
    nbytes: float  # bytes read + written (collectives: the message)
    count: float = 1.0  # kernels launched, each at least the rate's minimum latency
    source: str = ""  # the plan field or model part that produced it
    speed: float = 1.0  # kernel-variant speed (kernels.attention / moe / linear)
    group: tuple[int, ...] = ()  # collectives: the GPUs


def _gemm(source: str, dtype: str, m: float, weights: float, k: int, flops: float, nbytes: float, count=1.0, speed=1.0):
    return Op("gemm", dtype, rates.m_bucket(m), m, weights / k if k else 0.0, k, flops, nbytes, count, source, speed)


def _collective(name: str, group: tuple[int, ...], nbytes: float, source: str) -> Op:
    return Op("collective", "", name, 0.0, 0.0, 0.0, 0.0, nbytes, 1.0, source, 1.0, group)


def _quant(rows: float, k: float, count: float, source: str, out_bytes: float = 1.0) -> Op:
    """Activation quantisation in front of `count` FP8 (or NVFP4) GEMMs of reduction width `k`: reads the bf16
    rows, writes `out_bytes` per element (precision.act_quant_bytes) and one fp32 scale per row (vLLM
    scaled_fp8_quant / per_token_group_quant_fp8 / scaled_fp4_quant, SGLang sgl_per_token_quant_fp8: one kernel
    per GEMM input)."""
    nbytes = count * rows * (k * (precision.ACTIVATION_BYTES + out_bytes) + 4.0)
    return Op("quant", "bf16", "any", rows, 0.0, k, 0.0, nbytes, count, source)


def _tile_speed(sms: int, dtype: str, m: float, n: float) -> float:
    """Wave-quantisation speed of an m x n GEMM output (tiles.gemm_tile_efficiency) for the narrow dtypes, whose
    CUTLASS kernels take a fixed tile per M range (vLLM cutlass_scaled_mm dispatch); 1 for bf16 (cuBLAS picks the
    tile and split-K per shape) and for small-m GEMMs, which stream their weights and are memory bound."""
    if dtype == "bf16" or m <= rates.M_BUCKETS[1][0]:
        return 1.0
    return tiles.gemm_tile_efficiency(m, n, sms)


def _act_bytes(rows: float, n: float, k: float, count: float, in_bytes: float) -> float:
    """Activation traffic of `count` GEMMs of `rows` rows: each reads its k-wide input, all write n outputs."""
    return rows * (count * k * in_bytes + n * precision.ACTIVATION_BYTES)


@dataclass(frozen=True)
class Context:
    """What the op builders and the costing pass share for every step of one phase: the plan's choices resolved
    once (dtypes, kernel speeds, byte sizes, NCCL environment) so that a step costs arithmetic only."""

    model: ModelSpec
    phase: PhasePlan
    engine: str
    hw: HardwareProfile
    stage: tuple[int, ...]
    table: rates.RatesTable
    dense_dtype: str  # compute dtype of attention / dense / shared / head-less GEMMs
    expert_dtype: str  # compute dtype of routed experts
    dense_speed: float  # kernels.linear on FP8 dense GEMMs
    moe_speed: float  # kernels.moe, or the engine's auto pick
    attention_speed: float  # kernels.attention
    ipc_max: float  # PCIe-IPC all-reduce size limit
    kv_elem_bytes: float  # bytes of one stored KV element (precision.kv_bytes_per_elem: a sum over layers)
    dense_bytes: float = 2.0  # bytes of one stored attention / dense weight (precision.dense_dtype)
    expert_bytes: float = 2.0  # bytes of one stored routed-expert weight (precision.expert_dtype)
    imbalance: float = 1.0  # routed rows on the busiest rank over the mean (EP imbalance, EPLB)
    nccl: comm.NcclEnv = comm.NCCL_DEFAULTS  # the phase's NCCL_* environment, parsed
    allreduce_memo: dict = field(default_factory=dict, compare=False)  # (group, bytes) -> (name, seconds): ops.py
    comm_fns: dict = field(default_factory=dict, compare=False)  # (collective, group) -> seconds(bytes): ops.py
    ffn_memo: dict = field(default_factory=dict, compare=False)  # (FfnSpec, tokens) -> costed FFN half (ops.py)
    attention_shapes: dict = field(default_factory=dict, compare=False)  # id(spec) -> (spec, _attention_shape)
    rate_terms: dict = field(default_factory=dict, compare=False)  # rates-table key -> (FLOP/s, B/s, s): ops.py
    sms: int = tiles.SMS_DEFAULT  # streaming multiprocessors of the GPU (tiles.sm_count): waves of CTAs
    act_in_bytes: float = 2.0  # bytes of one GEMM input element (1 after FP8 activation quantisation)
    dense_quant_bytes: float = 0.0  # bytes per element dense GEMM inputs are quantised to (0: not quantised)
    expert_quant_bytes: float = 0.0  # the same for the routed experts' grouped GEMMs


def context(model: ModelSpec, phase: PhasePlan, engine: str, hw: HardwareProfile, stage: tuple[int, ...]) -> Context:
    dense_dtype = precision.compute_dtype(model, phase, hw, "dense")
    expert_dtype = precision.compute_dtype(model, phase, hw, "expert")
    moe = phase.kernels.moe
    if moe == "auto" and model.is_moe:
        deepep = phase.comm.all2all == "deepep" and phase.ep > 1
        moe = eff.auto_moe_kernel(engine, expert_dtype, hw.gpu.arch, deepep, phase.ep, model.expert_format)
    imbalance = 1.0
    if phase.ep > 1:
        excess = eff.EP_IMBALANCE - 1.0
        imbalance += excess * eff.EPLB_RESIDUAL_IMBALANCE if phase.eplb else excess
    return Context(
        model,
        phase,
        engine,
        hw,
        stage,
        rates.rates_table(hw),
        dense_dtype,
        expert_dtype,
        _narrow_speed(hw, dense_dtype, model.hidden_size)
        * (eff.LINEAR_VARIANT_SPEED.get(phase.kernels.linear, 1.0) if dense_dtype == "fp8" else 1.0),
        eff.MOE_VARIANT_SPEED.get(moe, 1.0) * _narrow_speed(hw, expert_dtype, model.hidden_size),
        eff.ATTENTION_VARIANT_SPEED.get(
            eff.auto_attention_kernel(engine, model, hw.gpu.arch, phase.kernels.attention), 1.0
        ),
        comm.pcie_ipc_max_bytes(phase, model.hidden_size * precision.ACTIVATION_BYTES),
        precision.kv_bytes_per_elem(model, phase),
        DTYPE_BYTES[precision.dense_dtype(model, phase)],
        DTYPE_BYTES[precision.expert_dtype(model, phase)],
        imbalance,
        comm.nccl_env(phase.comm),
        sms=tiles.sm_count(hw.gpu.name, hw.gpu.arch),
        act_in_bytes=precision.act_quant_bytes(dense_dtype, model.dense_format) or float(precision.ACTIVATION_BYTES),
        dense_quant_bytes=precision.act_quant_bytes(dense_dtype, model.dense_format),
        expert_quant_bytes=precision.act_quant_bytes(expert_dtype, model.expert_format),
    )


def _narrow_speed(hw: HardwareProfile, dtype: str, k: float) -> float:
    """rates.narrow_k_speed for FP8 / FP4 GEMMs of reduction width `k` (the hidden size), 1 for wider dtypes."""
    return rates.narrow_k_speed(hw.gpu.arch, k) if dtype in ("fp8", "fp4") else 1.0


def attended_entries(att: AttentionSpec, ctx: float) -> float:
    """KV entries one query reads at context length `ctx` (compressed, sparse and windowed attention)."""
    window = min(ctx, att.window) if att.window else 0.0
    if att.window_only:
        return window
    entries = ctx / att.compress_ratio
    if att.attended_cap:
        entries = min(entries, att.attended_cap)
    return entries + window


def indexer_scored(att: AttentionSpec, ctx: float) -> float:
    """Compressed entries the layer's sparse-attention indexer scores for one query (0 without an indexer)."""
    if not att.index_heads:
        return 0.0
    scored = ctx / att.compress_ratio / att.index_pool
    return min(scored, att.index_scored_cap) if att.index_scored_cap else scored


_GROUPS: dict[int, tuple[ModelSpec, tuple[tuple[LayerSpec, int], ...]]] = {}  # id(model) -> (model, groups)


def layer_groups(model: ModelSpec) -> tuple[tuple[LayerSpec, int], ...]:
    """Identical layers collapsed with their count, so a step costs O(distinct layer kinds). Memoised per
    model object (a predict() costs every step of one model: hashing its layers each step was a quarter of it)."""
    hit = _GROUPS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    counts: Counter = Counter()
    reps: dict = {}
    for layer in model.layers:
        key = (layer.attention, layer.ffn, layer.in_prefill)
        counts[key] += 1
        reps.setdefault(key, layer)
    groups = tuple((reps[key], n) for key, n in counts.items())
    if len(_GROUPS) >= 64:
        _GROUPS.clear()
    _GROUPS[id(model)] = (model, groups)
    return groups


def distinct_experts(num_experts: int, top_k: int, tokens: float, skew: float | None = None) -> float:
    """Expected number of experts hit when `tokens` tokens each route to top-k of E experts, the experts' routing
    popularity falling as rank^-skew (eff.ROUTING_SKEW; 0 = uniform): popular experts are hit by many of the
    tokens, so a batch hits fewer distinct experts than uniform routing would (exactly top-k for one token)."""
    if tokens <= 0:
        return 0.0
    weights = _popularity(num_experts, eff.ROUTING_SKEW if skew is None else skew)
    per_group = num_experts / len(weights)
    return sum(per_group * (1.0 - max(0.0, 1.0 - top_k * w / num_experts) ** tokens) for w in weights)


@lru_cache(maxsize=256)
def _popularity(num_experts: int, skew: float) -> tuple[float, ...]:
    """Mean routing probability of each of ROUTING_GROUPS equal groups of experts (ranked by popularity, mean 1)."""
    groups = min(eff.ROUTING_GROUPS, num_experts) if skew else 1
    p = [(i + 1) ** -skew for i in range(num_experts)]
    mean = sum(p) / num_experts
    size = num_experts / groups
    return tuple(
        sum(p[int(g * size) : int((g + 1) * size)]) / (int((g + 1) * size) - int(g * size)) / mean
        for g in range(groups)
    )


def ep_imbalance(c: Context, top_k: int, tokens: float) -> float:
    """Routed rows on the busiest expert-parallel rank over the mean at `tokens` tokens: the popularity skew the
    placement leaves (Context.imbalance: EP_IMBALANCE, mostly removed by EPLB) plus the sampling spread of a
    small batch, max over ep ranks of a Poisson count ~ mean + sqrt(2 ln(ep) x mean); never above all the
    routed rows on one rank."""
    ep = c.phase.ep
    if ep <= 1:
        return 1.0
    mean_rows = tokens * top_k / ep
    if mean_rows <= 0:
        return c.imbalance
    return min(float(ep), c.imbalance + math.sqrt(2.0 * math.log(ep) / mean_rows))


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


def dense_layout(ffn: FfnSpec, phase: PhasePlan, engine: str) -> str:
    """How a dense MLP layer spreads over the instance's tp*dp ranks: 'tp' = tensor-parallel over the attention
    TP group and all-reduced (vLLM's DP ranks are separate engines); 'all' = SGLang under DP attention by
    default: sharded over all tp*dp ranks, its tokens all-gathered to every rank and reduce-scattered back;
    'dp' = SGLang --moe-dense-tp-size 1: whole on every rank, on the rank's own tokens, no collective."""
    if ffn.kind != "dense" or phase.dp == 1:
        return "tp"
    if phase.dense_dp:
        return "dp"
    return "all" if engine == "sglang" else "tp"


def dense_shards(ffn: FfnSpec, phase: PhasePlan, engine: str) -> int:
    """Ranks a dense MLP layer's weights are split over (see dense_layout)."""
    layout = dense_layout(ffn, phase, engine)
    return phase.tp if layout == "tp" else 1 if layout == "dp" else phase.tp * phase.dp


def head_over_dp(engine: str, phase: PhasePlan) -> bool:
    """SGLang under DP attention without --enable-dp-lm-head: the LM head is vocab-parallel over all tp*dp
    ranks (vLLM's DP ranks are separate engines, each with its own head over its TP group)."""
    return engine == "sglang" and phase.dp > 1 and not phase.dp_lm_head


class _AttentionShape(NamedTuple):
    """The step-independent parts of a layer kind's attention ops under one Context (_attention_shape)."""

    split_n: float  # output width per rank of the TP-split projections
    split_flops: float  # 2 x the TP-split projection parameters (flops per row, before / tp)
    split_bytes: float  # their weight bytes per rank
    split_count: int  # their kernels
    rep: int  # replicated projection parameters (MLA q_a / kv_a, indexer, compressor)
    rep_n: float
    rep_bytes: float
    heads_per_rank: float
    index_heads_per_rank: float
    kv_shard: int  # ranks a prefill row's KV is split over
    decode_shard: int  # ranks a decode sequence's KV is split over (dcp for latent KV)
    score_dim_decode: int
    quant_count: float  # FP8 activation-quant kernels in front of the projections (0 unless FP8)
    quant_row_bytes: float  # their bytes per row
    q_o_bytes: float  # bytes of one query row's Q read and O write in the attention kernel (all heads of the rank)
    kv_heads_per_rank: float  # KV heads of a rank (at least one: TP beyond the KV heads replicates them)
    q_per_kv: float  # query heads per KV head on a rank
    cache_row_bytes: float  # bytes the KV-cache write moves per new token (reads the new K/V, writes the cache)


def _attention_shape(c: Context, att: AttentionSpec) -> _AttentionShape:
    """The parts of _attention_ops that depend on the Context and the layer kind only, computed once per
    (Context, attention spec): remembered by the spec's id, which the Context's model keeps alive."""
    hit = c.attention_shapes.get(id(att))
    if hit is not None and hit[0] is att:
        return hit[1]
    phase, hidden = c.phase, c.model.hidden_size
    tp = phase.tp
    w_bytes = c.dense_bytes
    split = att.params - att.replicated_params
    rep = att.replicated_params
    kv_shard = 1 if att.latent_shared else min(tp, att.num_kv_heads)
    quants = precision.standalone_quants(c.dense_dtype, c.model.dense_format, 2)
    shape = _AttentionShape(
        split_n=split / tp / hidden if hidden else 0.0,
        split_flops=2 * split,
        split_bytes=split * w_bytes / tp,
        split_count=3 if rep else 2,
        rep=rep,
        rep_n=rep / hidden if hidden else 0.0,
        rep_bytes=rep * w_bytes,
        heads_per_rank=att.num_heads / tp,
        index_heads_per_rank=att.index_heads / tp,
        kv_shard=kv_shard,
        decode_shard=kv_shard * (phase.dcp if att.latent_shared else 1),
        score_dim_decode=att.score_dim_decode or att.score_dim,
        quant_count=float(quants) if c.dense_quant_bytes else 0.0,  # q/kv (or q_a+kv_a) input, o_proj input
        quant_row_bytes=quants * (hidden * (precision.ACTIVATION_BYTES + c.dense_quant_bytes) + 4.0)
        if c.dense_quant_bytes
        else 0.0,
        q_o_bytes=att.num_heads / tp * (att.score_dim_decode or att.score_dim) * precision.ACTIVATION_BYTES,
        kv_heads_per_rank=max(1.0, att.num_kv_heads / tp),
        q_per_kv=att.num_heads / tp / max(1.0, att.num_kv_heads / tp),
        cache_row_bytes=att.kv_elems_per_token / kv_shard * (precision.ACTIVATION_BYTES + c.kv_elem_bytes),
    )
    c.attention_shapes[id(att)] = (att, shape)
    return shape


def _attention_ops(ops: list, c: Context, att: AttentionSpec, x: StepInput, tokens: float) -> None:
    """Projections (split over TP, but MLA's q_a / kv_a replicated: `replicated_params`), then the attention
    kernels: decode rows and prefill rows are separate kernels (decode reads each sequence's KV once).
    The step-independent parts come from _attention_shape."""
    shape = _attention_shape(c, att)
    phase, hidden = c.phase, c.model.hidden_size
    tp, dp = phase.tp, phase.dp
    dense_dtype, dense_speed = c.dense_dtype, c.dense_speed
    rows = tokens / dp  # each rank of a DP group holds its own requests
    bucket = rates.m_bucket(rows)
    split_flops = shape.split_flops * rows / tp
    split_bytes = shape.split_bytes + _act_bytes(rows, shape.split_n, hidden, shape.split_count, c.act_in_bytes)
    split_speed = dense_speed * _tile_speed(c.sms, dense_dtype, rows, shape.split_n / shape.split_count)
    ops.append(
        Op("gemm", dense_dtype, bucket, rows, shape.split_n, hidden, split_flops, split_bytes,
           shape.split_count, "tp", split_speed)
    )  # fmt: skip
    if shape.quant_count:  # the projections' inputs (hidden rows; o_proj's per-rank width is taken as hidden), _quant
        ops.append(
            Op("quant", "bf16", "any", rows, 0.0, hidden, 0.0, rows * shape.quant_row_bytes, shape.quant_count,
               "kernels.gemm_dtype")
        )  # fmt: skip
    if shape.rep:  # every TP rank runs the whole down-projection on all its group's rows
        rep_flops = 2 * shape.rep * rows
        rep_bytes = shape.rep_bytes + _act_bytes(rows, shape.rep_n, hidden, 1.0, c.act_in_bytes)
        ops.append(
            Op("gemm", dense_dtype, bucket, rows, shape.rep_n, hidden, rep_flops, rep_bytes, 1,
               "tp (replicated q_a/kv_a)", dense_speed * _tile_speed(c.sms, dense_dtype, rows, shape.rep_n))
        )  # fmt: skip
    if mla.is_absorbed_mla(att):  # the module's norms, RoPE and absorbed kv_b launches (perf/mla.py)
        _mla_module_ops(ops, att, rows, shape, bool(x.decode_seqs))
    if shape.cache_row_bytes:  # the new tokens' K/V written to the paged cache, its own kernel in both engines
        ops.append(Op("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, rows * shape.cache_row_bytes, 1.0,
                      "kv cache write"))  # fmt: skip
    heads_per_rank = shape.heads_per_rank
    index_heads_per_rank = shape.index_heads_per_rank
    kv_elem_bytes = c.kv_elem_bytes
    if x.decode_seqs:
        seqs = x.decode_seqs / dp
        queries = seqs * x.decode_width  # verified tokens attend the same KV as their sequence
        # decode context parallel: each of the dcp ranks holds and reads 1/dcp of every sequence's latent KV
        # and runs all its group's heads over it (the heads' partial outputs are combined: a dcp all-gather)
        entries, scored = attended_entries(att, x.decode_ctx), indexer_scored(att, x.decode_ctx)
        flops = 2 * heads_per_rank * shape.score_dim_decode * entries * queries
        flops += 2 * index_heads_per_rank * att.index_dim * scored * queries
        per_seq = (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes
        nbytes = per_seq / shape.decode_shard * seqs + queries * shape.q_o_bytes
        ops.append(
            Op("attention", "bf16", "decode", queries, 0.0, 0.0, flops, nbytes, 1.0, "kernels.attention",
               c.attention_speed)
        )  # fmt: skip
        if not att.latent_shared:  # one CTA per (sequence, KV head) once the batch fills the SMs (tiles.py)
            ctas = tiles.attention_ctas(seqs, x.decode_width, shape.kv_heads_per_rank, shape.q_per_kv)
            _attention_waves(ops, c, ctas)
    if x.prefill_tokens:
        tokens_per_rank = x.prefill_tokens / dp
        entries, scored = attended_entries(att, x.prefill_ctx), indexer_scored(att, x.prefill_ctx)
        # the causal mask's diagonal blocks are computed whole: half a KV block more per query (tiles.py)
        computed = entries + tiles.causal_diagonal_entries(entries) if att.compress_ratio == 1 else entries
        flops = 2 * heads_per_rank * att.score_dim * computed * tokens_per_rank
        flops += 2 * index_heads_per_rank * att.index_dim * scored * tokens_per_rank
        nbytes = (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes / shape.kv_shard
        nbytes += tokens_per_rank * shape.q_o_bytes
        ops.append(
            Op("attention", "bf16", "prefill", tokens_per_rank, 0.0, 0.0, flops, nbytes, 1.0, "kernels.attention",
               c.attention_speed)
        )  # fmt: skip
        if not att.latent_shared:  # one CTA per (sequence, KV head, 128-row block of packed query rows)
            rows = tiles.prefill_rows_per_seq(tokens_per_rank, x.prefill_ctx)
            ctas = tiles.attention_ctas(tokens_per_rank / rows, rows, shape.kv_heads_per_rank, shape.q_per_kv)
            _attention_waves(ops, c, ctas)


def _mla_module_ops(ops: list, att: AttentionSpec, rows: float, shape: _AttentionShape, decode: bool) -> None:
    """The absorbed-MLA module's kernels besides its projections and attention (mla.module_kernels)."""
    k = mla.module_kernels(att, rows, shape.heads_per_rank, shape.rep_n, decode, precision.ACTIVATION_BYTES)
    ops.append(Op("norm", "bf16", "any", rows, 0.0, 0.0, 0.0, k.norm_bytes, k.norm_kernels, "mla q_a/kv_a norms"))
    ops.append(Op("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, k.rope_bytes, k.rope_kernels, "mla rope"))
    if k.extra_gemms:  # launches only: the absorbed kv_b's FLOPs and weights are in the projection op
        ops.append(Op("gemm", "bf16", rates.m_bucket(rows), rows, 0.0, 0.0, 0.0, 0.0, k.extra_gemms, "mla absorb"))


def _attention_waves(ops: list, c: Context, ctas: float) -> None:
    """The fixed time of the attention kernel's waves of CTAs (tiles.attention_waves): an op of no FLOPs or
    bytes whose count is the waves, each at the rates table's per-wave latency (`attention/bf16/wave`)."""
    waves = tiles.attention_waves(ctas, c.sms)
    if waves:
        ops.append(Op("attention", "bf16", "wave", ctas, 0.0, 0.0, 0.0, 0.0, waves, "kernels.attention (CTA waves)"))


def _ffn_ops(ops: list, c: Context, ffn: FfnSpec, tokens: float) -> None:
    """Dense FFN or shared experts (a GEMM pair), then routed experts: one grouped GEMM op whose rows per expert
    come from the routing (tokens x top_k / experts), the weights of the distinct experts the batch hits, and the
    permute / unpermute of the routed rows (tokens x top_k x hidden x 2 B, each way)."""
    phase, hidden = c.phase, c.model.hidden_size
    ranks = phase.tp * phase.dp
    w_bytes = c.dense_bytes
    if ffn.params:  # dense FFN, or the shared experts of a MoE layer
        layout = dense_layout(ffn, phase, c.engine)
        shards = phase.tp if layout == "tp" else 1 if layout == "dp" else ranks
        rows = tokens if layout == "all" else tokens / phase.dp  # 'all' gathers every token to every rank
        ops.append(
            _gemm(
                "dense_dp" if layout == "dp" else "tp",
                c.dense_dtype,
                rows,
                ffn.params / shards,
                hidden,
                2 * ffn.params * tokens / ranks,
                ffn.params * w_bytes / shards
                + _act_bytes(rows, ffn.params / shards / hidden, hidden, 2, c.act_in_bytes),
                2,
                c.dense_speed * _tile_speed(c.sms, c.dense_dtype, rows, ffn.params / shards / hidden / 2),
            )
        )
        if c.dense_quant_bytes:  # gate_up's and down's inputs (precision.standalone_quants)
            quants = precision.standalone_quants(c.dense_dtype, c.model.dense_format, 2)
            ops.append(_quant(rows, hidden, quants, "kernels.gemm_dtype", c.dense_quant_bytes))
    if ffn.kind != "moe":
        return
    e_bytes, imbalance = c.expert_bytes, ep_imbalance(c, ffn.experts_per_token, tokens)
    routed = tokens * ffn.experts_per_token / ranks * imbalance  # routed rows the busiest rank computes
    per_expert = tokens * ffn.experts_per_token / ffn.num_experts * imbalance
    hit = distinct_experts(ffn.num_experts, ffn.experts_per_token, tokens)
    ops.append(
        Op(
            "grouped_moe",
            c.expert_dtype,
            rates.m_bucket(per_expert),
            per_expert,
            ffn.expert_params / hidden,
            hidden,
            2 * ffn.expert_params * routed,
            hit * ffn.expert_params * e_bytes / ranks * imbalance,
            1.0,
            "kernels.moe / ep / eplb",
            c.moe_speed,
        )
    )
    if c.expert_quant_bytes:  # routed rows quantised in front of the two grouped GEMMs
        quants = precision.standalone_quants(c.expert_dtype, c.model.expert_format, 2)
        ops.append(_quant(routed, hidden, quants, "kernels.moe", c.expert_quant_bytes))
    permute = 2 * 2 * routed * hidden * PERMUTE_BYTES  # permute + unpermute, each a read and a write
    ops.append(Op("elementwise", "bf16", "any", routed, 0.0, 0.0, 0.0, permute, 2.0, "moe permute"))


def _comm_ops(ops: list, c: Context, ffn: FfnSpec, tokens: float, dense: str) -> None:
    phase, stage = c.phase, c.stage
    tp, dp = phase.tp, phase.dp
    tp_group = stage[:tp]
    row_bytes = c.model.hidden_size * precision.ACTIVATION_BYTES
    ops.append(_collective("allreduce", tp_group, tokens / dp * row_bytes, "tp"))
    if ffn.kind != "moe" or len(stage) == 1:
        if dense == "tp":
            ops.append(_collective("allreduce", tp_group, tokens / dp * row_bytes, "tp"))
        elif dense == "all":  # dense MLP sharded over every rank (dense_layout); "dp" has nothing to reduce
            ops.append(_collective("allgather", stage, tokens * row_bytes, "dp"))
            ops.append(_collective("reducescatter", stage, tokens * row_bytes, "dp"))
        return
    if phase.comm.all2all == "deepep" and phase.ep > 1:
        per_rank = tokens / len(stage) * ffn.experts_per_token * c.model.hidden_size
        ops.append(_collective("all2all", stage, per_rank * DTYPE_BYTES["fp8"], "comm.all2all"))  # fp8 dispatch
        ops.append(_collective("all2all", stage, per_rank * precision.ACTIVATION_BYTES, "comm.all2all"))  # combine
    elif dp > 1:  # gather every token to every rank of the MoE group, reduce-scatter the outputs back
        ops.append(_collective("allgather", stage, tokens * row_bytes, "dp"))
        ops.append(_collective("reducescatter", stage, tokens * row_bytes, "dp"))
    else:
        ops.append(_collective("allreduce", stage, tokens * row_bytes, "ep"))


def _fused_norms(ffn: FfnSpec, phase: PhasePlan, dense: str) -> int:
    """Norms folded into the all-reduce before them (fusion allreduce_rmsnorm, TP > 1): the one after the
    attention all-reduce, and the one after the FFN's when its output is all-reduced (see _comm_ops)."""
    if phase.tp == 1 or not phase.fusion.get("allreduce_rmsnorm", False):
        return 0
    if ffn.kind != "moe":
        return 2 if dense == "tp" else 1
    deepep = phase.comm.all2all == "deepep" and phase.ep > 1
    return 2 if phase.dp == 1 and not deepep else 1


def layer_input(layer: LayerSpec, x: StepInput) -> StepInput:
    """The part of the step a layer runs: layers outside prefill (V4 CED) see only the decode rows."""
    return x if layer.in_prefill else StepInput(x.decode_seqs, x.decode_ctx, decode_width=x.decode_width)


def step_tokens(x: StepInput) -> float:
    return x.decode_seqs * x.decode_width + x.prefill_tokens


def attention_ops(c: Context, att: AttentionSpec, x: StepInput) -> list[Op]:
    """The attention half of a layer (projections and kernels) for the layer's own input (layer_input)."""
    ops: list[Op] = []
    tokens = step_tokens(x)
    if tokens > 0 and att.is_linear:  # projections as any attention layer, then the scan / recurrent kernels
        _attention_ops(ops, c, att, StepInput(decode_width=x.decode_width), tokens)
        ops += _linear_kernel_ops(c, att, x)
    elif tokens > 0:
        _attention_ops(ops, c, att, x, tokens)
    return ops


def _linear_kernel_ops(c: Context, att: AttentionSpec, x: StepInput) -> list[Op]:
    """Linear-attention kernels (perf/linear_attention.py): the recurrent step for the decode rows, the chunked
    scan for the prompt tokens; no KV is read, the per-request state is."""
    tp, dp, dtype = c.phase.tp, c.phase.dp, c.model.state_dtype
    ops = []
    if x.decode_seqs:
        seqs = x.decode_seqs / dp
        cost = linear_attention.decode_cost(att, seqs, x.decode_width, tp, dtype)
        ops.append(Op("attention", "bf16", "decode", seqs * x.decode_width, 0.0, 0.0, cost.flops, cost.nbytes,
                      1.0, f"linear attention ({att.kind})"))  # fmt: skip
    if x.prefill_tokens:
        tokens = x.prefill_tokens / dp
        cost = linear_attention.prefill_cost(att, tokens, tp, dtype)
        ops.append(Op("attention", "bf16", "prefill", tokens, 0.0, 0.0, cost.flops, cost.nbytes, 1.0,
                      f"linear attention ({att.kind})", linear_attention.SCAN_SPEED))  # fmt: skip
    return ops


def ffn_ops(c: Context, ffn: FfnSpec, tokens: float) -> list[Op]:
    """The FFN half of a layer and the layer's collectives and norms: a function of the FFN and the layer's
    token count only, so layers of different attention share it."""
    ops: list[Op] = []
    if tokens <= 0:
        return ops
    phase = c.phase
    dense = dense_layout(ffn, phase, c.engine)
    _ffn_ops(ops, c, ffn, tokens)
    _comm_ops(ops, c, ffn, tokens, dense)
    # residual add + RMSNorm kernels (each fused with its residual add in vLLM/SGLang): bf16 reads of the residual
    # and the input, writes of both; the ones fused into an all-reduce (fusion.allreduce_rmsnorm) are gone
    kernels = eff.NORMS_PER_LAYER - _fused_norms(ffn, phase, dense)
    rows = tokens / phase.dp
    if kernels > 0:
        nbytes = kernels * 4 * rows * c.model.hidden_size * precision.ACTIVATION_BYTES
        ops.append(Op("norm", "bf16", "any", rows, 0.0, 0.0, 0.0, nbytes, float(kernels), "fusion"))
    return ops


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


def head_ops(c: Context, rows: float) -> list[Op]:
    """LM head (bf16) on `rows` sampled positions of the instance, vocab-parallel over the attention TP group,
    or over all tp*dp ranks (head_over_dp): then every rank computes every DP rank's rows against its vocab
    slice, after an all-gather of the sampled hidden rows, and the logits are all-gathered back; then sampling.
    Runs once per step (on the last pipeline stage): callers scale it by 1/pp like the per-stage layers."""
    model, phase = c.model, c.phase
    head_params = model.vocab_size * model.hidden_size
    ranks = phase.tp * phase.dp
    over_dp = head_over_dp(c.engine, phase)
    shards = ranks if over_dp else phase.tp
    m = rows / (1 if over_dp else phase.dp)
    ops = [
        _gemm(
            "dp_lm_head" if phase.dp > 1 else "tp",
            "bf16",
            m,
            head_params / shards,
            model.hidden_size,
            2 * head_params * rows / ranks,
            head_params * DTYPE_BYTES["bf16"] / shards
            + _act_bytes(m, model.vocab_size / shards, model.hidden_size, 1.0, precision.ACTIVATION_BYTES),
            1.0,
            _tile_speed(c.sms, "bf16", m, model.vocab_size / shards),
        )
    ]
    if over_dp and rows:
        act = precision.ACTIVATION_BYTES
        ops.append(_collective("allgather", c.stage, rows * model.hidden_size * act, "dp_lm_head"))
        ops.append(_collective("allgather", c.stage, rows * model.vocab_size * act, "dp_lm_head"))
    if rows:  # top-k / top-p sampling over the rank's logits (fp32 reads)
        ops.append(Op("sampling", "bf16", "any", m, 0.0, 0.0, 0.0, m * model.vocab_size / phase.tp * 4, 1.0, "engine"))
    return ops


def linear_ops(c: Context, m: float, n: int, k: int, source: str) -> list[Op]:
    """One dense linear layer (m rows, n x k weights on this rank, in the Context's dense dtype) as the op list
    builds it: the GEMM streaming its weights, after its input's FP8 quantisation. Used by the per-op check
    (tests/bench/op_check.py)."""
    dtype = c.dense_dtype
    speed = c.dense_speed * _narrow_speed(c.hw, dtype, k) / _narrow_speed(c.hw, dtype, c.model.hidden_size)
    speed *= _tile_speed(c.sms, dtype, m, n)
    nbytes = n * k * c.dense_bytes + _act_bytes(m, n, k, 1.0, c.act_in_bytes)
    ops = [_gemm(source, dtype, m, n * k, k, 2.0 * m * n * k, nbytes, 1.0, speed)]
    return ops + ([_quant(m, k, 1.0, source, c.dense_quant_bytes)] if c.dense_quant_bytes else [])
