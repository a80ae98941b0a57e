"""Cost of one forward step of one engine instance: the op list one step runs on the busiest GPU (perf/oplist.py),
then a costing pass over it with the box's rates table (perf/rates.py) and collectives on the topology
(perf/comm.py). `step_ms` is the time a token takes through all `pp` stages.

`step_fn` resolves a phase's choices once (opcore.Context) and returns the step cost as a function of the step
input, which is what serving.py evaluates at every candidate operating point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from autotune.capability.profiles import profile
from autotune.perf import ascend, eager_host, halves, precision
from autotune.perf import efficiency as eff
from autotune.perf.costing import (
    MEMO_MAX,
    Cost,
    _add_terms,
    _op_terms,
    collective_terms,
    cost_ops,
    shared_rate_terms,
)
from autotune.perf.dp_gather import DpGather, dp_gather
from autotune.perf.halves import add_attention_halves, attention_terms, ffn_kernel_terms
from autotune.perf.layers import attended_entries, indexer_scored, layer_groups
from autotune.perf.opcore import Context, Op, StepInput, _collective, context
from autotune.perf.oplist import (
    dcp_ops,
    ffn_comm_ops,
    ffn_ops,
    head_ops,
    layer_ops,
    padded_ffn_rows,
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
_NO_GATHER = {True: None, False: None}  # _step's DP gathers without attention DP
_STEPS = halves.BoundedMemo(STEP_MEMO_MAX)  # (step_fn's prefix number, step input) -> StepBreakdown, or step_ms
# (a float) while only step_fn's `pending` path has timed it (TimedStep)


def _ffn_cost(c: Context, ffn: FfnSpec, tokens: float, gather: DpGather | None = None) -> Cost:
    """The costed FFN half of a layer (oplist.ffn_ops; `gather`: attention DP's gather and return where the engine
    picks them per step, perf/dp_gather.py), remembered per Context: layer kinds that differ only in attention
    (V4's compressed / sparse / windowed layers) share it within a step. Callers must not mutate it."""
    # by value: equal FfnSpecs of different layer kinds are different objects, keyed as the model's first equal one
    # (_ffn_facts' id map, noted in the Context's memo_keys: one dict lookup a call)
    ids = c.memo_keys.get("ffn_ids")
    if ids is None:
        ids = c.memo_keys["ffn_ids"] = _ffn_facts(c.model)[1]
    key = (ids[id(ffn)], tokens) if gather is None else (ids[id(ffn)], tokens, gather)
    hit = c.ffn_memo.get(key)
    return _ffn_miss(c, key, ffn, tokens, gather) if hit is None else hit


def _ffn_miss(c: Context, key: tuple, ffn: FfnSpec, tokens: float, gather: DpGather | None) -> Cost:
    """_ffn_cost of an FFN half its Context's memo lacks under `key` (_ffn_cost's), costed and remembered: _step's
    FFN loop, which looked the key up itself, calls it directly."""
    memo = c.ffn_memo
    if len(memo) >= MEMO_MAX:
        memo.clear()
    hit = memo[key] = _shared_ffn_cost(c, ffn, tokens, gather)
    return hit


def _shared_ffn_cost(c: Context, ffn: FfnSpec, tokens: float, gather: DpGather | None = None) -> Cost:
    """_overlapped_shared(c, ffn, ffn_ops(c, ffn, tokens)). Off vllm-ascend that is cost_ops of the FFN's kernels,
    collectives and norms (oplist.ffn_ops' order): the kernels' and norms' _op_terms and sums are remembered across
    plans (halves.ffn_kernel_terms), the collectives (which read the stage's GPUs, comm and NCCL settings) are
    costed per Context, and the Cost is what _add_terms makes of all three in that order, as cost_ops would. The
    kernels compute the gathered buffer's rows where `gather` pads the step (oplist.padded_ffn_rows)."""
    if tokens <= 0 or c.platform is not None:
        return _overlapped_shared(c, ffn, ffn_ops(c, ffn, tokens))
    rows = None if gather is None else padded_ffn_rows(c, ffn, tokens, gather)  # no call without attention DP
    kernels, norms, compute_s, memory_s = ffn_kernel_terms(c, ffn, tokens, rows)
    # _add_terms(Cost(), kernels + comm + norms, 1.0) without its loop over the kernels and norms: their compute and
    # memory sums come remembered (0.0 + s is s: the sums start at 0.0, never -0.0), and the collectives (every op
    # of ffn_comm_ops) add only their seconds above 0 to comm_s, in order (collective_terms)
    cost = Cost()
    cost.compute_s, cost.memory_s = compute_s, memory_s
    comm = collective_terms(c, ffn_comm_ops(c, ffn, tokens, gather), cost.comm_s)
    cost.parts += kernels + comm + norms, 1.0
    return cost


def _overlapped_shared(c: Context, ffn: FfnSpec, ops: list) -> Cost:
    """cost_ops, less what vllm-ascend's multistream shared experts hide: the shared-expert GEMM (the first op of a
    MoE layer with shared experts, oplist._ffn_ops) runs beside the routed experts (perf/ascend.py)."""
    if not (c.platform is not None and ffn.kind == "moe" and ffn.params and ascend.overlaps_shared_experts(c.platform)):
        return cost_ops(c, ops)
    shared, rest = cost_ops(c, ops[:1]), cost_ops(c, ops[1:])
    routed = next((op for op in ops if op.kind == "grouped_moe"), None)
    routed_s = cost_ops(c, [routed]).time_s if routed else 0.0
    total = Cost()
    total.add(shared)
    total.add(rest)
    total.overlap_saved_s += min(shared.time_s, routed_s) * (1 - ascend.MULTISTREAM_RESIDUE)
    return total


def _add_layer(
    total: Cost, c: Context, layer: LayerSpec, x: StepInput, times: float, gather: DpGather | None = None
) -> None:
    """Add `times` x one layer's cost for its own input `x` (oplist.layer_input) to `total`: layer_ops costed as
    the attention half, the FFN half (_ffn_cost, with the step's DP `gather`) and the dcp gather, less what two-batch
    overlap hides."""
    att = layer.attention
    ffn_half = _ffn_cost(c, layer.ffn, step_tokens(x), gather)
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


_FFN_FACTS = halves.BoundedMemo(halves.PREFIX_MEMO_MAX)  # id(model) -> (the model, _ffn_facts)


def _ffn_facts(model: ModelSpec) -> tuple[tuple[tuple[FfnSpec, bool, int], ...], dict[int, int]]:
    """(_ffn_groups of the model's layer kinds, id(FfnSpec) -> id of the model's first layer FfnSpec equal to it), once
    per model object: the step's FFN groups and the FFN memo's key (_ffn_cost) compare FfnSpecs by value, and a
    frozen dataclass hashes all its fields on every lookup (~0.3 us; ~24 per V4.1 prediction before). The ids stay
    valid while the model lives, which a Context (whose memo they key) keeps alive."""
    hit = _FFN_FACTS.get(id(model))
    if hit is None or hit[0] is not model:
        first: dict[FfnSpec, FfnSpec] = {}
        for layer in model.layers:
            first.setdefault(layer.ffn, layer.ffn)
        ids = {id(layer.ffn): id(first[layer.ffn]) for layer in model.layers}
        hit = _FFN_FACTS.put(id(model), (model, (_ffn_groups(layer_groups(model)), ids)))
    return hit[1]


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
    one = StepInput(x.decode_seqs, x.decode_ctx)  # its own decode part: layer_input(the last layer, one) is one
    passes = (x.decode_width - 1) * times
    _add_layer(total, c, c.model.layers[-1], one, passes)
    halves.add_head(total, c, x.decode_seqs, passes)


_RATE_NAMES: dict[tuple[str, str, str], str] = {}  # rates-table key -> "class/dtype/bucket"


def _rate_name(key: tuple[str, str, str]) -> str:
    """The name StepBreakdown.rates_ms reports a rates-table key under, joined once per key."""
    name = _RATE_NAMES.get(key)
    if name is None:
        name = _RATE_NAMES[key] = "/".join(key)
    return name


class TimedStep(float):
    """A step's time (ms) without its StepBreakdown (step_fn's `pending`: ops.complete builds the breakdown for the
    steps a prediction reports); `step_ms` reads it as serving.py reads a StepBreakdown's. The step memo keeps
    the plain float: entries the garbage collector does not track (instances of a class are tracked)."""

    __slots__ = ()

    @property
    def step_ms(self) -> float:
        return float(self)


def step_fn(
    model: ModelSpec,
    phase: PhasePlan,
    engine: str,
    hw: HardwareProfile,
    gpus: tuple[int, ...],
    label: str,
    pending: dict | None = None,
    caps: tuple[float, float] | None = None,
    expert_cv: float = 0.0,
) -> Callable[[StepInput], StepBreakdown | TimedStep]:
    """The step cost of the instance on `gpus` (tp*dp*pp of them, stage-major) as a function of the step input;
    the phase's choices are resolved once (opcore.Context) for all the steps serving.py evaluates.

    With `pending` (a dict the caller keeps for one prediction) a step may come as a TimedStep, its time without
    the rest of the breakdown (rates_ms sums every op's rates-table entry; serving reads step_ms only and a
    prediction reports one or two of its tens of steps): complete(pending, step) makes the steps the caller
    reports whole. Without, every step comes whole. `caps` replaces the engine's CUDA-graph caps
    (efficiency.graph_caps): (0, 0) prices every step without a graph. `expert_cv`: the workload's expert-popularity
    CV (Workload.expert_load_cv; 0 = the model's default), read once into the Context's EP imbalance."""
    ranks = phase.stage_ranks
    spec_width = speculation(phase)[0]
    caps = caps or eff.graph_caps(model, phase, engine, hw, spec_width)  # reads phase.batching: in the key
    c = context(model, phase, engine, hw, gpus[:ranks], expert_cv, caps[1])
    c.rate_terms.update(shared_rate_terms(c))
    hand_off_group = (gpus[ranks - 1], gpus[ranks]) if phase.pp > 1 else ()
    # what _step reads besides x: the Context (the model, the phase, the engine, the box, the stage's GPUs) and
    # the hand-off pair; of the phase, its GPUs only as those, `replicas` not at all and `batching` only as the
    # Context's PCIe-IPC size limit (comm.pcie_ipc_max_bytes), the CUDA-graph caps and the linear-attention layers'
    # prefill kernels its chunk picks (halves.linear_paths); of the workload, its expert popularity CV only as the
    # Context's EP imbalance
    prefix = (
        id(model), id(hw), engine, label, c.stage, hand_off_group, c.ipc_max, c.imbalance, caps,
        halves.plain(phase, STEP_FREE), halves.linear_paths(c),
    )  # fmt: skip
    number = c.memo_keys["step"] = halves.number(prefix, (model, hw))  # also eager_host's memo key
    facts = _step_facts(c, spec_width, hand_off_group, caps)
    stages = phase.pp
    steps_get = _STEPS.get

    def cost(x: StepInput) -> StepBreakdown:
        key = (number, halves.step_input(x))
        hit = steps_get(key)
        if hit is None or type(hit) is float:  # a float: timed only by step_fn's `pending` path
            step, total = _step(c, facts, x)
            hit = _STEPS.put(key, _whole(step, total, label, stages))
        return hit

    if pending is None:
        return cost

    def timed(x: StepInput) -> StepBreakdown | TimedStep:
        key = (number, halves.step_input(x))
        hit = steps_get(key)
        if hit is None:
            (step_ms, batch_tokens, launch_ms), total = _step(c, facts, x)
            if len(_STEPS) >= STEP_MEMO_MAX:  # _STEPS.put without its call
                _STEPS.clear()
            _STEPS[key] = step_ms
            hit = pending[key] = TimedStep(step_ms)
            pending[id(hit)] = (hit, total, (key, label, batch_tokens, launch_ms, stages))
        elif type(hit) is float:
            # timed earlier in this prediction: that TimedStep (complete() builds it from its Cost), not a second
            # one that complete() would cost again (76 of the 737 steps 1,000 sampled V4.1 plans report); timed
            # by an earlier prediction: complete() has cost(x) cost it again whole
            first = pending.get(key)
            if first is not None:
                return first
            hit = pending[key] = TimedStep(hit)
            pending[id(hit)] = (hit, None, (cost, x))
        return hit

    return timed


def complete(pending: dict, step: StepBreakdown | TimedStep) -> StepBreakdown:
    """`step` (from a step_fn given `pending`) whole: built from the step's Cost, or costed again whole when an
    earlier prediction remembered it as a TimedStep. The whole step replaces the one remembered, so later
    predictions find it whole."""
    if type(step) is not TimedStep:
        return step
    _, total, how = pending[id(step)]
    if total is None:  # how: (cost, x)
        return how[0](how[1])
    key, label, batch_tokens, launch_ms, stages = how
    return _STEPS.put(key, _whole((float(step), batch_tokens, launch_ms), total, label, stages))


def _whole(step: tuple[float, int, float], total: Cost, label: str, stages: int) -> StepBreakdown:
    """The StepBreakdown of a step `_step` timed ((step_ms, batch_tokens, launch_ms)), its parts (ms over all
    `stages`) from the step's Cost `total`."""
    names = _RATE_NAMES
    step_ms, batch_tokens, launch_ms = step
    return StepBreakdown(
        phase=label,
        batch_tokens=batch_tokens,
        step_ms=step_ms,
        compute_ms=total.compute_s * stages * 1e3,
        memory_ms=total.memory_s * stages * 1e3,
        comm_ms={k: v * stages * 1e3 for k, v in sorted(total.comm_s.items())},
        bubble_ms=0.0,
        overlap_saved_ms=total.overlap_saved_s * stages * 1e3,
        launch_ms=launch_ms,
        rates_ms={(names.get(k) or _rate_name(k)): v * stages * 1e3 for k, v in total.by_rate.items()},
    )


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


class _StepFacts(NamedTuple):
    """What _step reads besides the Context and the step input, resolved once per step_fn (the same floats the
    expressions noted gave per step)."""

    groups: tuple[tuple[LayerSpec, int], ...]  # layers.layer_groups(model)
    ffn_groups: tuple[tuple[FfnSpec, int, bool, float], ...]  # (FFN, its _ffn_cost key id, in_prefill, count / pp)
    spec_width: int
    hand_off_group: tuple[int, ...]
    caps: tuple[float, float]
    per_stage: float  # 1 / pp
    prefill_launch_s: float  # PREFILL_LAUNCH_US_PER_LAYER * 1e-6 * num_layers / pp
    decode_launch_s: float  # as prefill_launch_s with DECODE_LAUNCH_US_PER_LAYER (vllm-ascend: its graph mode's)
    draft_launch_s: float  # (spec_width - 1) * DECODE_LAUNCH_US_PER_LAYER * 1e-6 / pp
    # eff.scheduler_overhead_ms's engine part: the profile's scheduler_cpu_ms and whether it overlaps the GPU step
    # (eff.scheduler_overlapped), read once per step_fn rather than per step
    scheduler_cpu_ms: float
    scheduler_overlapped: bool


def _step_facts(c: Context, spec_width: int, hand_off_group: tuple[int, ...], caps: tuple[float, float]) -> _StepFacts:
    """_StepFacts of a step_fn's Context; notes the model's FFN id map in the Context's memo_keys (as _ffn_cost)."""
    model, phase, pp = c.model, c.phase, c.phase.pp
    ffn_groups, ids = _ffn_facts(model)
    c.memo_keys["ffn_ids"] = ids
    decode_us = eff.DECODE_LAUNCH_US_PER_LAYER if c.platform is None else ascend.decode_launch_us(phase.platform)
    return _StepFacts(
        layer_groups(model),
        tuple((ffn, ids[id(ffn)], in_prefill, count / pp) for ffn, in_prefill, count in ffn_groups),
        spec_width,
        hand_off_group,
        caps,
        1 / pp,
        eff.PREFILL_LAUNCH_US_PER_LAYER * 1e-6 * model.num_layers / pp,
        decode_us * 1e-6 * model.num_layers / pp,
        (spec_width - 1) * eff.DECODE_LAUNCH_US_PER_LAYER * 1e-6 / pp,
        profile(c.engine).scheduler_cpu_ms,
        eff.scheduler_overlapped(c.engine, pp),
    )


def _step(c: Context, facts: _StepFacts, x: StepInput) -> tuple[tuple[float, int, float], Cost]:
    """((step_ms, batch_tokens, launch_ms) of the step at `x`, the Cost it was summed from): _whole makes its
    StepBreakdown."""
    phase = c.phase
    groups, ffn_groups, spec_width, hand_off_group, caps, per_stage, *launch, cpu_ms, overlapped = facts
    decode_seqs, prefill_tokens = x.decode_seqs, x.prefill_tokens
    width = spec_width if decode_seqs else 1
    if width > 1:
        x = StepInput(decode_seqs, x.decode_ctx, prefill_tokens, x.prefill_ctx, width, *x[5:])
    decode_only = StepInput(decode_seqs, x.decode_ctx, decode_width=x.decode_width) if prefill_tokens else x
    inputs = {True: x, False: decode_only}  # layer_input (a step without prompt tokens is its own decode part)
    gathers = _NO_GATHER  # attention DP's gather and return by layer input (perf/dp_gather.py)
    if phase.dp > 1:
        prompt = bool(prefill_tokens)
        gather = dp_gather(c, x, prompt, caps)
        gathers = {True: gather, False: dp_gather(c, decode_only, prompt, caps) if prompt else gather}
    total = Cost()
    if phase.overlap.two_batch:  # overlap is per layer kind: each kind's halves together (_add_layer)
        for layer, count in groups:
            _add_layer(total, c, layer, inputs[layer.in_prefill], count / phase.pp, gathers[layer.in_prefill])
    else:  # the attention halves (and dcp gathers) of the layer kinds, as _add_layer, then the FFN halves
        add_attention_halves(total, c, groups, inputs, x)
        memo = c.ffn_memo  # _ffn_cost's, looked up here first: its key is (ffn_ids' id, step_tokens[, DP gather])
        x_tokens, part_tokens = step_tokens(x), step_tokens(decode_only)  # once a step, not per FFN kind
        for ffn, ffn_id, in_prefill, times in ffn_groups:
            tokens = x_tokens if in_prefill else part_tokens
            gather = gathers[in_prefill]
            key = (ffn_id, tokens) if gather is None else (ffn_id, tokens, gather)
            total.add(memo.get(key) or _ffn_miss(c, key, ffn, tokens, gather), times)
    # LM head on sampled positions only: every verified token of a decoding sequence, the chunk's last prompt token
    head = halves.head_cost(c, decode_seqs * width + (1 if prefill_tokens else 0))
    total.add(head, per_stage)
    prefill_launch_s, decode_launch_s, draft_launch_s = launch
    launch_s = prefill_launch_s if prefill_tokens else decode_launch_s
    if width > 1:  # drafting runs once per step, on the last stage
        _add_draft(total, c, x, per_stage)
        launch_s += draft_launch_s
    if (decode_seqs * width + prefill_tokens > caps[1]) if prefill_tokens else (decode_seqs > caps[0]):
        # no CUDA graph: the stage takes the longer of its GPU time and the host's kernel launches (eager_host)
        launch_s = max(0.0, eager_host.eager_host_s(c, groups, x) - total.time_s)
    stages = phase.pp
    if stages > 1:
        rows = decode_seqs * width + prefill_tokens
        hand_off = rows / phase.dp * c.model.hidden_size * precision.ACTIVATION_BYTES
        # cost_ops(c, [op], total) as total.add(cost_ops(c, [op])) added it without the Cost between: a lone
        # collective's Cost has compute and memory 0.0 and by_rate its seconds x 1.0, which add as these terms do
        _add_terms(total, _op_terms(c, [_collective("pp_send", hand_off_group, hand_off, "pp")]), 1.0)
    gpu_ms = (total.time_s + launch_s) * stages * 1e3
    overhead_ms = eff.exposed_scheduler_ms(cpu_ms, overlapped, gpu_ms)  # eff.scheduler_overhead_ms's, facts read once
    batch_tokens = int(round(decode_seqs * width + prefill_tokens))
    return (gpu_ms + overhead_ms, batch_tokens, launch_s * stages * 1e3 + overhead_ms), total
