"""A plan's prediction with simulated percentiles: build the deployment the simulator runs from a plan (the
performance model's step functions and memory fit), run the workload's trace through it, and summarise.

Throughput is measured over the middle of the run (between the 10th and the 90th percentile completion), where a
closed or Poisson loop is in its steady state; a burst is measured over the whole run (it has no steady state:
its throughput is the requests over the time the last one finished). Goodput counts the requests of that window
that meet every SLO (TTFT and TPOT each within its limit, per request). `slo_met` holds when the workload's
`slo_percentile`-th percentile TTFT and TPOT are within their limits.
"""

from __future__ import annotations

import dataclasses
import math

from autotune.perf.efficiency import pickup_lag_steps
from autotune.perf.linear_attention import reads_prompt_count
from autotune.perf.ops import speculation, step_fn
from autotune.perf.sharding import dp_prefill_apart, mixed_steps, rank_chunk
from autotune.sim.engine import Deployment, InstanceSpec, Outcome, StepCache, simulate
from autotune.sim.trace import make_trace
from autotune.specs import HardwareProfile, ModelSpec, PhasePlan, Plan, Prediction, Workload

PERCENTILES = (50, 90, 95, 99)
WINDOW = (0.1, 0.9)  # share of completions that bounds the throughput window


def _instance(
    role: str, plan: Plan, phase: PhasePlan, model: ModelSpec, hw: HardwareProfile, kv_tokens: int, w: Workload
) -> InstanceSpec:
    label = {"both": "mixed"}.get(role, role)
    # the simulator reads step_ms only: steps timed only (ops.step_fn's `pending`, TimedStep; never completed)
    step = step_fn(model, phase, plan.engine, hw, phase.replica_gpus(0), label, pending={}, expert_cv=w.expert_load_cv)
    width, accepted = speculation(phase, model.family, w.draft_acceptance) if role != "prefill" else (1, 1.0)
    chunk = phase.batching.chunked_prefill_tokens * (phase.pp if role == "prefill" else 1)
    return InstanceSpec(
        role=role,
        cache=StepCache(step, phase.pp, phase.dp, reads_prompt_count(model)),
        max_running=phase.batching.max_running,
        # a prefill-only instance keeps pp micro-batches in flight, each with its own token budget, as the
        # steady-state pool does (perf/serving.prefill_pool); mixed instances share one budget (aggregated_point)
        chunk=chunk,
        kv_tokens=kv_tokens,
        width=width,
        accepted=accepted,
        prefix_hit_rate=w.prefix_hit_rate,
        mixed=mixed_steps(phase, plan.engine),
        budget_apart=dp_prefill_apart(phase, plan.engine),
        dp_ranks=phase.dp,
        rank_chunk=rank_chunk(phase, plan.engine, chunk) if phase.dp > 1 else 0,  # within the pooled budget
        pickup=pickup_lag_steps(plan.engine, phase.pp),  # the overlapped loop's batch already scheduled
    )


def deployment(plan: Plan, model: ModelSpec, hw: HardwareProfile, w: Workload, base: Prediction) -> Deployment:
    """The deployment of a feasible plan; `base` is its steady-state prediction (memory fit, KV transfer)."""
    if plan.mode == "aggregated":
        phase = plan.phases["both"]
        spec = _instance("both", plan, phase, model, hw, base.memory["both"].kv_tokens, w)
        return Deployment("aggregated", spec, phase.replicas)
    pre, dec = plan.phases["prefill"], plan.phases["decode"]
    return Deployment(
        "disaggregated",
        _instance("decode", plan, dec, model, hw, base.memory["decode"].kv_tokens, w),
        dec.replicas,
        prefill=_instance("prefill", plan, pre, model, hw, base.memory["prefill"].kv_tokens, w),
        prefill_replicas=pre.replicas,
        kv_transfer_ms=base.kv_transfer_ms,
    )


def percentiles(values: list[float]) -> dict[str, float]:
    """Mean and p50/p90/p95/p99 (linear interpolation between order statistics, numpy's default)."""
    if not values:
        return {}
    xs = sorted(values)
    return {"mean": math.fsum(xs) / len(xs), **{f"p{q}": _at(xs, q) for q in PERCENTILES}}


@dataclasses.dataclass(frozen=True)
class Summary:
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    e2e_ms: dict[str, float]
    queue_ms: dict[str, float]
    requests_per_s: float
    input_tok_s: float
    output_tok_s: float
    goodput_rps: float
    in_system: float  # time-averaged requests held by the instances
    makespan_ms: float
    slo_met: bool


