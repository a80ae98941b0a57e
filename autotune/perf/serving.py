"""Steady-state serving: from step costs to request throughput, TTFT and TPOT.

Aggregated instances run continuous batching with chunked prefill: in steady state each step advances
`B` decoding sequences by `E` tokens (1; with speculative decoding the expected accepted length, ops.speculation)
and spends `P = B * E * isl / osl` prompt tokens (capped by the chunk budget, which the verified tokens share),
so requests finish at min(B * E / osl, P / isl) per step and TPOT is step / E. Disaggregated deployments run
prefill-only instances and decode-only instances; the slower pool sets the rate and KV moves between them.
Values are steady-state means (v1); a discrete-event simulator is the next step for percentiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from autotune.perf.ops import StepInput
from autotune.specs import StepBreakdown, Workload

StepFn = Callable[[StepInput], StepBreakdown]


@dataclass(frozen=True)
class Point:
    """One operating point of a whole deployment."""

    requests_per_s: float
    ttft_ms: float
    tpot_ms: float
    concurrency: float  # requests in flight
    steps: tuple[StepBreakdown, ...]


def _prefill_input(tokens: float, isl: int) -> StepInput:
    return StepInput(prefill_tokens=tokens, prefill_ctx=isl / 2)


def aggregated_point(
    step: StepFn, seqs: int, replicas: int, w: Workload, chunk: int, pp: int, spec: tuple[int, float] = (1, 1.0)
) -> Point:
    """`seqs` requests resident in each of `replicas` identical instances; `spec` = (tokens verified, tokens
    accepted) per decoding sequence and step (ops.speculation)."""
    width, accepted = spec
    decode_ctx = w.isl + w.osl / 2
    if seqs <= 1:
        first = step(_prefill_input(min(chunk, w.isl), w.isl))
        decode = step(StepInput(decode_seqs=1, decode_ctx=decode_ctx))
        ttft = math.ceil(w.isl / chunk) * first.step_ms
        tpot = decode.step_ms / accepted
        per_request_ms = ttft + w.osl * tpot
        return Point(replicas * 1e3 / per_request_ms, ttft, tpot, replicas, (first, decode))
    advance = accepted * w.isl / w.osl  # prompt tokens per decoding sequence per step, in steady state
    decoding = min(seqs - 1, chunk / (width + advance))
    decoding = max(decoding, 1.0)
    prompt_tokens = max(1.0, min(decoding * advance, chunk - decoding * width))
    mixed = step(StepInput(decoding / pp, decode_ctx, prompt_tokens / pp, w.isl / 2))
    t_ms = mixed.step_ms
    rate = min(decoding * accepted / w.osl, prompt_tokens / w.isl) / t_ms * 1e3  # requests/s per instance
    waiting = max(0.0, seqs - decoding - 1)
    ttft = t_ms * max(1.0, w.isl / prompt_tokens) + waiting / rate * 1e3
    return Point(rate * replicas, ttft, t_ms / accepted, seqs * replicas, (mixed,))


@dataclass(frozen=True)
class PrefillPool:
    requests_per_s: float
    ttft_ms: float  # prompt latency without queueing or KV transfer
    step: StepBreakdown


def prefill_pool(step: StepFn, replicas: int, w: Workload, chunk: int, pp: int) -> PrefillPool:
    tokens = min(chunk, max(w.isl, 1))
    s = step(_prefill_input(tokens, w.isl))
    stage_ms = s.step_ms / pp
    rate = replicas * tokens / (w.isl * stage_ms) * 1e3
    ttft = (math.ceil(w.isl / tokens) + pp - 1) * stage_ms
    return PrefillPool(rate, ttft, s)


def disaggregated_point(
    pre: PrefillPool,
    decode_step: StepFn,
    seqs: int,
    replicas: int,
    w: Workload,
    kv_transfer_ms: float,
    pp: int,
    accepted: float = 1.0,
) -> Point:
    """Decode instances each holding up to `seqs` sequences behind a prefill pool; each step advances every
    sequence by `accepted` tokens (speculative decoding; the prefill pool does not speculate)."""
    decode_ctx = w.isl + w.osl / 2
    steps_per_request = w.osl / accepted

    def decode_rate(b: float) -> tuple[float, StepBreakdown]:
        s = decode_step(StepInput(decode_seqs=b / pp, decode_ctx=decode_ctx))
        return replicas * b / (steps_per_request * s.step_ms) * 1e3, s

    rate, s = decode_rate(seqs)
    b = float(seqs)
    if rate > pre.requests_per_s:  # decode could go faster than prefill feeds it: find the batch it really runs
        lo, hi = 0.0, float(seqs)
        for _ in range(30):
            mid = (lo + hi) / 2
            if decode_rate(mid)[0] > pre.requests_per_s:
                hi = mid
            else:
                lo = mid
        b = max(hi, 1e-3)
        rate, s = decode_rate(b)
        rate = min(rate, pre.requests_per_s)
    ttft = pre.ttft_ms + kv_transfer_ms
    concurrency = rate * (ttft + steps_per_request * s.step_ms) / 1e3
    return Point(rate, ttft, s.step_ms / accepted, concurrency, (pre.step, s))


def candidate_sizes(limit: int) -> list[int]:
    """Resident-sequence counts to try: powers of two up to `limit`, and `limit` itself."""
    sizes, n = [], 1
    while n < limit:
        sizes.append(n)
        n *= 2
    sizes.append(max(1, limit))
    return sizes


def choose(points: list[Point], w: Workload) -> tuple[Point, bool]:
    """Pick the operating point for the workload; returns (point, whether the SLO holds there)."""

    def meets(p: Point) -> bool:
        return (not w.ttft_ms or p.ttft_ms <= w.ttft_ms) and (not w.tpot_ms or p.tpot_ms <= w.tpot_ms)

    if w.concurrency:
        within = [p for p in points if p.concurrency <= w.concurrency + 1e-9] or points[:1]
        best = max(within, key=lambda p: p.concurrency)
        return best, meets(best)
    if w.rate_rps:
        enough = [p for p in points if p.requests_per_s >= w.rate_rps]
        best = min(enough, key=lambda p: p.concurrency) if enough else max(points, key=lambda p: p.requests_per_s)
        return best, meets(best) and bool(enough)
    ok = [p for p in points if meets(p)]
    if ok:
        return max(ok, key=lambda p: p.requests_per_s), True
    return max(points, key=lambda p: p.requests_per_s), False
