"""Cost of one forward step of one engine instance: the op list one step runs on the busiest GPU (perf/oplist.py),
then a costing pass over it with the box's rates table (perf/rates.py) and collectives on the topology
(perf/comm.py). `step_ms` is the time a token takes through all `pp` stages.

`step_fn` resolves a phase's choices once (opcore.Context) and returns the step cost as a function of the step
input, which is what serving.py evaluates at every candidate operating point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autotune.capability.profiles import profile
from autotune.perf import ascend, comm, precision
from autotune.perf import efficiency as eff
from autotune.perf.layers import attended_entries, indexer_scored, layer_groups
from autotune.perf.memo import BoundedMemo
from autotune.perf.opcore import Context, Op, StepInput, _collective, context
from autotune.perf.oplist import (
    attention_ops,
    dcp_ops,
    ffn_comm_ops,
    ffn_kernel_ops,
    ffn_norm_ops,
    ffn_ops,
    head_ops,
    layer_input,
    layer_ops,
    speculation,
    step_tokens,
)
from autotune.perf.routing import distinct_experts
from autotune.perf.sharding import dense_layout, dense_shards, head_over_dp
from autotune.specs import AttentionSpec, FfnSpec, HardwareProfile, LayerSpec, ModelSpec, PhasePlan, StepBreakdown
from autotune.specs.hardware import on_fabric

__all__ = [  # the op list's names stay importable from here (tests, memory.py, calibration_check.py)
    "Context",
    "Cost",
    "Op",
    "StepInput",
    "attended_entries",
    "context",
    "cost_ops",
    "dense_layout",
    "dense_shards",
    "distinct_experts",
    "head_ops",
    "head_over_dp",
    "indexer_scored",
    "layer_groups",
    "layer_ops",
    "speculation",
    "step_cost",
    "step_fn",
]

GB = 1e9
TFLOP = 1e12
OVERLAP_RESIDUE = 0.1  # two-batch overlap still pays this share of the shorter of compute and communication
MEMO_MAX = 4096  # entries of each per-Context memo (all-reduces, FFN halves) before it is cleared
ATTENTION_MEMO_MAX = 16384  # entries of the cross-plan memo of costed attention halves (_attention_terms)
FFN_MEMO_MAX = 16384  # entries of the cross-plan memo of costed FFN kernels (_ffn_kernel_terms)


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
        comm_s = self.comm_s
        for name, seconds in other.comm_s.items():
            seconds *= times
            if seconds > 0:  # add_comm, inlined: this runs for every layer kind of every step
                comm_s[name] = comm_s.get(name, 0.0) + seconds
        by_rate = self.by_rate
        for key, seconds in other.by_rate.items():
            by_rate[key] = by_rate.get(key, 0.0) + seconds * times

    @property
    def time_s(self) -> float:
        return self.compute_s + self.memory_s + sum(self.comm_s.values()) - self.overlap_saved_s


def collective_s(c: Context, op: Op) -> tuple[str, float]:
    """(name it is reported under, seconds) of a collective op on the topology (comm.py). All-reduces are
    remembered per Context by group and bytes (every layer kind of a step issues the same ones); the other
    collectives are linear in bytes on their group (comm.nccl_cost_fn, resolved once per Context)."""
    name = op.bucket
    if name == "allreduce":
        key = (op.group, op.nbytes)
        hit = c.allreduce_memo.get(key)
        if hit is None:
            fn = c.comm_fns.get((name, op.group))
            if fn is None:
                fn = c.comm_fns[(name, op.group)] = comm.all_reduce_fn(c.hw, op.group, c.phase.comm, c.ipc_max)
            algo, seconds = fn(op.nbytes)
            if len(c.allreduce_memo) >= MEMO_MAX:
                c.allreduce_memo.clear()
            hit = c.allreduce_memo[key] = (f"allreduce:{algo}", seconds * c.table.collective_scale)
        return hit
    fn = c.comm_fns.get((name, op.group))
    if fn is None:
        fn = c.comm_fns[(name, op.group)] = comm.nccl_cost_fn(c.hw, name, op.group, c.nccl)
    return name, fn(op.nbytes) * c.table.collective_scale


def _hccl_s(c: Context, op: Op, platform: dict[str, str]) -> tuple[str, float]:
    """vllm-ascend collectives: HCCL on the group's HCCS mesh or PCIe path (perf/ascend.py)."""
    hw, group = c.hw, op.group
    pairs = [(i, j) for i in group for j in group if i != j]
    fabric = bool(pairs) and all(on_fabric(hw.links[i][j]) for i, j in pairs)
    if fabric:
        gbs = min(hw.accelerators[i].nvlink_gbs for i in group)
    else:
        gbs = min(hw.accelerators[i].pcie_gbs for i in group)
        labels = {hw.links[i][j] for i, j in pairs}
        if "PIX" in labels and hw.pcie_switch_uplink_gbs:  # chips behind one card switch share its uplink
            gbs = min(gbs, hw.pcie_switch_uplink_gbs / 2)
        if "SYS" in labels and hw.host.inter_socket_gbs:
            gbs = min(gbs, hw.host.inter_socket_gbs)
    seconds = ascend.hccl_s(op.bucket, op.nbytes, len(group), fabric, gbs, platform) * c.table.collective_scale
    return f"hccl:{op.bucket}", seconds


