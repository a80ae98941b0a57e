"""Cost of one forward step of one engine instance: the op list one step runs on the busiest GPU, then a costing
pass over it with the box's rates table (perf/rates.py) and collectives on the topology (perf/comm.py).

A step carries `decode_seqs` decode sequences (at mean context `decode_ctx`, each running `decode_width`
tokens: 1, or 1 + the draft tokens it verifies under speculative decoding) and `prefill_tokens` prompt tokens
(chunked prefill, mean attended prefix `prefill_ctx`). Ops are built per distinct layer kind (layer_groups) for
one pipeline stage and one micro-batch; `step_ms` is the time a token takes through all `pp` stages.
Parallelism (tp/dp/ep/pp/dcp), quantisation (kernels.gemm_dtype, the checkpoint's formats), fusion, speculative
decoding and overlap are transforms in the op builders below: each changes ops (shapes, bytes, counts, collectives)
or the rate they are costed at (kernels.*, the engine's auto kernel).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from autotune.perf import comm, precision, rates
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


@dataclass
class Cost:
    compute_s: float = 0.0
    memory_s: float = 0.0  # memory-bound (or minimum-latency-bound) time beyond the compute time of the same ops
    comm_s: dict[str, float] = field(default_factory=dict)
    overlap_saved_s: float = 0.0
    by_rate: dict[tuple[str, str, str], float] = field(default_factory=dict)  # (class, dtype, bucket) -> s

    def add_comm(self, name: str, seconds: float) -> None:
        if seconds > 0:
            self.comm_s[name] = self.comm_s.get(name, 0.0) + seconds

    def add(self, other: Cost, times: float = 1.0) -> None:
        self.compute_s += other.compute_s * times
        self.memory_s += other.memory_s * times
        self.overlap_saved_s += other.overlap_saved_s * times
        for name, seconds in other.comm_s.items():
            self.add_comm(name, seconds * times)
        by_rate = self.by_rate
        for key, seconds in other.by_rate.items():
            by_rate[key] = by_rate.get(key, 0.0) + seconds * times

    @property
    def time_s(self) -> float:
        return self.compute_s + self.memory_s + sum(self.comm_s.values()) - self.overlap_saved_s


@dataclass(frozen=True)
class Context:
    """What the op builders and the costing pass share for one step of one phase."""

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


def context(model: ModelSpec, phase: PhasePlan, engine: str, hw: HardwareProfile, stage: tuple[int, ...]) -> Context:
    dense_dtype = precision.compute_dtype(model, phase, hw, "dense")
    expert_dtype = precision.compute_dtype(model, phase, hw, "expert")
    moe = phase.kernels.moe
    if moe == "auto" and model.is_moe:
        deepep = phase.comm.all2all == "deepep" and phase.ep > 1
        moe = eff.auto_moe_kernel(engine, expert_dtype, hw.gpu.arch, deepep, phase.ep)
    return Context(
        model,
        phase,
        engine,
        hw,
        stage,
        rates.rates_table(hw),
        dense_dtype,
        expert_dtype,
        eff.LINEAR_VARIANT_SPEED.get(phase.kernels.linear, 1.0) if dense_dtype == "fp8" else 1.0,
        eff.MOE_VARIANT_SPEED.get(moe, 1.0),
        eff.ATTENTION_VARIANT_SPEED.get(phase.kernels.attention, 1.0),
        comm.pcie_ipc_max_bytes(phase, model.hidden_size * precision.ACTIVATION_BYTES),
        precision.kv_bytes_per_elem(model, phase),
    )


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


def _attention_ops(ops: list, c: Context, att: AttentionSpec, x: StepInput, tokens: float) -> None:
    """Projections (split over TP, but MLA's q_a / kv_a replicated: `replicated_params`), then the attention
    kernels: decode rows and prefill rows are separate kernels (decode reads each sequence's KV once)."""
    phase, hidden = c.phase, c.model.hidden_size
    tp, dp = phase.tp, phase.dp
    w_bytes = DTYPE_BYTES[precision.dense_dtype(c.model, phase)]
    rows = tokens / dp  # each rank of a DP group holds its own requests
    split = att.params - att.replicated_params
    ops.append(
        _gemm(
            "tp",
            c.dense_dtype,
            rows,
            split / tp,
            hidden,
            2 * split * rows / tp,
            split * w_bytes / tp,
            3 if att.replicated_params else 2,
            c.dense_speed,
        )
    )
    if att.replicated_params:  # every TP rank runs the whole down-projection on all its group's rows
        rep = att.replicated_params
        ops.append(
            _gemm(
                "tp (replicated q_a/kv_a)",
                c.dense_dtype,
                rows,
                rep,
                hidden,
                2 * rep * rows,
                rep * w_bytes,
                1,
                c.dense_speed,
            )
        )
    heads_per_rank = att.num_heads / tp
    kv_shard = 1 if att.latent_shared else min(tp, att.num_kv_heads)
    kv_elem_bytes = c.kv_elem_bytes
    index_heads_per_rank = att.index_heads / tp
    if x.decode_seqs:
        seqs = x.decode_seqs / dp
        queries = seqs * x.decode_width  # verified tokens attend the same KV as their sequence
        # decode context parallel: each of the dcp ranks holds and reads 1/dcp of every sequence's latent KV
        # and runs all its group's heads over it (the heads' partial outputs are combined: a dcp all-gather)
        decode_shard = kv_shard * (phase.dcp if att.latent_shared else 1)
        entries, scored = attended_entries(att, x.decode_ctx), indexer_scored(att, x.decode_ctx)
        flops = 2 * heads_per_rank * (att.score_dim_decode or att.score_dim) * entries * queries
        flops += 2 * index_heads_per_rank * att.index_dim * scored * queries
        per_seq = (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes
        ops.append(
            Op(
                "attention",
                "bf16",
                "decode",
                queries,
                0.0,
                0.0,
                flops,
                per_seq / decode_shard * seqs,
                1.0,
                "kernels.attention",
                c.attention_speed,
            )
        )
    if x.prefill_tokens:
        tokens_per_rank = x.prefill_tokens / dp
        entries, scored = attended_entries(att, x.prefill_ctx), indexer_scored(att, x.prefill_ctx)
        flops = 2 * heads_per_rank * att.score_dim * entries * tokens_per_rank
        flops += 2 * index_heads_per_rank * att.index_dim * scored * tokens_per_rank
        nbytes = (entries * att.kv_read_elems_per_token + scored * att.index_dim) * kv_elem_bytes / kv_shard
        ops.append(
            Op(
                "attention",
                "bf16",
                "prefill",
                tokens_per_rank,
                0.0,
                0.0,
                flops,
                nbytes,
                1.0,
                "kernels.attention",
                c.attention_speed,
            )
        )


def _ffn_ops(ops: list, c: Context, ffn: FfnSpec, tokens: float) -> None:
    """Dense FFN or shared experts (a GEMM pair), then routed experts: one grouped GEMM op whose rows per expert
    come from the routing (tokens x top_k / experts), the weights of the distinct experts the batch hits, and the
    permute / unpermute of the routed rows (tokens x top_k x hidden x 2 B, each way)."""
    phase, model, hidden = c.phase, c.model, c.model.hidden_size
    ranks = phase.tp * phase.dp
    w_bytes = DTYPE_BYTES[precision.dense_dtype(model, phase)]
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
                ffn.params * w_bytes / shards,
                2,
                c.dense_speed,
            )
        )
    if ffn.kind != "moe":
        return
    e_bytes = DTYPE_BYTES[precision.expert_dtype(model, phase)]
    imbalance = 1.0
    if phase.ep > 1:
        excess = eff.EP_IMBALANCE - 1.0
        imbalance += excess * eff.EPLB_RESIDUAL_IMBALANCE if phase.eplb else excess
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


def layer_ops(c: Context, layer: LayerSpec, x: StepInput) -> list[Op]:
    """The ops one layer of this kind runs on the busiest GPU for step input `x`."""
    if not layer.in_prefill:
        x = StepInput(x.decode_seqs, x.decode_ctx, decode_width=x.decode_width)
    tokens = x.decode_seqs * x.decode_width + x.prefill_tokens
    ops: list[Op] = []
    if tokens <= 0:
        return ops
    phase, hidden = c.phase, c.model.hidden_size
    _attention_ops(ops, c, layer.attention, x, tokens)
    dense = dense_layout(layer.ffn, phase, c.engine)
    _ffn_ops(ops, c, layer.ffn, tokens)
    _comm_ops(ops, c, layer.ffn, tokens, dense)
    # residual add + RMSNorm kernels (each fused with its residual add in vLLM/SGLang): bf16 reads of the residual
    # and the input, writes of both; the ones fused into an all-reduce (fusion.allreduce_rmsnorm) are gone
    kernels = eff.NORMS_PER_LAYER - _fused_norms(layer.ffn, phase, dense)
    rows = tokens / phase.dp
    if kernels > 0:
        nbytes = kernels * 4 * rows * hidden * precision.ACTIVATION_BYTES
        ops.append(Op("norm", "bf16", "any", rows, 0.0, 0.0, 0.0, nbytes, float(kernels), "fusion"))
    if phase.dcp > 1 and x.decode_seqs and layer.attention.latent_shared:
        # decode context parallel: the partial attention outputs of the decode rows gathered over the dcp ranks
        nbytes = x.decode_seqs * x.decode_width / phase.dp * hidden * precision.ACTIVATION_BYTES
        ops.append(_collective("dcp_allgather", c.stage[: phase.dcp], nbytes, "dcp"))
    return ops


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
            head_params * DTYPE_BYTES["bf16"] / shards,
        )
    ]
    if over_dp and rows:
        act = precision.ACTIVATION_BYTES
        ops.append(_collective("allgather", c.stage, rows * model.hidden_size * act, "dp_lm_head"))
        ops.append(_collective("allgather", c.stage, rows * model.vocab_size * act, "dp_lm_head"))
    if rows:  # top-k / top-p sampling over the rank's logits (fp32 reads)
        ops.append(Op("sampling", "bf16", "any", m, 0.0, 0.0, 0.0, m * model.vocab_size / phase.tp * 4, 1.0, "engine"))
    return ops


