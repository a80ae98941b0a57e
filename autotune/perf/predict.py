"""predict(plan, model, hardware, workload) -> Prediction: the one entry point of the performance model."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from autotune.perf import comm, efficiency, precision, rates, sharding
from autotune.perf.costing import BoundedMemo
from autotune.perf.memory import memory_fit
from autotune.perf.ops import complete, speculation, step_fn
from autotune.perf.serving import (
    NO_DP,
    Point,
    Ranks,
    aggregated_at_rate,
    aggregated_point,
    candidate_sizes,
    choose,
    disaggregated_at_rate,
    disaggregated_point,
    meets,
    prefill_pool,
)
from autotune.specs import HardwareProfile, ModelSpec, PhasePlan, Plan, Prediction, Workload

GB = 1e9
HOST_MEMORY_USABLE = 0.9


def check_plan(plan: Plan, model: ModelSpec, hw: HardwareProfile) -> str:
    """Why the plan cannot run on this model and box, or '' when it can."""
    if not hw.gpu.peak_tflops.get("bf16") or not hw.gpu.mem_bw_gbs:
        return f"hardware '{hw.name}': peak bf16 TFLOPS / memory bandwidth of '{hw.gpu.name}' unknown"
    for name, phase in plan.phases.items():
        if max(phase.gpus) >= hw.num_gpus:
            return f"{name}: GPU {max(phase.gpus)} does not exist on {hw.num_gpus}-GPU '{hw.name}'"
        reason = _check_phase(phase, model, hw)
        if reason:
            return f"{name}: {reason}"
    tables = model.host_table_bytes * sum(p.replicas for p in plan.phases.values())
    if tables > hw.host.memory_gib * 2**30 * HOST_MEMORY_USABLE:
        host = f"host memory {hw.host.memory_gib:.0f} GiB"
        return f"host tables {tables / GB:.0f} GB (one copy per instance) exceed {host}"
    return ""


_KINDS: dict[int, tuple[ModelSpec, tuple, int]] = {}  # id(model) -> (model, attention specs, expert width)


def _model_facts(model: ModelSpec) -> tuple[tuple, int]:
    """(the distinct attention specs of the model's layers, in the iteration order of their set; the widest
    routed expert's moe_intermediate_size), remembered per model object: walking every layer for every phase
    checked was a tenth of a prediction."""
    hit = _KINDS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1], hit[2]
    kinds = tuple({layer.attention for layer in model.layers})
    inter = max(layer.ffn.expert_params for layer in model.layers) // (3 * model.hidden_size)
    if len(_KINDS) >= 64:
        _KINDS.clear()
    _KINDS[id(model)] = (model, kinds, inter)
    return kinds, inter


PHASE_CHECK_MEMO_MAX = 4096  # _layout_reason results remembered across plans
_LAYOUT_REASONS = BoundedMemo(PHASE_CHECK_MEMO_MAX)  # (id(model), tp, dp, ep, pp) -> (model, reason)


def _check_phase(phase: PhasePlan, model: ModelSpec, hw: HardwareProfile) -> str:
    """Why the phase cannot run (_layout_reason, remembered across plans: a search's plans repeat a few layouts),
    or '' when it can."""
    key = (id(model), phase.tp, phase.dp, phase.ep, phase.pp)
    hit = _LAYOUT_REASONS.get(key)
    if hit is None or hit[0] is not model:
        hit = _LAYOUT_REASONS.put(key, (model, _layout_reason(phase, model)))
    if hit[1] or phase.comm.all2all != "deepep":
        return hit[1]
    for r in range(phase.replicas):
        if comm.transport(comm.topology(hw), phase.replica_gpus(r)[: phase.stage_ranks]) != "nvlink":
            return "DeepEP all-to-all needs NVLink between the EP ranks (hardware.md 5.4)"
    return ""


def _layout_reason(phase: PhasePlan, model: ModelSpec) -> str:
    """What of _check_phase reads only the model and the phase's tp / dp / ep / pp (the memo's key)."""
    ranks = phase.stage_ranks
    kinds, inter = _model_facts(model)
    for att in kinds:  # hybrids: the linear and the full layers' heads
        what = "linear-attention" if att.is_linear else "attention"
        if att.num_heads % phase.tp:
            return f"tp={phase.tp} does not divide {att.num_heads} {what} heads"
        kv = att.num_kv_heads
        if (
            att.is_linear and kv % phase.tp
        ):  # heads split over tp: vLLM layers/mamba/gdn/qwen_gdn_linear_attn.py:809,1050
            return f"tp={phase.tp} does not divide {kv} {what} key heads"
        if not att.latent_shared and (kv % phase.tp if kv >= phase.tp else phase.tp % kv):
            return f"tp={phase.tp} and {kv} KV heads do not shard evenly"
    if phase.pp > model.num_layers:
        return f"pp={phase.pp} exceeds {model.num_layers} layers"
    if not model.is_moe and (phase.dp > 1 or phase.ep > 1):
        return "dp/ep > 1 need a MoE model (use replicas for data parallelism)"
    if model.is_moe and phase.ep > 1 and model.num_experts % phase.ep:
        return f"ep={phase.ep} does not divide {model.num_experts} experts"
    if model.is_moe and phase.ep == 1 and ranks > 1 and inter % ranks:
        return f"tensor-sharded experts: {ranks} ranks do not divide moe_intermediate_size {inter}"
    return ""


def _step_fn(
    model: ModelSpec, phase: PhasePlan, engine: str, hw: HardwareProfile, label: str, pending: dict, w: Workload
):
    return step_fn(model, phase, engine, hw, phase.replica_gpus(0), label, pending, expert_cv=w.expert_load_cv)


def _ranks(phase: PhasePlan, engine: str) -> Ranks:
    """The phase's attention-DP ranks for the steady state (serving.Ranks), each prompt on one of them."""
    if phase.dp <= 1:
        return NO_DP
    chunk = sharding.rank_chunk(phase, engine, phase.batching.chunked_prefill_tokens)
    return Ranks(phase.dp, chunk, sharding.dp_prefill_apart(phase, engine))


def _kv_transfer_ms(model: ModelSpec, plan: Plan, hw: HardwareProfile, isl: int) -> float:
    """Move one prompt's KV from a prefill instance to a decode instance; shards travel in parallel."""
    pre, dec = plan.phases["prefill"], plan.phases["decode"]
    src, dst = pre.replica_gpus(0), dec.replica_gpus(0)
    nbytes = isl * precision.kv_bytes_per_token(model, pre, plan.engine, hw.gpu.arch)
    return comm.kv_transfer_s(hw, src, dst, nbytes, pre.comm) * 1e3


def predict(plan: Plan, model: ModelSpec, hw: HardwareProfile, workload: Workload) -> Prediction:
    reason = check_plan(plan, model, hw)
    if reason:
        return Prediction(feasible=False, reason=reason)
    seq_tokens = workload.isl + workload.osl
    fits = {name: memory_fit(model, phase, hw, seq_tokens, plan.engine, name) for name, phase in plan.phases.items()}
    for name, fit in fits.items():
        if fit.kv_tokens < seq_tokens:
            return Prediction(
                feasible=False,
                reason=(
                    f"{name}: out of memory: weights {fit.weights_gb:.1f} GB per GPU leave no KV room for one "
                    f"{seq_tokens}-token request in {fit.capacity_gb:.1f} GB (after activations and a "
                    f"{fit.reserve_gb:.0f} GB reserve)"
                ),
                memory=fits,
            )
    kv_ms = _kv_transfer_ms(model, plan, hw, workload.isl) if plan.mode == "disaggregated" else 0.0
    pending: dict = {}  # the steps timed only (ops.step_fn, TimedStep): the reported ones are made whole below
    points, at_rate = _points(plan, model, hw, workload, fits, kv_ms, pending)
    capacity = max(p.requests_per_s for p in points)
    rate, note = workload.rate_rps, ""
    if rate and rate < capacity * (1 - 1e-9):  # open loop below capacity: the plan serves the offered load
        point = at_rate(rate_rps=rate)
        slo_met = meets(point, workload)
    else:
        point, slo_met = choose(points, workload)
        if rate:
            note = (
                f"offered {rate:.1f} req/s exceeds this plan's capacity of {capacity:.1f} req/s: it serves "
                f"{capacity:.1f} req/s and the queue grows without bound"
            )
    steps = tuple(complete(pending, s) for s in point.steps)
    used = rates.used(hw, [s.rates_ms for s in steps])
    return _prediction(point, steps, used, slo_met, plan, workload, fits, kv_ms, capacity, note)


def _points(
    plan: Plan, model: ModelSpec, hw: HardwareProfile, w: Workload, fits, kv_ms: float, pending: dict
) -> tuple[list[Point], Callable[[float], Point]]:
    """The closed-loop operating points to choose from, and the operating point at an offered rate (req/s)
    below capacity; their steps come timed only, noted in `pending` (ops.step_fn, ops.complete)."""
    seq_tokens = w.isl + w.osl
    if plan.mode == "aggregated":
        phase = plan.phases["both"]
        limit = min(phase.batching.max_running, fits["both"].kv_tokens // seq_tokens)
        sizes = candidate_sizes(limit)
        if w.concurrency:
            sizes.append(max(1, min(limit, -(-w.concurrency // phase.replicas))))
        args = dict(
            replicas=phase.replicas,
            w=w,
            chunk=phase.batching.chunked_prefill_tokens,
            pp=phase.pp,
            spec=speculation(phase, model.family, w.draft_acceptance),
            mixed=sharding.mixed_steps(phase, plan.engine),
            ranks=_ranks(phase, plan.engine),
            pickup=efficiency.pickup_lag_steps(plan.engine, phase.pp),  # the overlapped loop's batch ahead
        )
        step = _step_fn(model, phase, plan.engine, hw, "mixed", pending, w)
        point = partial(aggregated_point, step, **args)
        return [point(seqs=n) for n in sorted(set(sizes))], partial(aggregated_at_rate, step, limit, **args)
    pre, dec = plan.phases["prefill"], plan.phases["decode"]
    pool = prefill_pool(
        _step_fn(model, pre, plan.engine, hw, "prefill", pending, w),
        pre.replicas,
        w,
        pre.batching.chunked_prefill_tokens,
        pre.pp,
        _ranks(pre, plan.engine),
    )
    limit = min(dec.batching.max_running, fits["decode"].kv_tokens // seq_tokens)
    decode = _step_fn(model, dec, plan.engine, hw, "decode", pending, w)
    accepted = speculation(dec, model.family, w.draft_acceptance)[1]
    points = [
        disaggregated_point(pool, decode, n, dec.replicas, w, kv_ms, dec.pp, accepted) for n in candidate_sizes(limit)
    ]

    def at_rate(rate_rps: float) -> Point:
        return disaggregated_at_rate(pool, decode, limit, dec.replicas, w, kv_ms, dec.pp, rate_rps, accepted)

    return points, at_rate


def _prediction(
    p: Point,
    steps: tuple,
    used: dict[str, str],
    slo_met: bool,
    plan: Plan,
    w: Workload,
    fits,
    kv_ms: float,
    capacity: float,
    note: str,
) -> Prediction:
    n = plan.num_gpus
    input_tok_s = p.requests_per_s * w.isl
    output_tok_s = p.requests_per_s * w.osl
    return Prediction(
        feasible=True,
        input_tok_s=input_tok_s,
        output_tok_s=output_tok_s,
        total_tok_s=input_tok_s + output_tok_s,
        total_tok_s_per_gpu=(input_tok_s + output_tok_s) / n,
        output_tok_s_per_gpu=output_tok_s / n,
        request_rate_rps=p.requests_per_s,
        concurrency=int(round(p.concurrency)),
        ttft_ms={"mean": p.ttft_ms},
        tpot_ms={"mean": p.tpot_ms},
        slo_met=slo_met,
        memory=fits,
        steps=steps,  # p.steps made whole (ops.complete)
        kv_transfer_ms=kv_ms,
        capacity_rps=capacity,
        note=note,
        rates=used,
    )