def _rate_terms(c: Context, key: tuple[str, str, str]) -> tuple[float, float, float]:
    """(FLOP/s, B/s, minimum seconds of one kernel) of a rates-table key, remembered per Context."""
    r = c.table.get(*key)
    terms = c.rate_terms[key] = (r.tflops * TFLOP, r.gbs * GB, r.min_us * 1e-6)
    return terms


def cost_ops(c: Context, ops: list[Op], into: Cost | None = None, times: float = 1.0) -> Cost:
    """The costing pass: op time = count x the kernel's fixed latency (launch, prologue, tail: the rate's
    `min_us`) + max(flops / rate / kernel speed, bytes / bandwidth), the kernel-variant speed dividing the memory
    term too for attention only (a GEMM / grouped-MoE variant streams the same weights at the same bandwidth);
    collectives on the topology (comm.py). Adds `times` x the ops' cost to `into` (a new Cost when None) and
    returns it: a step accumulates its layer kinds without intermediate Costs."""
    cost = Cost() if into is None else into
    terms, comm_s, by_rate = c.rate_terms, cost.comm_s, cost.by_rate
    platform = c.phase.platform if profile(c.engine).ascend_platform else None  # vllm-ascend (perf/ascend.py)
    compute_s = memory_s = 0.0
    for op in ops:
        key = op[:3]  # (class, dtype, bucket); collectives: ("collective", "", the collective)
        if op.kind == "collective":
            name, seconds = collective_s(c, op) if platform is None else _hccl_s(c, op, platform)
            seconds *= times
            if seconds > 0:
                comm_s[name] = comm_s.get(name, 0.0) + seconds
        else:
            rate = terms.get(key) or _rate_terms(c, key)
            flops_per_s, bytes_per_s, min_s = rate
            speed, share = op.speed, 1.0
            if platform is not None:
                speed *= ascend.op_speed(platform, op.kind, op.dtype, c.phase.tp)
                share = ascend.op_share(platform, op.kind, c.phase.tp)
            t_compute = op.flops * share / flops_per_s / speed if op.flops else 0.0
            t_memory = op.nbytes * share / bytes_per_s / (speed if op.kind == "attention" else 1.0)
            seconds = (max(t_compute, t_memory) + min_s * op.count) * times
            t_compute *= times
            compute_s += t_compute
            memory_s += seconds - t_compute
        by_rate[key] = by_rate.get(key, 0.0) + seconds
    cost.compute_s += compute_s
    cost.memory_s += memory_s
    return cost


def _op_terms(c: Context, ops: list[Op]) -> tuple[tuple, ...]:
    """cost_ops's per-op arithmetic before the `times` scaling, one (key, collective name or None, seconds,
    compute seconds) per op: _add_terms adds them as cost_ops adds the ops (same float operations, same order)."""
    terms, out = c.rate_terms, []
    platform = c.phase.platform if profile(c.engine).ascend_platform else None
    for op in ops:
        key = op[:3]
        if op.kind == "collective":
            name, seconds = collective_s(c, op) if platform is None else _hccl_s(c, op, platform)
            out.append((key, name, seconds, 0.0))
            continue
        flops_per_s, bytes_per_s, min_s = terms.get(key) or _rate_terms(c, key)
        speed, share = op.speed, 1.0
        if platform is not None:
            speed *= ascend.op_speed(platform, op.kind, op.dtype, c.phase.tp)
            share = ascend.op_share(platform, op.kind, c.phase.tp)
        t_compute = op.flops * share / flops_per_s / speed if op.flops else 0.0
        t_memory = op.nbytes * share / bytes_per_s / (speed if op.kind == "attention" else 1.0)
        out.append((key, None, max(t_compute, t_memory) + min_s * op.count, t_compute))
    return tuple(out)