def cost_ops(c: Context, ops: list[Op]) -> Cost:
    """The costing pass: op time = max(flops / rate, bytes / bandwidth) / kernel speed, never below count x the
    kernel's minimum latency; collectives on the topology (comm.py)."""
    cost = Cost()
    table, hw, pc = c.table, c.hw, c.phase.comm
    entries = table.entries
    by_rate = cost.by_rate
    for op in ops:
        if op.kind == "collective":
            name = op.bucket
            if name == "allreduce":
                algo, seconds = comm.all_reduce(hw, op.group, op.nbytes, pc, c.ipc_max)
                name = f"allreduce:{algo}"
            elif name in ("allgather", "dcp_allgather"):
                seconds = comm.all_gather_s(hw, op.group, op.nbytes, pc)
            elif name == "reducescatter":
                seconds = comm.reduce_scatter_s(hw, op.group, op.nbytes, pc)
            elif name == "all2all":
                seconds = comm.all_to_all_s(hw, op.group, op.nbytes, pc)
            else:  # pp_send
                seconds = comm.send_s(hw, op.group[0], op.group[1], op.nbytes, pc)
            cost.add_comm(name, seconds)
            key = ("collective", "", op.bucket)
        else:
            key = (op.kind, op.dtype, op.bucket)
            r = entries.get(key) or table.get(*key)
            t_compute = op.flops / (r.tflops * TFLOP) / op.speed if op.flops else 0.0
            t_memory = op.nbytes / (r.gbs * GB) / op.speed
            seconds = max(t_compute, t_memory, r.min_us * 1e-6 * op.count)
            cost.compute_s += t_compute
            cost.memory_s += seconds - t_compute
        by_rate[key] = by_rate.get(key, 0.0) + seconds
    return cost


