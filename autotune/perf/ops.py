"""Cost of one forward step of one engine instance: per-op roofline + collectives on the topology.

A step carries `decode_seqs` decode sequences (at mean context `decode_ctx`, each running `decode_width`
tokens: 1, or 1 + the draft tokens it verifies under speculative decoding) and `prefill_tokens` prompt tokens
(chunked prefill, mean attended prefix `prefill_ctx`). Costs are computed for one pipeline stage and one
micro-batch; `step_ms` is the time a token takes through all `pp` stages.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from autotune.perf import comm, precision
from autotune.perf import efficiency as eff
from autotune.specs import (
    DTYPE_BYTES,
    AttentionSpec,
    FfnSpec,
    HardwareProfile,
    LayerSpec,
    ModelSpec,
    PhasePlan,
    StepBreakdown,
)

GB = 1e9
TFLOP = 1e12
OVERLAP_RESIDUE = 0.1  # two-batch overlap still pays this share of the shorter of compute and communication


@dataclass(frozen=True)
class StepInput:
    decode_seqs: float = 0.0
    decode_ctx: float = 0.0
    prefill_tokens: float = 0.0
    prefill_ctx: float = 0.0
    decode_width: float = 1.0  # tokens each decode sequence runs per step (step_cost sets 1 + draft tokens)


@dataclass
class Cost:
    compute_s: float = 0.0
    memory_s: float = 0.0  # memory-bound time beyond the compute time of the same ops
    comm_s: dict[str, float] = field(default_factory=dict)
    overlap_saved_s: float = 0.0

    def roofline(self, flops: float, nbytes: float, tflops: float, gbs: float, speed: float = 1.0) -> None:
        t_compute = flops / (tflops * TFLOP) / speed
        t_memory = nbytes / (gbs * GB) / speed
        self.compute_s += t_compute
        self.memory_s += max(0.0, t_memory - t_compute)

    def add_comm(self, name: str, seconds: float) -> None:
        if seconds > 0:
            self.comm_s[name] = self.comm_s.get(name, 0.0) + seconds

    def add(self, other: Cost, times: float = 1.0) -> None:
        self.compute_s += other.compute_s * times
        self.memory_s += other.memory_s * times
        self.overlap_saved_s += other.overlap_saved_s * times
        for name, seconds in other.comm_s.items():
            self.add_comm(name, seconds * times)

    @property
    def time_s(self) -> float:
        return self.compute_s + self.memory_s + sum(self.comm_s.values()) - self.overlap_saved_s


@dataclass(frozen=True)
class Rates:
    """Achievable rates of one GPU under a plan."""

    dense_tflops: float
    expert_tflops: float
    attention_tflops: float
    gemm_gbs: float
    attention_gbs: float
    attention_speed: float
    moe_speed: float
    dense_speed: float = 1.0  # dense FP8 GEMM kernel (kernels.linear)


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
    scored = ctx / att.compress_ratio
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


def distinct_experts(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected number of experts hit when `tokens` tokens each route to top-k of E experts."""
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def rates(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile) -> Rates:
    e = eff.efficiency(hw)
    dense_dtype = precision.compute_dtype(model, phase, hw, "dense")
    return Rates(
        dense_tflops=eff.peak_tflops(hw, dense_dtype),
        expert_tflops=eff.peak_tflops(hw, precision.compute_dtype(model, phase, hw, "expert")),
        attention_tflops=hw.gpu.peak_tflops.get("bf16", 0.0) * e.attention_compute,
        gemm_gbs=eff.mem_bw_gbs(hw),
        attention_gbs=hw.gpu.mem_bw_gbs * e.attention_memory,
        attention_speed=eff.ATTENTION_VARIANT_SPEED.get(phase.kernels.attention, 1.0),
        moe_speed=eff.MOE_VARIANT_SPEED.get(phase.kernels.moe, 1.0),
        dense_speed=eff.LINEAR_VARIANT_SPEED.get(phase.kernels.linear, 1.0) if dense_dtype == "fp8" else 1.0,
    )


def speculation(phase: PhasePlan) -> tuple[int, float]:
    """(tokens each decoding sequence runs through the target model per step, tokens it advances on average):
    k drafts verified at once, each accepted with probability `a` given its predecessors were, advance
    E = (1 - a^(k+1)) / (1 - a) tokens (the bonus token included)."""
    spec = phase.speculative
    k = spec.draft_tokens if spec.method != "none" else 0
    if k <= 0:
        return 1, 1.0
    a = eff.DRAFT_ACCEPTANCE.get(spec.method, eff.DRAFT_ACCEPTANCE["mtp"])
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