def _add_terms(cost: Cost, op_terms: tuple[tuple, ...], times: float) -> Cost:
    """Add `times` x the ops of `op_terms` (_op_terms) to `cost`, exactly as cost_ops adds them."""
    comm_s, by_rate = cost.comm_s, cost.by_rate
    compute_s = memory_s = 0.0
    for key, name, seconds, t_compute in op_terms:
        seconds *= times
        if name is not None:
            if seconds > 0:
                comm_s[name] = comm_s.get(name, 0.0) + seconds
        else:
            t_compute *= times
            compute_s += t_compute
            memory_s += seconds - t_compute
        by_rate[key] = by_rate.get(key, 0.0) + seconds
    cost.compute_s += compute_s
    cost.memory_s += memory_s
    return cost


_ATTENTION_TERMS = BoundedMemo(ATTENTION_MEMO_MAX)


def _attention_terms(c: Context, att: AttentionSpec, x: StepInput) -> tuple[tuple, ...]:
    """_op_terms of attention_ops(c, att, x), remembered across plans: plans that differ in what the attention half
    does not read (FFN, experts, collectives, batching, engine) share it. The key is what oplist.attention_ops and
    _op_terms read of the Context: the model (by identity; `att` is one of its layer kinds), the rates table (by
    identity) and SM count, tp / dp / dcp, the dense and KV dtypes' resolved sizes and kernel speeds, and the
    vllm-ascend platform options when the engine runs on it. attention_ops issues no collective (dcp_ops does)."""
    phase = c.phase
    platform = tuple(sorted(phase.platform.items())) if profile(c.engine).ascend_platform else None
    key = (
        id(att), x, id(c.model), id(c.table), c.sms, phase.tp, phase.dp, phase.dcp, platform,
        c.dense_dtype, c.dense_speed, c.dense_bytes, c.dense_quant_bytes, c.act_in_bytes,
        c.kv_elem_bytes, c.attention_speed,
    )  # fmt: skip
    hit = _ATTENTION_TERMS.get(key)
    if hit is not None and hit[0] is att and hit[1] is c.model and hit[2] is c.table:
        return hit[3]
    op_terms = _op_terms(c, attention_ops(c, att, x))
    if all(name is None for _, name, _, _ in op_terms):  # a collective's cost depends on more than the key
        _ATTENTION_TERMS.put(key, (att, c.model, c.table, op_terms))  # the objects keep their ids from reuse
    return op_terms


def _ffn_cost(c: Context, ffn: FfnSpec, tokens: float) -> Cost:
    """The costed FFN half of a layer (oplist.ffn_ops), remembered per Context: layer kinds that differ only in
    attention (V4's compressed / sparse / windowed layers) share it within a step. Callers must not mutate it."""
    key = (ffn, tokens)  # by value: equal FfnSpecs of different layer kinds are different objects
    hit = c.ffn_memo.get(key)
    if hit is None:
        if len(c.ffn_memo) >= MEMO_MAX:
            c.ffn_memo.clear()
        hit = c.ffn_memo[key] = _shared_ffn_cost(c, ffn, tokens)
    return hit


_FFN_KERNEL_TERMS = BoundedMemo(FFN_MEMO_MAX)


def _shared_ffn_cost(c: Context, ffn: FfnSpec, tokens: float) -> Cost:
    """_overlapped_shared(c, ffn, ffn_ops(c, ffn, tokens)). Off vllm-ascend that is cost_ops of the FFN's kernels,
    collectives and norms (oplist.ffn_ops' order): the kernels' and norms' _op_terms are remembered across plans
    (_ffn_kernel_terms), the collectives (which read the stage's GPUs, comm and NCCL settings) are costed per
    Context, and _add_terms adds all three in that order, as cost_ops would."""
    if tokens <= 0 or profile(c.engine).ascend_platform:
        return _overlapped_shared(c, ffn, ffn_ops(c, ffn, tokens))
    kernels, norms = _ffn_kernel_terms(c, ffn, tokens)
    return _add_terms(Cost(), kernels + _op_terms(c, ffn_comm_ops(c, ffn, tokens)) + norms, 1.0)


