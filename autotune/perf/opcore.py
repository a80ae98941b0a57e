"""The op list's vocabulary: a step's input (StepInput), one costed operation (Op) and its builders (GEMM,
collective, activation quantisation), and a phase's choices resolved once (Context). perf/oplist.py builds a
layer's ops from them; perf/ops.py costs them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from autotune.capability import allreduce_rmsnorm_max_tokens, kv_cache_dtype_on
from autotune.capability.profiles import profile
from autotune.perf import attention_choice, comm, ep_balance, fractions, precision, rates, sharding, tiles
from autotune.perf import efficiency as eff
from autotune.perf.attention_choice import decode_split_cap, mla_absorbed_prefill_rows, mla_query_concat
from autotune.perf.layers import dsa_top_k
from autotune.specs import (
    AttentionSpec,
    HardwareProfile,
    ModelSpec,
    PhasePlan,
)


class StepInput(NamedTuple):
    """What one step runs: decoding sequences at their mean context, prompt tokens at theirs. Immutable (a
    NamedTuple: a V4.1 prediction builds ~14 of them, and a frozen dataclass's __init__, one object.__setattr__
    per field, takes ~0.9 us against the NamedTuple's ~0.33 us)."""

    decode_seqs: float = 0.0
    decode_ctx: float = 0.0
    prefill_tokens: float = 0.0
    prefill_ctx: float = 0.0
    decode_width: float = 1.0  # tokens each decode sequence runs per step (step_cost sets 1 + draft tokens)
    # prompt tokens on the busiest attention-DP rank (0: the even spread, prefill_tokens / dp): rank_prompt_tokens
    prefill_rank_tokens: float = 0.0
    # prompts whose tokens the step runs, per micro-batch (0: not counted): a Gated DeltaNet chain walks each prompt's
    # chunks in order (linear_attention.chain_walk_s); set by sim/step_cache.py and perf/serving.py
    prefill_seqs: float = 0.0


def rank_prompt_tokens(x: StepInput, dp: int) -> float:
    """The prompt tokens the busiest attention-DP rank runs in step `x`: a request lives on one DP rank in both
    engines (SGLang's controller sends it to one rank, round robin by default:
    srt/managers/data_parallel_controller.py:880-890, srt/arg_groups/serving_hook.py:222-234; vLLM's client picks
    one DP engine core per request: v1/engine/core_client.py:1829-1860), which prefills it alone while the other
    ranks run their own batch, or an idle one, in the same forward because the MoE layers gather every rank's
    tokens (SGLang srt/managers/scheduler_components/dp_attn.py:665-675; vLLM execute_dummy_batch,
    v1/engine/core.py:2780-2787). So the attention side of a step (the projections, norms and kernels on the rank's
    own tokens) costs the busiest rank's prompt tokens; the MoE side after the gather costs them all.
    x.prefill_rank_tokens where the caller placed the prompts (sim/engine.py, perf/serving.py), else the even
    spread."""
    return x.prefill_rank_tokens or x.prefill_tokens / dp


def attention_rows(x: StepInput, dp: int) -> float:
    """Rows the busiest attention-DP rank runs through its attention side: its even share of the decode rows and
    its prompts' tokens (rank_prompt_tokens)."""
    return x.decode_seqs * x.decode_width / dp + rank_prompt_tokens(x, dp)


class Op(NamedTuple):
    """One operation (one or `count` kernels of the same shape) on the busiest GPU. Immutable (a NamedTuple: a
    step builds tens of them, and frozen dataclasses cost several times more to construct)."""

    kind: str  # gemm | grouped_moe | attention | norm | elementwise | quant | sampling | collective
    dtype: str  # compute dtype (collectives: "")
    # rates-table shape bucket: m<=16 ... / decode | prefill / any (norm: also fused_add); collectives: the collective
    bucket: str
    m: float  # rows (tokens; tokens per expert for grouped_moe); 0 when shapeless
    n: float  # output width per rank (GEMMs), 0 otherwise
    k: float  # reduction width (GEMMs), 0 otherwise
    flops: float
    nbytes: float  # bytes read + written (collectives: the message)
    count: float = 1.0  # kernels launched, each at least the rate's minimum latency
    source: str = ""  # the plan field or model part that produced it
    speed: float = 1.0  # kernel-variant speed (kernels.attention / moe / linear)
    group: tuple[int, ...] = ()  # collectives: the GPUs


# Op's fields as one tuple, made without Op(...)'s generated __new__ (a Python frame before tuple.__new__): the
# builders below (_gemm, _collective, _quant, _gemm_waves, activation_op, rope_op) make most of a V4.1 prediction's
# Ops this way, ~0.23 us each against Op(...)'s ~0.43 us (timeit)
_op_new = tuple.__new__


def _gemm(source: str, dtype: str, m: float, weights: float, k: int, flops: float, nbytes: float, count=1.0, speed=1.0):
    n = weights / k if k else 0.0
    return _op_new(Op, ("gemm", dtype, rates.m_bucket(m), m, n, k, flops, nbytes, count, source, speed, ()))


# the collective name of an all-reduce whose following residual add + RMSNorm is fused into it (oplist.ffn_comm_ops;
# perf/comm_fused.py prices it)
FUSED_ALLREDUCE = "allreduce_norm"
# message sizes a residual add + RMSNorm kernel moves: it reads the residual and the input, writes both
# (oplist.ffn_norm_ops; costing.collective_s for the norm kernel a fused all-reduce leaves behind)
ADD_NORM_PASSES = 4


def _collective(name: str, group: tuple[int, ...], nbytes: float, source: str) -> Op:
    return _op_new(Op, ("collective", "", name, 0.0, 0.0, 0.0, 0.0, nbytes, 1.0, source, 1.0, group))


def _quant(rows: float, k: float, count: float, source: str, out_bytes: float = 1.0) -> Op:
    """Activation quantisation in front of `count` FP8 (or NVFP4) GEMMs of reduction width `k`: reads the bf16
    rows, writes `out_bytes` per element (precision.act_quant_bytes) and one fp32 scale per row (vLLM
    scaled_fp8_quant / per_token_group_quant_fp8 / scaled_fp4_quant, SGLang sgl_per_token_quant_fp8: one kernel
    per GEMM input)."""
    nbytes = count * rows * (k * (precision.ACTIVATION_BYTES + out_bytes) + 4.0)
    return _op_new(Op, ("quant", "bf16", "any", rows, 0.0, k, 0.0, nbytes, count, source, 1.0, ()))


_TILE_SPEEDS: dict = {}  # (id(rates table), dtype or 'kloop', m, n[, k]) -> (the table, speed), across plans
_TILE_SPEEDS_MAX = 4096


def _tile_speed(c: Context, dtype: str, m: float, n: float, k: float = 0.0) -> float:
    """Wave-quantisation speed of an m x n GEMM output for the narrow dtypes, whose CUTLASS kernels take a fixed
    tile per M range (vLLM cutlass_scaled_mm dispatch); 1 for bf16 (cuBLAS picks the tile and split-K per shape).
    On sm_120 the tiles vLLM's kernels take (tiles.sm120_narrow_tile), each a whole tile's K loop on one SM at
    the SM's share of the datasheet peak (tiles.tile_bound_speed), against the rates table's rate for the m
    bucket: a narrow GEMM of few rows or few columns runs on few SMs (remembered across plans: the search asks
    for the same shapes again). Elsewhere tiles.gemm_tile_efficiency (128 x 128 tiles) above 128 rows, 1 below:
    small-m GEMMs stream their weights and are memory bound; an FP8 GEMM of reduction width `k` where the engine
    runs CUTLASS's per-tile K loop (Context.fp8_kloop) is also bound by one CTA's K loop (_kloop_speed). The op
    list passes `k` where the op is one GEMM of that shape (linear_ops, MLA's fused q_a / kv_a down-projection);
    its paired projections (q/kv + o, gate_up + down) are costed at averaged shapes, k = hidden for both, which
    would give the output projection (short K, wide N) the input projection's long K loop: no `k`, no bound."""
    if dtype == "bf16":
        return 1.0
    table = c.table
    if table.arch == "sm_120":
        key = (id(table), dtype, m, n)
        hit = _TILE_SPEEDS.get(key)
        if hit is not None and hit[0] is table:
            return hit[1]
        tile = tiles.sm120_narrow_tile(dtype, m)
        if tile is not None:
            rate = table.entries.get(("gemm", dtype, rates.m_bucket(m)))
            peak = c.hw.gpu.peak_tflops.get(dtype, 0.0)
            speed = tiles.tile_bound_speed(m, n, tile, c.sms, rate.tflops, peak) if rate else 1.0
            if len(_TILE_SPEEDS) >= _TILE_SPEEDS_MAX:
                _TILE_SPEEDS.clear()
            _TILE_SPEEDS[key] = (table, speed)
            return speed
    speed = 1.0 if m <= rates.M_BUCKETS[1][0] else tiles.gemm_tile_efficiency(m, n, c.sms)
    if k > 0 and c.sms and ((dtype == "fp8" and c.fp8_kloop) or (dtype == "fp4" and c.fp4_kloop)):
        speed = min(speed, _kloop_speed(c, table, dtype, m, n, k))
    return speed


def _kloop_speed(c: Context, table: rates.RatesTable, dtype: str, m: float, n: float, k: float) -> float:
    """Speed bound of a narrow GEMM by one CTA's K loop: vLLM's per-tensor FP8 CUTLASS GEMM (sm_89 / sm_90 / sm_100,
    tiles.cutlass_fp8_tile) or its CuTe-DSL NVFP4 GEMM (sm_100, at least tiles.CUTE_DSL_FP4_MIN_TILE) runs one
    output tile's whole K loop (tiles.kloop_cta) on one SM, at that SM's share of the datasheet peak and receiving
    at most the arch's rates.gemm_cta_load_gbs; relative to the op's compute time at the rates table's rate and the
    dtype's K prior, which the op builders multiply in (the costing pass divides only a GEMM's compute term by its
    speed). Remembered across plans."""
    key = (id(table), "kloop", dtype, m, n, k)
    hit = _TILE_SPEEDS.get(key)
    if hit is not None and hit[0] is table:
        return hit[1]
    rate = table.entries.get(("gemm", dtype, rates.m_bucket(m)))
    peak = c.hw.gpu.peak_tflops.get(dtype, 0.0)
    if dtype == "fp4":
        tile, in_bytes = tiles.CUTE_DSL_FP4_MIN_TILE, tiles.NVFP4_OPERAND_BYTES
    else:
        tile, in_bytes = tiles.cutlass_fp8_tile(table.arch, m, n, k), 1.0
    speed = 1.0
    if rate and rate.tflops > 0 and peak > 0 and tile and m > 0 and n > 0:
        cta_flops, cta_bytes = tiles.kloop_cta(k, tile, in_bytes)
        load_gbs = rates.gemm_cta_load_gbs(table.arch)
        cta_s = max(cta_flops / (peak * 1e12 / c.sms), cta_bytes / (load_gbs * 1e9))
        # the op's compute time at the speed its builder gives it besides this bound (the dtype's K prior,
        # _narrow_speed, 1 for FP8): the bound is a time, so the prior must not scale it
        full_s = 2.0 * m * n * k / (rate.tflops * 1e12 * _narrow_speed(c.hw, dtype, k))
        speed = min(1.0, full_s / cta_s) if cta_s > 0 else 1.0
    if len(_TILE_SPEEDS) >= _TILE_SPEEDS_MAX:
        _TILE_SPEEDS.clear()
    _TILE_SPEEDS[key] = (table, speed)
    return speed


def _gemm_waves(ops: list, c: Context, dtype: str, m: float, n: float, count: float, source: str) -> None:
    """Append the fixed time of the output-tile waves beyond the first of `count` narrow-dtype GEMMs of m x n
    outputs (tiles.gemm_extra_waves at the rates table's `gemm/<dtype>/wave` latency, tiles.GEMM_WAVE_FIXED_US);
    nothing for bf16, whose rates carry cuBLAS's own tile choice (see _tile_speed), and for FP4, whose kernels
    (CUTLASS / FlashInfer block-scaled) this FP8 figure does not describe."""
    if dtype not in c.wave_dtypes:  # ("fp8", "int8") where the rates table has their wave entry (context)
        return
    waves = count * tiles.gemm_extra_waves(m, n, c.sms)
    if waves > 0:
        ops.append(_op_new(Op, ("gemm", dtype, "wave", m, n, 0.0, 0.0, 0.0, waves, f"{source} (tile waves)", 1.0, ())))


def _act_bytes(rows: float, n: float, k: float, count: float, in_bytes: float) -> float:
    """Activation traffic of `count` GEMMs of `rows` rows: each reads its k-wide input, all write n outputs."""
    return rows * (count * k * in_bytes + n * precision.ACTIVATION_BYTES)


def activation_op(rows: float, intermediate: float) -> Op:
    """The gated FFN's activation, silu(gate) x up, between its two GEMMs: one kernel that reads the gate_up
    output (2 x intermediate per row) and writes intermediate, in both engines where no activation quant follows
    (vLLM 0.34 layers/activation.py SiluAndMul, a custom op or its Inductor kernel: nothing fuses it into the bf16
    or weight-only GEMMs; SGLang srt/layers/activation.py SiluAndMul -> sgl_kernel silu_and_mul). At one row it
    costs the elementwise floor (rates.MIN_US)."""
    nbytes = rows * intermediate * 3 * precision.ACTIVATION_BYTES
    return _op_new(Op, ("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, nbytes, 1.0, "ffn activation", 1.0, ()))


def rope_op(rows: float, shape: AttentionShape, head_dim: float) -> Op:
    """Rotary embedding of the rank's q and k heads after the QKV projection (read and written once, the whole
    head: partial rotary leaves the rest in place): its own kernel on CUDA in both engines. vLLM 0.34: the rotary
    op (or its Inductor kernel) runs apart from the KV-cache write, whose fusion is ROCm-only
    (config/compilation.py:358-363 fuse_rope_kvcache; enable_qk_norm_rope_fusion off at every -O level,
    config/vllm.py:287-357); SGLang 0.5.23: self.rotary_emb after the QK norm (srt/models/qwen3.py:256-268; the
    fused QK-norm + RoPE + cache write is the AITER path, :290-311)."""
    nbytes = rows * (shape.heads_per_rank + shape.kv_heads_per_rank) * head_dim * 2 * precision.ACTIVATION_BYTES
    return _op_new(Op, ("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, nbytes, 1.0, "rope", 1.0, ()))


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
    # id(spec) -> (spec, ffn_shape.ffn_shape); like attention_shapes, reset by a dataclasses.replace of a field it reads
    ffn_shapes: dict = field(default_factory=dict, compare=False)
    rate_terms: dict = field(default_factory=dict, compare=False)  # rates key -> (FLOP/s, B/s, s, key): costing.py
    # the Context's part of halves.py's memo keys; the LM head's step-independent parts (lm_head.head_shape)
    memo_keys: dict = field(default_factory=dict, compare=False)
    sms: int = tiles.SMS_DEFAULT  # streaming multiprocessors of the GPU (tiles.sm_count): waves of CTAs
    act_in_bytes: float = 2.0  # bytes of one GEMM input element (1 after FP8 activation quantisation)
    dense_quant_bytes: float = 0.0  # bytes per element dense GEMM inputs are quantised to (0: not quantised)
    expert_quant_bytes: float = 0.0  # the same for the routed experts' grouped GEMMs
    dispatch_act_bytes: float = 0.0  # bytes per hidden element attention DP's all-gather dispatch moves (0: bf16)
    decode_split_cap: int = 0  # KV splits a decode attention kernel is capped at (0: it fills the SMs)
    fa2_decode: bool = False  # decode attention is vLLM's FA2 (profile fa2_decode_archs; fa2_decode.decode_op_fill)
    fa3_paged_prefill: bool = False  # prefill attention is FA3 over short KV pages (tiles.FA3_PAGED_CTA_FIXED_US)
    fp8_prefill_speed: float = 1.0  # the dense-prefix prefill attention runs FA3 in FP8 (_fp8_prefill_speed)
    mla_output_copy: bool = False  # an MLA prefill copies its attention output once more (vLLM: perf/mla.py)
    fp8_kloop: bool = False  # FP8 GEMMs bound by one CTA's K loop (engine profile cutlass_fp8_tile_archs)
    fp4_kloop: bool = False  # NVFP4 GEMMs bound by one CTA's K loop (engine profile cute_dsl_fp4_tile_archs)
    moe_stream_gbs: float = 0.0  # cap on the routed experts' weight stream (GB/s; Marlin: _moe_stream_gbs), 0: none
    dense_stream_gbs: float = 0.0  # cap on a W4A16 checkpoint's dense weight stream (GB/s; _dense_stream_gbs), 0: none
    mla_absorbed_prefill_rows: int = 0  # prefills of at most this many rows per sequence take MLA's absorbed path
    mla_absorbed_step_tokens: float = 0.0  # steps of at most this many tokens too (mla_graph_absorbed_tokens)
    triton_mla_split_tokens: int = 0  # KV tokens per split of the Triton MLA decode kernel (0: not that kernel)
    mla_query_concat: bool = False  # the MLA decode concatenates the latent query and its rope part (perf/mla.py)
    mla_prefix_up_projection: bool = False  # an MLA MHA prefill up-projects its cached prefix's latent KV (perf/mla.py)
    mla_decode_q_tile: int = 0  # query rows per tile of the latent-MLA decode kernel (tiles.mla_decode_q_tile; 0: none)
    mla_decode_fixed_waves: float = 0.0  # its fixed time beyond the attention floor (tiles.mla_decode_fixed_waves)
    dsa_prefill: tuple[int, int] = (0, 0)  # DSA prompts: (profile dsa_mha_prefill_max_kv, head tile), mla_ops.py
    dsa_fp8_sparse_speed: float = 1.0  # the DSA sparse prefill kernel on FP8 MMA (attention_choice), 1 elsewhere
    dsa_indexer_dtype: str = "bf16"  # the indexer's logits GEMM dtype (profile dsa_indexer_fp8_archs; mla_ops.py)
    dsa_candidate_sparse: bool = False  # V4.1 consumers score their candidates only (layers.indexer_scored)
    moe_tile_waves: tuple[str, ...] = ()  # routed-expert GEMMs that pay tile-wave fixed time (oplist._moe_waves)
    fused_shared: int = 0  # shared experts fused into the routed MoE (sharding.fused_shared_experts; ffn_shape.py)
    # the phase's vllm-ascend platform options where the engine runs on it (engine profile ascend_platform), else
    # None: read by the costing pass of every op list, resolved once here rather than per op list
    platform: dict | None = None
    # rows per rank up to which a step runs the fused all-reduce + RMSNorm (capability.allreduce_rmsnorm_max_tokens:
    # the plan's fusion.allreduce_rmsnorm or the engine's default, within the engine's size limit); 0: never
    fused_norm_max_tokens: float = 0.0
    # the GEMM dtypes whose tile waves are costed (_gemm_waves): fp8 and int8 where the rates table has their
    # `gemm/<dtype>/wave` entry (rates.py), resolved once here rather than per GEMM
    wave_dtypes: frozenset = frozenset()


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """The step-independent parts of a layer kind's attention ops under one Context (attention_shape.py): a frozen
    dataclass of slots, not a NamedTuple, because the op builders read its fields by name (~290 reads a V4.1
    prediction), and a slot read runs ~150 instructions fewer than a NamedTuple field's (its descriptor's call and
    type check: valgrind)."""

    split_n: float  # output width per rank of the TP-split projections
    split_flops: float  # 2 x the TP-split projection parameters (flops per row, before / tp)
    split_bytes: float  # their weight bytes per rank
    split_count: int  # their kernels
    rep: int  # replicated projection parameters (MLA q_a / kv_a, indexer, compressor)
    rep_n: float
    rep_bytes: float
    heads_per_rank: float
    kv_shard: int  # ranks a prefill row's KV is split over
    decode_shard: int  # ranks a decode sequence's KV is split over (dcp for latent KV)
    score_dim_decode: int
    quant_count: float  # FP8 activation-quant kernels in front of the projections (0 unless FP8)
    quant_row_bytes: float  # their bytes per row
    q_o_bytes: float  # bytes of one query row's Q read and O write in the attention kernel (all heads of the rank)
    kv_heads_per_rank: float  # KV heads of a rank (at least one: TP beyond the KV heads replicates them)
    q_per_kv: float  # query heads per KV head on a rank
    cache_row_bytes: float  # bytes the KV-cache write moves per new token (reads the new K/V, writes the cache)
    prefill_speed: float  # kernel speed of the prefill attention op (kernels.attention x head-dim rate, rates.py)


def context(
    model: ModelSpec,
    phase: PhasePlan,
    engine: str,
    hw: HardwareProfile,
    stage: tuple[int, ...],
    expert_cv: float = 0.0,
    graph_tokens: float | None = None,
) -> Context:
    """The phase's choices resolved once; `expert_cv`: the workload's expert-popularity CV (Workload.expert_load_cv,
    0 = the default: ep_balance.expert_load_cv); `graph_tokens`: step_fn's prefill graph cap (None: the engine's)."""
    arch, engine_profile = hw.gpu.arch, profile(engine)  # read once: each is a call (a property, a lookup)
    dense_dtype = precision.compute_dtype(model, phase, hw, "dense")
    expert_dtype = precision.compute_dtype(model, phase, hw, "expert")
    moe = eff.resolved_moe_kernel(model, phase, engine, arch, expert_dtype)
    imbalance = ep_balance.busiest_rank_load(phase.ep, model.num_experts, 1, math.inf, phase.eplb, expert_cv)
    attention_kernel = eff.auto_attention_kernel(engine, model, arch, phase.kernels.attention)
    sms = tiles.sm_count(hw.gpu.name, arch)
    table = rates.rates_table(hw)
    return Context(
        model,
        phase,
        engine,
        hw,
        stage,
        table,
        dense_dtype,
        expert_dtype,
        _narrow_speed(hw, dense_dtype, model.hidden_size)
        * (eff.LINEAR_VARIANT_SPEED.get(phase.kernels.linear, 1.0) if dense_dtype == "fp8" else 1.0),
        _moe_variant_speed(moe, hw, expert_dtype, table.tensor_rate_ratio)
        * _narrow_speed(hw, expert_dtype, model.hidden_size),
        eff.ATTENTION_VARIANT_SPEED.get(attention_kernel, 1.0),
        comm.pcie_ipc_max_bytes(phase, model.hidden_size * precision.ACTIVATION_BYTES),
        precision.kv_bytes_per_elem(model, phase, engine, arch),
        precision.dense_weight_bytes(model, phase),
        precision.expert_weight_bytes(model, phase),
        imbalance,
        comm.nccl_env(phase.comm),
        sms=sms,
        act_in_bytes=precision.act_quant_bytes(dense_dtype, model.dense_format) or float(precision.ACTIVATION_BYTES),
        dense_quant_bytes=precision.act_quant_bytes(dense_dtype, model.dense_format),
        expert_quant_bytes=precision.act_quant_bytes(expert_dtype, model.expert_format),
        dispatch_act_bytes=sharding.dispatch_act_bytes(model, phase, engine, moe, expert_dtype),
        decode_split_cap=decode_split_cap(engine, arch, attention_kernel),
        fa2_decode=attention_kernel == "auto" and arch in engine_profile.fa2_decode_archs,
        fa3_paged_prefill=attention_kernel == "auto" and arch in engine_profile.fa3_paged_kv_non_tma_archs,
        fp8_prefill_speed=_fp8_prefill_speed(model, phase, hw, engine, attention_kernel),
        mla_output_copy=engine_profile.mla_prefill_output_copy,  # oplist applies it to absorbed-MLA layers only
        # per-tensor FP8 only: a block-scaled checkpoint runs other kernels (DeepGEMM, CUTLASS blockwise)
        fp8_kloop=arch in engine_profile.cutlass_fp8_tile_archs and model.dense_format != "fp8_block",
        fp4_kloop=arch in engine_profile.cute_dsl_fp4_tile_archs and model.dense_format == "nvfp4",
        moe_stream_gbs=_moe_stream_gbs(moe, sms),
        dense_stream_gbs=_dense_stream_gbs(model, hw, engine, sms),
        mla_absorbed_prefill_rows=mla_absorbed_prefill_rows(engine, arch, attention_kernel),
        mla_absorbed_step_tokens=attention_choice.mla_graph_absorbed_tokens(engine, model, phase, hw, graph_tokens),
        triton_mla_split_tokens=engine_profile.triton_mla_split_tokens if attention_kernel == "triton" else 0,
        mla_query_concat=mla_query_concat(engine, arch, attention_kernel),
        mla_prefix_up_projection=engine_profile.mla_prefill_prefix_up_projection,
        mla_decode_q_tile=tiles.mla_decode_q_tile(attention_kernel, arch),
        mla_decode_fixed_waves=tiles.mla_decode_fixed_waves(attention_kernel, arch, rates.MIN_US["attention"]),
        dsa_prefill=engine_profile.dsa_prefill(arch, dsa_top_k(model)),
        dsa_fp8_sparse_speed=attention_choice.dsa_fp8_sparse_speed(model, phase, hw, engine),
        dsa_indexer_dtype=attention_choice.dsa_indexer_dtype(arch, engine_profile.dsa_indexer_fp8_archs, table),
        dsa_candidate_sparse=arch in engine_profile.dsa_candidate_sparse_archs and phase.dcp == 1,
        moe_tile_waves=_moe_tile_waves(engine, moe, model.expert_format),
        fused_shared=sharding.fused_shared_experts(model, phase, engine, arch, moe),
        platform=phase.platform if engine_profile.ascend_platform else None,
        fused_norm_max_tokens=allreduce_rmsnorm_max_tokens(
            engine, phase, model, hw, model.hidden_size * precision.ACTIVATION_BYTES
        ),
        wave_dtypes=frozenset(d for d in ("fp8", "int8") if ("gemm", d, "wave") in table.entries),
    )


def _moe_tile_waves(engine: str, moe: str, expert_format: str) -> tuple[str, ...]:
    """The Triton fused MoE's grouped GEMMs of a block-FP8 checkpoint that gather their routed rows by pointer and
    pay the fixed time of each wave of tiles (perf/oplist.py _moe_waves): gate / up always, down unless the engine
    profile's triton_moe_tma_down says its tiles come by TMA. Other kernels and formats: none."""
    if moe != "triton" or expert_format != "fp8_block":
        return ()
    return ("gate_up",) if profile(engine).triton_moe_tma_down else ("gate_up", "down")


def _fp8_prefill_speed(
    model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, engine: str, attention_kernel: str
) -> float:
    """fractions.fp8_prefill_speed where the plan's prefill attention runs in FP8: an FP8 KV cache (the plan's or the
    engine's default, kv_cache_dtype_on) under the `auto` kernel on an arch the engine profile names
    (fp8_kv_prefill_attention_archs, cited there); 1 elsewhere."""
    arch = hw.gpu.arch
    if attention_kernel != "auto" or kv_cache_dtype_on(engine, phase, model, arch) != "fp8":
        return 1.0
    if arch not in profile(engine).fp8_kv_prefill_attention_archs:
        return 1.0
    bf16, fp8 = hw.gpu.peak_tflops.get("bf16", 0.0), hw.gpu.peak_tflops.get("fp8", 0.0)
    if bf16 <= 0 or fp8 <= 0:
        return 1.0
    ratio = fractions.tensor_rate_ratio(hw)
    return fractions.fp8_prefill_speed(arch, rates.ATTENTION_PREFILL_FRACTION, ratio, fp8 / bf16)


def _moe_variant_speed(moe: str, hw: HardwareProfile, dtype: str, ratio: float) -> float:
    """efficiency.MOE_VARIANT_SPEED of the fused-MoE kernel, moved to a part of tensor-rate `ratio` below its
    arch's reference (fractions.variant_speed against the `dtype` GEMM fraction, rates.reference_fraction); but
    Marlin at the MARLIN paper's figure against an mma.sync GEMM (rates.MARLIN_MMA_SYNC_SPEED) times the share of
    the arch's BF16 rate mma.sync gets there (rates.MMA_SYNC_SHARE: sm_90 / sm_100; 1 where mma.sync is the BF16
    path, rates.MMA_SYNC_ARCHS): a tensor-instruction rate, not moved."""
    arch = hw.gpu.arch
    if moe == "marlin" and (arch in rates.MMA_SYNC_ARCHS or arch in rates.MMA_SYNC_SHARE):
        return rates.MARLIN_MMA_SYNC_SPEED * rates.MMA_SYNC_SHARE.get(arch, 1.0)
    speed = eff.MOE_VARIANT_SPEED.get(moe, 1.0)
    if ratio == 1.0 or speed == 1.0:
        return speed
    return fractions.variant_speed(speed, rates.reference_fraction(hw, dtype), ratio)


def _moe_stream_gbs(moe: str, sms: int) -> float:
    """What the routed experts' grouped GEMMs stream of their weights at most: Marlin, SMs x
    rates.MARLIN_PER_SM_STREAM_GBS; 0 (no cap beyond the rates table's bandwidth) for the other kernels."""
    return sms * rates.MARLIN_PER_SM_STREAM_GBS if moe == "marlin" and sms else 0.0


def _dense_stream_gbs(model: ModelSpec, hw: HardwareProfile, engine: str, sms: int) -> float:
    """What a weight-only INT4 checkpoint's (AWQ / GPTQ) dense GEMMs stream of their weights at most on NVIDIA
    parts, where both engines run them on Marlin (or Humming; rates.MARLIN_DENSE_PER_SM_STREAM_GBS): SMs x that;
    0 (no cap) for other checkpoints, vendors and vllm-ascend. Their ops carry dtype DENSE_W4A16 so the costing
    (costing._rate_terms) can cap their rate-table entry alone (the table falls back to bf16's rates for it)."""
    weight_only_int4 = model.dense_dtype == "int4" and model.dense_format in INT4_WEIGHT_ONLY
    if not weight_only_int4 or hw.gpu.vendor != "nvidia" or profile(engine).ascend_platform or not sms:
        return 0.0
    return sms * rates.MARLIN_DENSE_PER_SM_STREAM_GBS


INT4_WEIGHT_ONLY = frozenset({"int4_awq", "int4_gptq"})
DENSE_W4A16 = "int4"  # the op dtype of those GEMMs (their compute runs in bf16: precision.compute_dtype)


def dense_op_dtype(c: Context) -> str:
    """The dtype label of the dense GEMM ops: DENSE_W4A16 where their weight stream is capped, else the compute
    dtype (the tile and wave lookups keep the compute dtype)."""
    return DENSE_W4A16 if c.dense_stream_gbs else c.dense_dtype


def _narrow_speed(hw: HardwareProfile, dtype: str, k: float) -> float:
    """rates.narrow_k_speed for FP4 GEMMs of reduction width `k` (the hidden size), 1 for the other dtypes: an FP8
    GEMM's small-K penalty is the fixed time of its tile waves (_gemm_waves, public), not this prior."""
    return rates.narrow_k_speed(hw.gpu.arch, k) if dtype == "fp4" else 1.0


def prefill_fill(c: Context, att: AttentionSpec, speed: float, q_per_kv: float, tokens: float, ctx: float,
                 entries: float, flops: float, nbytes: float) -> float:  # fmt: skip
    """Speed, relative to `speed`, of a dense causal prefill attention kernel of `flops` / `nbytes` bounded by its
    longest CTA (rates.critical_path_speed): the last query block of a sequence (tiles.prefill_longest_cta; the
    query heads of a KV head packed per CTA on tiles.PACKED_GQA_PREFILL_ARCHS, one per CTA elsewhere) attending
    the whole prompt on one SM. `entries`: what a query attends at the mean prefix `ctx` (windows and caps)."""
    rate = c.table.get("attention", "bf16", "prefill")
    tflops, gbs = rate.tflops * speed, rate.gbs * speed
    if not c.sms or tflops <= 0 or gbs <= 0 or entries <= 0 or ctx <= 0:
        return 1.0
    full_s = max(flops / (tflops * 1e12), nbytes / (gbs * 1e9))
    arch = c.table.arch
    q_per_cta = q_per_kv if arch in tiles.PACKED_GQA_PREFILL_ARCHS else 1.0
    rows_per_seq = tiles.prefill_rows_per_seq(tokens, ctx)
    rows, keys = tiles.prefill_longest_cta(rows_per_seq, ctx, q_per_cta, tiles.prefill_q_block(arch))
    keys = keys * entries / ctx
    kv_head_bytes = att.kv_read_elems_per_token / max(1, att.num_kv_heads) * c.kv_elem_bytes
    cta_bytes = keys * kv_head_bytes + rows * att.score_dim * precision.ACTIVATION_BYTES
    return rates.critical_path_speed(full_s, 2.0 * rows * keys * att.score_dim, cta_bytes, tflops, c.sms)