def summarize(out: Outcome, w: Workload, concurrency: int = 0, stable: bool = False) -> Summary:
    """`concurrency`: the requests a closed loop kept in flight (0: open loop or burst). `stable`: an open loop
    below the plan's capacity, which serves exactly what arrives: its throughput is the trace's arrival rate
    (a window of completions would add sampling noise to plans that all serve the same load)."""
    n = len(out.done_ms)
    ttft = [out.first_ms[i] - out.arrival_ms[i] for i in range(n)]  # by request
    tpot = [(out.done_ms[i] - out.first_ms[i]) / (out.osl[i] - 1) if out.osl[i] > 1 else 0.0 for i in range(n)]
    e2e = [out.done_ms[i] - out.arrival_ms[i] for i in range(n)]
    queue = [out.admit_ms[i] - out.arrival_ms[i] for i in range(n)]
    # a closed loop starts with `concurrency` requests sent together at t=0: a start-up burst, not the loop's
    # steady behaviour, left out of the latency statistics when the run is long enough to spare them
    measured = range(concurrency, n) if concurrency and n >= 2 * concurrency else range(n)
    order = sorted(range(n), key=out.done_ms.__getitem__)
    makespan = out.done_ms[order[-1]] - min(out.arrival_ms)
    if w.arrival == "burst" or n < 10:
        window, span = order, makespan
    else:
        a, b = int(n * WINDOW[0]), int(n * WINDOW[1])
        window, span = order[a + 1 : b + 1], out.done_ms[order[b]] - out.done_ms[order[a]]
        if concurrency:  # closed loop: N in flight, so throughput = N / mean latency (robust to waves)
            span = math.fsum(e2e[i] for i in window) / concurrency
        elif stable:  # served = offered: every request over the time they took to arrive
            window, span = order, (max(out.arrival_ms) - min(out.arrival_ms)) * n / max(n - 1, 1)
    span_s = max(span, 1e-9) / 1e3
    good = sum(w.meets_slo(ttft[i], tpot[i]) for i in window)
    ttft_m = [ttft[i] for i in measured]
    tpot_m = [tpot[i] for i in measured if out.osl[i] > 1]
    t_pct, p_pct = percentiles(ttft_m), percentiles(tpot_m)
    q = f"p{w.slo_percentile:g}"
    slo_ttft = t_pct.get(q) or _at(sorted(ttft_m), w.slo_percentile)
    slo_tpot = (p_pct.get(q) or _at(sorted(tpot_m), w.slo_percentile)) if tpot_m else 0.0
    return Summary(
        ttft_ms=t_pct,
        tpot_ms=p_pct,
        e2e_ms=percentiles([e2e[i] for i in measured]),
        queue_ms=percentiles([queue[i] for i in measured]),
        requests_per_s=len(window) / span_s,
        input_tok_s=sum(out.isl[i] for i in window) / span_s,
        output_tok_s=sum(out.osl[i] for i in window) / span_s,
        goodput_rps=good / span_s,
        in_system=out.in_system_area_ms / max(makespan, 1e-9),
        makespan_ms=makespan,
        slo_met=w.meets_slo(slo_ttft, slo_tpot),
    )


def _at(xs: list[float], q: float) -> float:
    """The q-th percentile of sorted values."""
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def closed_concurrency(w: Workload, base: Prediction) -> int:
    """Requests kept in flight by a closed loop: the workload's, or the steady-state operating point's."""
    if w.arrival != "closed":
        return 0
    return w.concurrency or max(1, base.concurrency)


def simulate_prediction(
    plan: Plan,
    model: ModelSpec,
    hw: HardwareProfile,
    w: Workload,
    base: Prediction,
    seed: int = 0,
    num_requests: int | None = None,
) -> Prediction:
    """`base` (the steady-state prediction of a feasible plan) with simulated percentiles, throughput and
    goodput over the workload's trace. A closed loop left at "as many as fit" (concurrency 0) runs at the
    steady-state operating point; when that point meets the SLO on means but not on the percentile, the most
    requests in flight that meet it are searched (halving, then bisecting CLOSED_BISECTIONS times)."""
    if not base.feasible:
        return base
    concurrency = closed_concurrency(w, base)
    if num_requests is None and concurrency:  # a closed loop reaches its steady state after a few rounds
        num_requests = max(w.num_requests, CLOSED_ROUNDS * concurrency)
    trace = make_trace(w, num_requests, seed)
    dep = deployment(plan, model, hw, w, base)  # its step-cost cache serves every run below
    p = _simulated(plan, dep, trace, w, base, concurrency)
    if p.slo_met or w.arrival != "closed" or w.concurrency or concurrency <= 1:
        return p
    fail, c, ok = concurrency, concurrency // 2, None
    while c >= 1:
        ok = _simulated(plan, dep, trace, w, base, c)
        if ok.slo_met:
            break
        fail, c, ok = c, c // 2, None
    if ok is None:
        return p
    good = c
    for _ in range(CLOSED_BISECTIONS):
        mid = (good + fail) // 2
        if mid in (good, fail):
            break
        q = _simulated(plan, dep, trace, w, base, mid)
        if q.slo_met:
            good, ok = mid, q
        else:
            fail = mid
    return ok


CLOSED_BISECTIONS = 3
CLOSED_ROUNDS = 4  # a closed loop runs at least this many times its concurrency in requests


def _simulated(plan: Plan, dep, trace, w: Workload, base: Prediction, concurrency: int) -> Prediction:
    out = simulate(dep, trace, concurrency)
    s = summarize(out, w, concurrency, stable=w.arrival == "poisson" and w.rate_rps < base.capacity_rps)
    total = s.input_tok_s + s.output_tok_s
    gpus = plan.num_gpus
    return dataclasses.replace(
        base,
        input_tok_s=s.input_tok_s,
        output_tok_s=s.output_tok_s,
        total_tok_s=total,
        total_tok_s_per_gpu=total / gpus,
        output_tok_s_per_gpu=s.output_tok_s / gpus,
        request_rate_rps=s.requests_per_s,
        concurrency=concurrency or int(round(s.in_system)),
        ttft_ms=s.ttft_ms,
        tpot_ms=s.tpot_ms,
        e2e_ms=s.e2e_ms,
        queue_ms=s.queue_ms,
        goodput_rps=s.goodput_rps,
        slo_met=s.slo_met,
        simulated_requests=len(trace),
        slo_percentile=w.slo_percentile,
    )