def _ffn_kernel_terms(c: Context, ffn: FfnSpec, tokens: float) -> tuple[tuple, tuple]:
    """(_op_terms of oplist.ffn_kernel_ops, of oplist.ffn_norm_ops), off vllm-ascend, remembered across plans. The
    key is what those builders and _op_terms read: the model (by identity) and FFN (by value), the rates table
    (by identity) and SM count, tp / dp / ep, dense_dp and the engine profile's tp_spans_dp (the dense layout),
    fusion.allreduce_rmsnorm and comm.all2all (the fused norms), the dense and expert dtypes' resolved sizes and
    kernel speeds, and the EP imbalance (oplist.ep_imbalance)."""
    phase = c.phase
    key = (
        ffn, tokens, id(c.model), id(c.table), c.sms, phase.tp, phase.dp, phase.ep, phase.dense_dp,
        profile(c.engine).tp_spans_dp, phase.fusion.get("allreduce_rmsnorm", False), phase.comm.all2all,
        c.dense_dtype, c.dense_speed, c.dense_bytes, c.dense_quant_bytes, c.act_in_bytes,
        c.expert_dtype, c.expert_bytes, c.expert_quant_bytes, c.moe_speed, c.imbalance,
    )  # fmt: skip
    hit = _FFN_KERNEL_TERMS.get(key)
    if hit is not None and hit[0] is c.model and hit[1] is c.table:
        return hit[2]
    terms = (_op_terms(c, ffn_kernel_ops(c, ffn, tokens)), _op_terms(c, ffn_norm_ops(c, ffn, tokens)))
    _FFN_KERNEL_TERMS.put(key, (c.model, c.table, terms))  # the objects keep their ids from being reused
    return terms


def _overlapped_shared(c: Context, ffn: FfnSpec, ops: list) -> Cost:
    """cost_ops, less what vllm-ascend's multistream shared experts hide: the shared-expert GEMM (the first op of a
    MoE layer with shared experts, oplist._ffn_ops) runs beside the routed experts (perf/ascend.py)."""
    if not (
        profile(c.engine).ascend_platform
        and ffn.kind == "moe"
        and ffn.params
        and ascend.overlaps_shared_experts(c.phase.platform)
    ):
        return cost_ops(c, ops)
    shared, rest = cost_ops(c, ops[:1]), cost_ops(c, ops[1:])
    routed = next((op for op in ops if op.kind == "grouped_moe"), None)
    routed_s = cost_ops(c, [routed]).time_s if routed else 0.0
    total = Cost()
    total.add(shared)
    total.add(rest)
    total.overlap_saved_s += min(shared.time_s, routed_s) * (1 - ascend.MULTISTREAM_RESIDUE)
    return total


def _add_layer(total: Cost, c: Context, layer: LayerSpec, x: StepInput, times: float) -> None:
    """Add `times` x one layer's cost for its own input `x` (oplist.layer_input) to `total`: layer_ops costed as
    the attention half, the FFN half (_ffn_cost) and the dcp gather, less what two-batch overlap hides."""
    att = layer.attention
    ffn_half = _ffn_cost(c, layer.ffn, step_tokens(x))
    dcp = dcp_ops(c, att, x)
    if c.phase.overlap.two_batch:  # overlap transform: communication hidden behind the other micro-batch
        parts = [_add_terms(Cost(), _attention_terms(c, att, x), 1.0), ffn_half] + ([cost_ops(c, dcp)] if dcp else [])
        for part in parts:
            total.add(part, times)
        busy = sum(part.compute_s + part.memory_s for part in parts)
        comm_s = sum(sum(part.comm_s.values()) for part in parts)
        total.overlap_saved_s += min(busy, comm_s) * (1 - OVERLAP_RESIDUE) * times
        return
    _add_terms(total, _attention_terms(c, att, x), times)
    total.add(ffn_half, times)
    if dcp:
        cost_ops(c, dcp, total, times)


def _ffn_groups(groups: tuple[tuple[LayerSpec, int], ...]) -> tuple[tuple[FfnSpec, bool, int], ...]:
    """(FFN, in_prefill, layers) of the layer kinds merged by FFN and input: without two-batch overlap a step adds
    each distinct FFN half once, times all the layers that run it (V4's layer kinds differ in attention only)."""
    counts: dict[tuple[FfnSpec, bool], int] = {}
    for layer, count in groups:
        key = (layer.ffn, layer.in_prefill)
        counts[key] = counts.get(key, 0) + count
    return tuple((ffn, in_prefill, count) for (ffn, in_prefill), count in counts.items())


def _add_draft(total: Cost, c: Context, x: StepInput, times: float) -> None:
    """Add `times` x drafting the next step's tokens to `total`: k sequential passes of one token per decoding
    sequence through one extra decoder layer shaped like the model's last layer (its own KV at the sequence's
    context) and the LM head. That is MTP (DeepSeek-V3 / GLM-5 nextn layers). DSpark (V4.1: 3 stages of 128
    experts drafting a block in parallel, shared/reference/models.md) has no shape in ModelSpec: it is costed like
    MTP, a stand-in."""
    one = StepInput(x.decode_seqs, x.decode_ctx)
    passes = (x.decode_width - 1) * times
    _add_layer(total, c, c.model.layers[-1], layer_input(c.model.layers[-1], one), passes)
    cost_ops(c, head_ops(c, x.decode_seqs), total, passes)