def _attention_cost(
    cost: Cost, att: AttentionSpec, model: ModelSpec, phase: PhasePlan, r: Rates, x: StepInput, tokens: float
) -> None:
    tp, dp = phase.tp, phase.dp
    w_bytes = DTYPE_BYTES[precision.dense_dtype(model, phase)]
    cost.roofline(
        2 * att.params * tokens / (tp * dp), att.params * w_bytes / tp, r.dense_tflops, r.gemm_gbs, r.dense_speed
    )
    heads_per_rank = att.num_heads / tp
    kv_shard = 1 if att.latent_shared else min(tp, att.num_kv_heads)
    kv_elem_bytes = precision.kv_bytes_per_elem(model, phase)
    index_heads_per_rank = att.index_heads / tp
    flops = bytes_read = 0.0
    if x.decode_seqs:
        seqs = x.decode_seqs / dp
        queries = seqs * x.decode_width  # verified tokens attend the same KV as their sequence
        # decode context parallel: each of the dcp ranks holds and reads 1/dcp of every sequence's latent KV
        # and runs all its group's heads over it (the heads' partial outputs are combined: _dcp_comm)
        decode_shard = kv_shard * (phase.dcp if att.latent_shared else 1)
        entries, scored = attended_entries(att, x.decode_ctx), indexer_scored(att, x.decode_ctx)
        flops += 2 * heads_per_rank * (att.score_dim_decode or att.score_dim) * entries * queries
        flops += 2 * index_heads_per_rank * att.index_dim * scored * queries
        per_seq = (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes
        bytes_read += per_seq / decode_shard * seqs
    if x.prefill_tokens:
        tokens_per_rank = x.prefill_tokens / dp
        entries, scored = attended_entries(att, x.prefill_ctx), indexer_scored(att, x.prefill_ctx)
        flops += 2 * heads_per_rank * att.score_dim * entries * tokens_per_rank
        flops += 2 * index_heads_per_rank * att.index_dim * scored * tokens_per_rank
        bytes_read += (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes / kv_shard
    cost.roofline(flops, bytes_read, r.attention_tflops, r.attention_gbs, r.attention_speed)


def _ffn_cost(
    cost: Cost, ffn: FfnSpec, model: ModelSpec, phase: PhasePlan, engine: str, r: Rates, tokens: float
) -> None:
    ranks = phase.tp * phase.dp
    w_bytes = DTYPE_BYTES[precision.dense_dtype(model, phase)]
    if ffn.params:  # dense FFN, or the shared experts of a MoE layer
        shards = dense_shards(ffn, phase, engine)  # each rank computes tokens / ranks either way
        cost.roofline(
            2 * ffn.params * tokens / ranks, ffn.params * w_bytes / shards, r.dense_tflops, r.gemm_gbs, r.dense_speed
        )
    if ffn.kind != "moe":
        return
    e_bytes = DTYPE_BYTES[precision.expert_dtype(model, phase)]
    imbalance = 1.0
    if phase.ep > 1:
        excess = eff.EP_IMBALANCE - 1.0
        imbalance += excess * eff.EPLB_RESIDUAL_IMBALANCE if phase.eplb else excess
    flops = 2 * ffn.experts_per_token * ffn.expert_params * tokens / ranks * imbalance
    hit = distinct_experts(ffn.num_experts, ffn.experts_per_token, tokens)
    cost.roofline(
        flops, hit * ffn.expert_params * e_bytes / ranks * imbalance, r.expert_tflops, r.gemm_gbs, r.moe_speed
    )


def _layer_comm(
    cost: Cost,
    ffn: FfnSpec,
    phase: PhasePlan,
    hw: HardwareProfile,
    stage: tuple[int, ...],
    tokens: float,
    hidden: int,
    dense: str = "tp",
) -> None:
    tp, dp = phase.tp, phase.dp
    tp_group = stage[:tp]
    row_bytes = hidden * precision.ACTIVATION_BYTES
    pc = phase.comm
    ipc_max = comm.pcie_ipc_max_bytes(phase, hidden * precision.ACTIVATION_BYTES)

    def all_reduce(group: tuple[int, ...], nbytes: float) -> None:
        algo, seconds = comm.all_reduce(hw, group, nbytes, pc, ipc_max)
        cost.add_comm(f"allreduce:{algo}", seconds)

    all_reduce(tp_group, tokens / dp * row_bytes)
    if ffn.kind != "moe" or len(stage) == 1:
        if dense == "tp":
            all_reduce(tp_group, tokens / dp * row_bytes)
        elif dense == "all":  # dense MLP sharded over every rank (dense_layout); "dp" has nothing to reduce
            cost.add_comm("allgather", comm.all_gather_s(hw, stage, tokens * row_bytes, pc))
            cost.add_comm("reducescatter", comm.reduce_scatter_s(hw, stage, tokens * row_bytes, pc))
        return
    if phase.comm.all2all == "deepep" and phase.ep > 1:
        per_rank = tokens / len(stage) * ffn.experts_per_token * hidden
        cost.add_comm("all2all", comm.all_to_all_s(hw, stage, per_rank * DTYPE_BYTES["fp8"], pc))  # fp8 dispatch
        cost.add_comm("all2all", comm.all_to_all_s(hw, stage, per_rank * precision.ACTIVATION_BYTES, pc))  # combine
    elif dp > 1:  # gather every token to every rank of the MoE group, reduce-scatter the outputs back
        cost.add_comm("allgather", comm.all_gather_s(hw, stage, tokens * row_bytes, pc))
        cost.add_comm("reducescatter", comm.reduce_scatter_s(hw, stage, tokens * row_bytes, pc))
    else:
        all_reduce(stage, tokens * row_bytes)


def _fused_norms(ffn: FfnSpec, phase: PhasePlan, dense: str) -> int:
    """Norms folded into the all-reduce before them (fusion allreduce_rmsnorm, TP > 1): the one after the
    attention all-reduce, and the one after the FFN's when its output is all-reduced (see _layer_comm)."""
    if phase.tp == 1 or not phase.fusion.get("allreduce_rmsnorm", False):
        return 0
    if ffn.kind != "moe":
        return 2 if dense == "tp" else 1
    deepep = phase.comm.all2all == "deepep" and phase.ep > 1
    return 2 if phase.dp == 1 and not deepep else 1


def _norm_cost(cost: Cost, phase: PhasePlan, r: Rates, rows: float, hidden: int, fused: int) -> None:
    """The layer's residual add + RMSNorm kernels over the `rows` rows each rank holds: bf16 reads of the
    residual and the input, writes of both; each kernel takes at least ELEMENTWISE_MIN_US."""
    kernels = eff.NORMS_PER_LAYER - fused
    if kernels <= 0 or rows <= 0:
        return
    seconds = 4 * rows * hidden * precision.ACTIVATION_BYTES / (r.gemm_gbs * GB)
    cost.memory_s += kernels * max(eff.ELEMENTWISE_MIN_US * 1e-6, seconds)


def _dcp_comm(
    cost: Cost, phase: PhasePlan, hw: HardwareProfile, stage: tuple[int, ...], rows: float, hidden: int
) -> None:
    """Decode context parallel: every rank's partial attention outputs (and their log-sum-exp, negligible) of
    the decode rows are gathered across the dcp ranks of the TP group to be merged."""
    nbytes = rows * hidden * precision.ACTIVATION_BYTES
    cost.add_comm("dcp_allgather", comm.all_gather_s(hw, stage[: phase.dcp], nbytes, phase.comm))


def _layer_cost(
    layer: LayerSpec,
    model: ModelSpec,
    phase: PhasePlan,
    engine: str,
    hw: HardwareProfile,
    r: Rates,
    stage: tuple[int, ...],
    x: StepInput,
) -> Cost:
    if not layer.in_prefill:
        x = StepInput(x.decode_seqs, x.decode_ctx, decode_width=x.decode_width)
    tokens = x.decode_seqs * x.decode_width + x.prefill_tokens
    cost = Cost()
    if tokens <= 0:
        return cost
    _attention_cost(cost, layer.attention, model, phase, r, x, tokens)
    dense = dense_layout(layer.ffn, phase, engine)
    _ffn_cost(cost, layer.ffn, model, phase, engine, r, tokens)
    _layer_comm(cost, layer.ffn, phase, hw, stage, tokens, model.hidden_size, dense)
    _norm_cost(cost, phase, r, tokens / phase.dp, model.hidden_size, _fused_norms(layer.ffn, phase, dense))
    if phase.dcp > 1 and x.decode_seqs and layer.attention.latent_shared:
        _dcp_comm(cost, phase, hw, stage, x.decode_seqs * x.decode_width / phase.dp, model.hidden_size)
    if phase.overlap.two_batch:
        busy = cost.compute_s + cost.memory_s
        cost.overlap_saved_s = min(busy, sum(cost.comm_s.values())) * (1 - OVERLAP_RESIDUE)
    return cost


def _head_cost(
    cost: Cost,
    model: ModelSpec,
    phase: PhasePlan,
    engine: str,
    hw: HardwareProfile,
    r: Rates,
    stage: tuple[int, ...],
    rows: float,
) -> None:
    """LM head (bf16) on `rows` sampled positions of the instance, vocab-parallel over the attention TP group,
    or over all tp*dp ranks (head_over_dp): then every rank computes every DP rank's rows against its vocab
    slice, after an all-gather of the sampled hidden rows, and the logits are all-gathered back. Runs once per
    step (on the last pipeline stage): callers scale it by 1/pp like the per-stage layers."""
    head_params = model.vocab_size * model.hidden_size
    ranks = phase.tp * phase.dp
    over_dp = head_over_dp(engine, phase)
    shards = ranks if over_dp else phase.tp
    head_bytes = head_params * DTYPE_BYTES["bf16"] / shards
    cost.roofline(2 * head_params * rows / ranks, head_bytes, r.dense_tflops, r.gemm_gbs)
    if over_dp and rows:
        act = precision.ACTIVATION_BYTES
        cost.add_comm("allgather", comm.all_gather_s(hw, stage, rows * model.hidden_size * act, phase.comm))
        cost.add_comm("allgather", comm.all_gather_s(hw, stage, rows * model.vocab_size * act, phase.comm))


def _draft_cost(
    model: ModelSpec,
    phase: PhasePlan,
    engine: str,
    hw: HardwareProfile,
    r: Rates,
    stage: tuple[int, ...],
    x: StepInput,
) -> Cost:
    """Drafting the next step's tokens: k sequential passes of one token per decoding sequence through one extra
    decoder layer shaped like the model's last layer (its own KV at the sequence's context) and the LM head.
    That is MTP (DeepSeek-V3 / GLM-5 nextn layers). DSpark (V4.1: 3 stages of 128 experts drafting a block in
    parallel, shared/reference/models.md) has no shape in ModelSpec: it is costed like MTP, a stand-in."""
    one = StepInput(x.decode_seqs, x.decode_ctx)
    draft = _layer_cost(model.layers[-1], model, phase, engine, hw, r, stage, one)
    _head_cost(draft, model, phase, engine, hw, r, stage, x.decode_seqs)
    total = Cost()
    total.add(draft, x.decode_width - 1)
    return total


def step_cost(
    model: ModelSpec,
    phase: PhasePlan,
    engine: str,
    hw: HardwareProfile,
    gpus: tuple[int, ...],
    x: StepInput,
    label: str,
) -> StepBreakdown:
    """One step of the instance on `gpus` (tp*dp*pp of them, stage-major)."""
    ranks = phase.tp * phase.dp
    stage = gpus[:ranks]
    r = rates(model, phase, hw)
    width = speculation(phase)[0] if x.decode_seqs else 1
    if width > 1:
        x = replace(x, decode_width=width)
    total = Cost()
    for layer, count in layer_groups(model):
        total.add(_layer_cost(layer, model, phase, engine, hw, r, stage, x), count / phase.pp)
    # LM head on sampled positions only: every verified token of a decoding sequence, the chunk's last prompt token
    head = Cost()
    _head_cost(head, model, phase, engine, hw, r, stage, x.decode_seqs * width + (1 if x.prefill_tokens else 0))
    total.add(head, 1 / phase.pp)
    launch_us = eff.PREFILL_LAUNCH_US_PER_LAYER if x.prefill_tokens else eff.DECODE_LAUNCH_US_PER_LAYER
    launch_s = (launch_us * 1e-6 * model.num_layers + eff.STEP_OVERHEAD_MS[engine] * 1e-3) / phase.pp
    if width > 1:  # drafting runs once per step, on the last stage
        total.add(_draft_cost(model, phase, engine, hw, r, stage, x), 1 / phase.pp)
        launch_s += (width - 1) * eff.DECODE_LAUNCH_US_PER_LAYER * 1e-6 / phase.pp
    if phase.pp > 1:
        rows = x.decode_seqs * width + x.prefill_tokens
        hand_off = rows / phase.dp * model.hidden_size * precision.ACTIVATION_BYTES
        total.add_comm("pp_send", comm.send_s(hw, gpus[ranks - 1], gpus[ranks], hand_off, phase.comm))
    stages = phase.pp
    return StepBreakdown(
        phase=label,
        batch_tokens=int(round(x.decode_seqs * width + x.prefill_tokens)),
        step_ms=(total.time_s + launch_s) * stages * 1e3,
        compute_ms=total.compute_s * stages * 1e3,
        memory_ms=total.memory_s * stages * 1e3,
        comm_ms={k: v * stages * 1e3 for k, v in sorted(total.comm_s.items())},
        bubble_ms=0.0,
        overlap_saved_ms=total.overlap_saved_s * stages * 1e3,
        launch_ms=launch_s * stages * 1e3,
    )