def _layer_cost(c: Context, layer: LayerSpec, x: StepInput) -> Cost:
    cost = cost_ops(c, layer_ops(c, layer, x))
    if c.phase.overlap.two_batch:  # overlap transform: communication hidden behind the other micro-batch
        busy = cost.compute_s + cost.memory_s
        cost.overlap_saved_s = min(busy, sum(cost.comm_s.values())) * (1 - OVERLAP_RESIDUE)
    return cost


def _draft_cost(c: Context, x: StepInput) -> Cost:
    """Drafting the next step's tokens: k sequential passes of one token per decoding sequence through one extra
    decoder layer shaped like the model's last layer (its own KV at the sequence's context) and the LM head.
    That is MTP (DeepSeek-V3 / GLM-5 nextn layers). DSpark (V4.1: 3 stages of 128 experts drafting a block in
    parallel, shared/reference/models.md) has no shape in ModelSpec: it is costed like MTP, a stand-in."""
    one = StepInput(x.decode_seqs, x.decode_ctx)
    draft = _layer_cost(c, c.model.layers[-1], one)
    draft.add(cost_ops(c, head_ops(c, x.decode_seqs)))
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
    c = context(model, phase, engine, hw, gpus[:ranks])
    width = speculation(phase)[0] if x.decode_seqs else 1
    if width > 1:
        x = replace(x, decode_width=width)
    total = Cost()
    for layer, count in layer_groups(model):
        total.add(_layer_cost(c, layer, x), count / phase.pp)
    # LM head on sampled positions only: every verified token of a decoding sequence, the chunk's last prompt token
    total.add(cost_ops(c, head_ops(c, x.decode_seqs * width + (1 if x.prefill_tokens else 0))), 1 / phase.pp)
    launch_us = eff.PREFILL_LAUNCH_US_PER_LAYER if x.prefill_tokens else eff.DECODE_LAUNCH_US_PER_LAYER
    launch_s = launch_us * 1e-6 * model.num_layers / phase.pp
    if width > 1:  # drafting runs once per step, on the last stage
        total.add(_draft_cost(c, x), 1 / phase.pp)
        launch_s += (width - 1) * eff.DECODE_LAUNCH_US_PER_LAYER * 1e-6 / phase.pp
    if phase.pp > 1:
        rows = x.decode_seqs * width + x.prefill_tokens
        hand_off = rows / phase.dp * model.hidden_size * precision.ACTIVATION_BYTES
        total.add(cost_ops(c, [_collective("pp_send", (gpus[ranks - 1], gpus[ranks]), hand_off, "pp")]))
    stages = phase.pp
    gpu_ms = (total.time_s + launch_s) * stages * 1e3
    overhead_ms = eff.scheduler_overhead_ms(engine, phase.pp, gpu_ms)
    return StepBreakdown(
        phase=label,
        batch_tokens=int(round(x.decode_seqs * width + x.prefill_tokens)),
        step_ms=gpu_ms + overhead_ms,
        compute_ms=total.compute_s * stages * 1e3,
        memory_ms=total.memory_s * stages * 1e3,
        comm_ms={k: v * stages * 1e3 for k, v in sorted(total.comm_s.items())},
        bubble_ms=0.0,
        overlap_saved_ms=total.overlap_saved_s * stages * 1e3,
        launch_ms=launch_s * stages * 1e3 + overhead_ms,
        rates_ms={"/".join(k): v * stages * 1e3 for k, v in total.by_rate.items()},
    )
