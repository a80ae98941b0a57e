"""Cost of one forward step of one engine instance: the op list one step runs on the busiest GPU (perf/oplist.py),
then a costing pass over it with the box's rates table (perf/rates.py) and collectives on the topology
(perf/comm.py). `step_ms` is the time a token takes through all `pp` stages.

`step_fn` resolves a phase's choices once (opcore.Context) and returns the step cost as a function of the step
input, which is what serving.py evaluates at every candidate operating point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from autotune.capability.profiles import profile
from autotune.perf import ascend, halves, precision
from autotune.perf import efficiency as eff
from autotune.perf.costing import MEMO_MAX, Cost, _add_terms, _op_terms, cost_ops
from autotune.perf.halves import add_attention_halves, attention_terms, ffn_kernel_terms
from autotune.perf.layers import attended_entries, indexer_scored, layer_groups
from autotune.perf.opcore import Context, Op, StepInput, _collective, context
from autotune.perf.oplist import (
    dcp_ops,
    ffn_comm_ops,
    ffn_ops,
    head_ops,
    layer_input,
    layer_ops,
    speculation,
    step_tokens,
)
from autotune.perf.routing import distinct_experts
from autotune.perf.sharding import dense_layout, dense_shards, head_over_dp
from autotune.specs import FfnSpec, HardwareProfile, LayerSpec, ModelSpec, PhasePlan, StepBreakdown

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

OVERLAP_RESIDUE = 0.1  # two-batch overlap still pays this share of the shorter of compute and communication
STEP_MEMO_MAX = 16384  # step costs remembered across plans (step_fn), by phase and step input
STEP_FREE = ("gpus", "replicas", "batching")  # PhasePlan fields a step reads only through its Context (step_fn)
_STEPS = halves.BoundedMemo(STEP_MEMO_MAX)  # (step_fn's prefix number, step input) -> StepBreakdown


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


def _shared_ffn_cost(c: Context, ffn: FfnSpec, tokens: float) -> Cost:
    """_overlapped_shared(c, ffn, ffn_ops(c, ffn, tokens)). Off vllm-ascend that is cost_ops of the FFN's kernels,
    collectives and norms (oplist.ffn_ops' order): the kernels' and norms' _op_terms are remembered across plans
    (_ffn_kernel_terms), the collectives (which read the stage's GPUs, comm and NCCL settings) are costed per
    Context, and _add_terms adds all three in that order, as cost_ops would."""
    if tokens <= 0 or profile(c.engine).ascend_platform:
        return _overlapped_shared(c, ffn, ffn_ops(c, ffn, tokens))
    kernels, norms = ffn_kernel_terms(c, ffn, tokens)
    return _add_terms(Cost(), kernels + _op_terms(c, ffn_comm_ops(c, ffn, tokens)) + norms, 1.0)


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
        parts = [_add_terms(Cost(), attention_terms(c, att, x), 1.0), ffn_half] + ([cost_ops(c, dcp)] if dcp else [])
        for part in parts:
            total.add(part, times)
        busy = sum(part.compute_s + part.memory_s for part in parts)
        comm_s = sum(sum(part.comm_s.values()) for part in parts)
        total.overlap_saved_s += min(busy, comm_s) * (1 - OVERLAP_RESIDUE) * times
        return
    _add_terms(total, attention_terms(c, att, x), times)
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
    halves.add_head(total, c, x.decode_seqs, passes)


_RATE_NAMES: dict[tuple[str, str, str], str] = {}  # rates-table key -> "class/dtype/bucket"


def _rate_name(key: tuple[str, str, str]) -> str:
    """The name StepBreakdown.rates_ms reports a rates-table key under, joined once per key."""
    name = _RATE_NAMES.get(key)
    if name is None:
        name = _RATE_NAMES[key] = "/".join(key)
    return name


def step_fn(
    model: ModelSpec,
    phase: PhasePlan,
    engine: str,
    hw: HardwareProfile,
    gpus: tuple[int, ...],
    label: str,
    pending: dict | None = None,
) -> Callable[[StepInput], StepBreakdown]:
    """The step cost of the instance on `gpus` (tp*dp*pp of them, stage-major) as a function of the step input;
    the phase's choices are resolved once (opcore.Context) for all the steps serving.py evaluates.

    With `pending` (a dict the caller keeps for one prediction) the steps may come without their rates_ms (None:
    a step's time does not read it, and summing it was a fifth of a step): complete(pending, step) adds it to
    the steps the caller reports. Without, every step comes whole."""
    ranks = phase.stage_ranks
    c = context(model, phase, engine, hw, gpus[:ranks])
    groups = layer_groups(model)
    spec_width = speculation(phase)[0]
    hand_off_group = (gpus[ranks - 1], gpus[ranks]) if phase.pp > 1 else ()
    ffn_groups = _ffn_groups(groups)
    # what _step reads besides x: the Context (the model, the phase, the engine, the box, the stage's GPUs) and
    # the hand-off pair; of the phase, its GPUs only as those, `replicas` not at all and `batching` only as the
    # Context's PCIe-IPC size limit (comm.pcie_ipc_max_bytes)
    prefix = (id(model), id(hw), engine, label, c.stage, hand_off_group, c.ipc_max, halves.plain(phase, STEP_FREE))
    number = halves.number(prefix, (model, hw))
    stages = phase.pp

    def cost(x: StepInput) -> StepBreakdown:
        key = (number, halves.step_input(x))
        hit = _STEPS.get(key)
        if hit is None or hit.rates_ms is None:
            step, total = _step(c, groups, ffn_groups, spec_width, hand_off_group, x, label)
            hit = _STEPS.put(key, _with_rates(step, total, stages))
        return hit

    if pending is None:
        return cost

    def timed(x: StepInput) -> StepBreakdown:
        key = (number, halves.step_input(x))
        hit = _STEPS.get(key)
        if hit is None:
            hit, total = _step(c, groups, ffn_groups, spec_width, hand_off_group, x, label)
            _STEPS.put(key, hit)
            pending[id(hit)] = (hit, total, stages, key)
        elif hit.rates_ms is None:  # remembered without rates by an earlier prediction: cost(x) makes it whole
            pending[id(hit)] = (hit, None, cost, x)
        return hit

    return timed


def complete(pending: dict, step: StepBreakdown) -> StepBreakdown:
    """`step` (from a step_fn given `pending`) with its rates_ms: summed from the step's Cost (Cost.by_rate), or
    the step costed again whole when an earlier prediction remembered it without them. The whole step replaces
    the one remembered, so later predictions find it whole."""
    if step.rates_ms is not None:
        return step
    _, total, how, key = pending[id(step)]
    if total is None:  # (step, None, cost, x)
        return how(key)
    return _STEPS.put(key, _with_rates(step, total, how))


def _with_rates(step: StepBreakdown, total: Cost, stages: int) -> StepBreakdown:
    """The step `_step` returned, with its time per rates-table entry (ms over all `stages`) from `total`."""
    names = _RATE_NAMES
    rates_ms = {(names.get(k) or _rate_name(k)): v * stages * 1e3 for k, v in total.by_rate.items()}
    return replace(step, rates_ms=rates_ms)


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
) -> tuple[StepBreakdown, Cost]:
    """The step at `x` without its rates_ms (None), and the Cost it was summed from (its by_rate: _with_rates)."""
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
    else:  # the attention halves (and dcp gathers) of the layer kinds, as _add_layer, then the FFN halves
        add_attention_halves(total, c, groups, inputs, x)
        for ffn, in_prefill, count in ffn_groups:
            total.add(_ffn_cost(c, ffn, step_tokens(inputs[in_prefill])), count / phase.pp)
    # LM head on sampled positions only: every verified token of a decoding sequence, the chunk's last prompt token
    head = halves.head_cost(c, x.decode_seqs * width + (1 if x.prefill_tokens else 0))
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
    stages = phase.pp
    gpu_ms = (total.time_s + launch_s) * stages * 1e3
    overhead_ms = eff.scheduler_overhead_ms(engine, phase.pp, gpu_ms)
    step = StepBreakdown(
        phase=label,
        batch_tokens=int(round(x.decode_seqs * width + x.prefill_tokens)),
        step_ms=gpu_ms + overhead_ms,
        compute_ms=total.compute_s * stages * 1e3,
        memory_ms=total.memory_s * stages * 1e3,
        comm_ms={k: v * stages * 1e3 for k, v in sorted(total.comm_s.items())},
        bubble_ms=0.0,
        overlap_saved_ms=total.overlap_saved_s * stages * 1e3,
        launch_ms=launch_s * stages * 1e3 + overhead_ms,
        rates_ms=None,  # _with_rates, from `total`
    )
    return step, total
