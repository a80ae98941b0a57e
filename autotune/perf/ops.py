"""Cost of one forward step of one engine instance: per-op roofline + collectives on the topology.

A step carries `decode_seqs` decode tokens (one per running sequence, at mean context `decode_ctx`) and
`prefill_tokens` prompt tokens (chunked prefill, mean attended prefix `prefill_ctx`). Costs are computed for
one pipeline stage and one micro-batch; `step_ms` is the time a token takes through all `pp` stages.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

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


def layer_groups(model: ModelSpec) -> tuple[tuple[LayerSpec, int], ...]:
    """Identical layers collapsed with their count, so a step costs O(distinct layer kinds)."""
    counts: Counter = Counter()
    reps: dict = {}
    for layer in model.layers:
        key = (layer.attention, layer.ffn, layer.in_prefill)
        counts[key] += 1
        reps.setdefault(key, layer)
    return tuple((reps[key], n) for key, n in counts.items())


def distinct_experts(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected number of experts hit when `tokens` tokens each route to top-k of E experts."""
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def rates(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile) -> Rates:
    e = eff.efficiency(hw)
    return Rates(
        dense_tflops=eff.peak_tflops(hw, precision.compute_dtype(model, phase, hw, "dense")),
        expert_tflops=eff.peak_tflops(hw, precision.compute_dtype(model, phase, hw, "expert")),
        attention_tflops=hw.gpu.peak_tflops.get("bf16", 0.0) * e.attention_compute,
        gemm_gbs=eff.mem_bw_gbs(hw),
        attention_gbs=hw.gpu.mem_bw_gbs * e.attention_memory,
        attention_speed=eff.ATTENTION_VARIANT_SPEED.get(phase.kernels.attention, 1.0),
        moe_speed=eff.MOE_VARIANT_SPEED.get(phase.kernels.moe, 1.0),
    )


def _attention_cost(
    cost: Cost, att: AttentionSpec, model: ModelSpec, phase: PhasePlan, r: Rates, x: StepInput, tokens: float
) -> None:
    tp, dp = phase.tp, phase.dp
    w_bytes = DTYPE_BYTES[precision.dense_dtype(model, phase)]
    cost.roofline(2 * att.params * tokens / (tp * dp), att.params * w_bytes / tp, r.dense_tflops, r.gemm_gbs)
    heads_per_rank = att.num_heads / tp
    kv_shard = 1 if att.latent_shared else min(tp, att.num_kv_heads)
    kv_elem_bytes = precision.kv_bytes_per_elem(model, phase)
    index_heads_per_rank = att.index_heads / tp
    flops = bytes_read = 0.0
    if x.decode_seqs:
        seqs = x.decode_seqs / dp
        entries, scored = attended_entries(att, x.decode_ctx), indexer_scored(att, x.decode_ctx)
        flops += 2 * heads_per_rank * (att.score_dim_decode or att.score_dim) * entries * seqs
        flops += 2 * index_heads_per_rank * att.index_dim * scored * seqs
        bytes_read += (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes / kv_shard * seqs
    if x.prefill_tokens:
        tokens_per_rank = x.prefill_tokens / dp
        entries, scored = attended_entries(att, x.prefill_ctx), indexer_scored(att, x.prefill_ctx)
        flops += 2 * heads_per_rank * att.score_dim * entries * tokens_per_rank
        flops += 2 * index_heads_per_rank * att.index_dim * scored * tokens_per_rank
        bytes_read += (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes / kv_shard
    cost.roofline(flops, bytes_read, r.attention_tflops, r.attention_gbs, r.attention_speed)


def _ffn_cost(cost: Cost, ffn: FfnSpec, model: ModelSpec, phase: PhasePlan, r: Rates, tokens: float) -> None:
    tp, ranks = phase.tp, phase.tp * phase.dp
    w_bytes = DTYPE_BYTES[precision.dense_dtype(model, phase)]
    if ffn.params:  # dense FFN, or the shared experts of a MoE layer
        cost.roofline(2 * ffn.params * tokens / ranks, ffn.params * w_bytes / tp, r.dense_tflops, r.gemm_gbs)
    if ffn.kind != "moe":
        return
    e_bytes = DTYPE_BYTES[precision.expert_dtype(model, phase)]
    imbalance = eff.EP_IMBALANCE if phase.ep > 1 else 1.0
    flops = 2 * ffn.experts_per_token * ffn.expert_params * tokens / ranks * imbalance
    hit = distinct_experts(ffn.num_experts, ffn.experts_per_token, tokens)
    cost.roofline(
        flops, hit * ffn.expert_params * e_bytes / ranks * imbalance, r.expert_tflops, r.gemm_gbs, r.moe_speed
    )


def _layer_comm(
    cost: Cost, ffn: FfnSpec, phase: PhasePlan, hw: HardwareProfile, stage: tuple[int, ...], tokens: float, hidden: int
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
        all_reduce(tp_group, tokens / dp * row_bytes)
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


def _layer_cost(
    layer: LayerSpec,
    model: ModelSpec,
    phase: PhasePlan,
    hw: HardwareProfile,
    r: Rates,
    stage: tuple[int, ...],
    x: StepInput,
) -> Cost:
    if not layer.in_prefill:
        x = StepInput(x.decode_seqs, x.decode_ctx)
    tokens = x.decode_seqs + x.prefill_tokens
    cost = Cost()
    if tokens <= 0:
        return cost
    _attention_cost(cost, layer.attention, model, phase, r, x, tokens)
    _ffn_cost(cost, layer.ffn, model, phase, r, tokens)
    _layer_comm(cost, layer.ffn, phase, hw, stage, tokens, model.hidden_size)
    if phase.overlap.two_batch:
        busy = cost.compute_s + cost.memory_s
        cost.overlap_saved_s = min(busy, sum(cost.comm_s.values())) * (1 - OVERLAP_RESIDUE)
    return cost


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
    total = Cost()
    for layer, count in layer_groups(model):
        total.add(_layer_cost(layer, model, phase, hw, r, stage, x), count / phase.pp)
    sampled = x.decode_seqs + (1 if x.prefill_tokens else 0)  # LM head runs on sampled positions only
    head_params = model.vocab_size * model.hidden_size
    total.roofline(
        2 * head_params * sampled / ranks,
        head_params * DTYPE_BYTES["bf16"] / phase.tp / phase.pp,
        r.dense_tflops,
        r.gemm_gbs,
    )
    launch_us = eff.PREFILL_LAUNCH_US_PER_LAYER if x.prefill_tokens else eff.DECODE_LAUNCH_US_PER_LAYER
    launch_s = (launch_us * 1e-6 * model.num_layers + eff.STEP_OVERHEAD_MS[engine] * 1e-3) / phase.pp
    if phase.pp > 1:
        hand_off = (x.decode_seqs + x.prefill_tokens) / phase.dp * model.hidden_size * precision.ACTIVATION_BYTES
        total.add_comm("pp_send", comm.send_s(hw, gpus[ranks - 1], gpus[ranks], hand_off, phase.comm))
    stages = phase.pp
    return StepBreakdown(
        phase=label,
        batch_tokens=int(round(x.decode_seqs + x.prefill_tokens)),
        step_ms=(total.time_s + launch_s) * stages * 1e3,
        compute_ms=total.compute_s * stages * 1e3,
        memory_ms=total.memory_s * stages * 1e3,
        comm_ms={k: v * stages * 1e3 for k, v in sorted(total.comm_s.items())},
        bubble_ms=0.0,
        overlap_saved_ms=total.overlap_saved_s * stages * 1e3,
        launch_ms=launch_s * stages * 1e3,
    )