_RATE_NAMES: dict[tuple[str, str, str], str] = {}  # rates-table key -> "class/dtype/bucket"


def _rate_name(key: tuple[str, str, str]) -> str:
    """The name StepBreakdown.rates_ms reports a rates-table key under, joined once per key."""
    name = _RATE_NAMES.get(key)
    if name is None:
        name = _RATE_NAMES[key] = "/".join(key)
    return name


def step_fn(
    model: ModelSpec, phase: PhasePlan, engine: str, hw: HardwareProfile, gpus: tuple[int, ...], label: str
) -> Callable[[StepInput], StepBreakdown]:
    """The step cost of the instance on `gpus` (tp*dp*pp of them, stage-major) as a function of the step input;
    the phase's choices are resolved once (opcore.Context) for all the steps serving.py evaluates."""
    ranks = phase.stage_ranks
    c = context(model, phase, engine, hw, gpus[:ranks])
    groups = layer_groups(model)
    spec_width = speculation(phase)[0]
    hand_off_group = (gpus[ranks - 1], gpus[ranks]) if phase.pp > 1 else ()
    ffn_groups = _ffn_groups(groups)
    return lambda x: _step(c, groups, ffn_groups, spec_width, hand_off_group, x, label)


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
    return step_fn(model, phase, engine, hw, gpus, label)(x)


def _step(
    c: Context,
    groups: tuple[tuple[LayerSpec, int], ...],
    ffn_groups: tuple[tuple[FfnSpec, bool, int], ...],
    spec_width: int,
    hand_off_group: tuple[int, ...],
    x: StepInput,
    label: str,
) -> StepBreakdown:
    model, phase, engine = c.model, c.phase, c.engine
    width = spec_width if x.decode_seqs else 1
    if width > 1:
        x = StepInput(x.decode_seqs, x.decode_ctx, x.prefill_tokens, x.prefill_ctx, width)
    decode_only = StepInput(x.decode_seqs, x.decode_ctx, decode_width=x.decode_width) if x.prefill_tokens else x
    inputs = {True: x, False: decode_only}  # layer_input (a step without prompt tokens is its own decode part)
    total = Cost()
    if phase.overlap.two_batch:  # overlap is per layer kind: each kind's halves together (_add_layer)
        for layer, count in groups:
            _add_layer(total, c, layer, inputs[layer.in_prefill], count / phase.pp)
    else:
        for layer, count in groups:  # the attention halves (and dcp gathers) of the layer kinds, as _add_layer
            layer_x, times = inputs[layer.in_prefill], count / phase.pp
            _add_terms(total, _attention_terms(c, layer.attention, layer_x), times)
            if phase.dcp > 1:
                cost_ops(c, dcp_ops(c, layer.attention, layer_x), total, times)
        for ffn, in_prefill, count in ffn_groups:
            total.add(_ffn_cost(c, ffn, step_tokens(inputs[in_prefill])), count / phase.pp)
    # LM head on sampled positions only: every verified token of a decoding sequence, the chunk's last prompt token
    head = cost_ops(c, head_ops(c, x.decode_seqs * width + (1 if x.prefill_tokens else 0)))
    total.add(head, 1 / phase.pp)
    launch_us = eff.PREFILL_LAUNCH_US_PER_LAYER if x.prefill_tokens else eff.DECODE_LAUNCH_US_PER_LAYER
    if profile(engine).ascend_platform and not x.prefill_tokens:
        launch_us = ascend.decode_launch_us(phase.platform)
    launch_s = launch_us * 1e-6 * model.num_layers / phase.pp
    if width > 1:  # drafting runs once per step, on the last stage
        _add_draft(total, c, x, 1 / phase.pp)
        launch_s += (width - 1) * eff.DECODE_LAUNCH_US_PER_LAYER * 1e-6 / phase.pp
    if phase.pp > 1:
        rows = x.decode_seqs * width + x.prefill_tokens
        hand_off = rows / phase.dp * model.hidden_size * precision.ACTIVATION_BYTES
        total.add(cost_ops(c, [_collective("pp_send", hand_off_group, hand_off, "pp")]))
    stages, names = phase.pp, _RATE_NAMES
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
        rates_ms={(names.get(k) or _rate_name(k)): v * stages * 1e3 for k, v in total.by_rate.items()},
    )
