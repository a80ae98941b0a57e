"""Steady-state serving: from step costs to request throughput, TTFT and TPOT.

Aggregated instances run continuous batching with chunked prefill: in steady state each step advances
`B` decoding sequences by `E` tokens (1; with speculative decoding the expected accepted length, ops.speculation)
and spends `P = B * E * isl / osl` prompt tokens (capped by the chunk budget, which the verified tokens share),
so requests finish at min(B * E / osl, P / isl) per step and TPOT is step / E. An engine that runs prompts in
prefill-only steps (SGLang's default; the profile's `mixed_prefill_chunks`) stalls its B decoding sequences for
them instead: each decode step carries the B * E / osl arriving prompts' prefill time (separate_point).
Disaggregated deployments run prefill-only instances and decode-only instances; the slower pool sets the rate and
KV moves between them. A prompt that arrives while an aggregated instance runs starts after the steps the engine's
loop has already scheduled (`pickup`, efficiency.pickup_lag_steps), as in the simulator. A disaggregated prefill
instance pays no such wait (its loop also runs a batch ahead: SGLang srt/disaggregation/prefill.py:758-800): with
no other prompt queued it has nothing scheduled ahead and starts the new one at the running step's end, and with
prompts queued the new one waits behind them anyway (FIFO). The simulator, which applies the lag to every instance,
agrees: SGLang / vLLM Qwen3-235B 1P1D TP4 on h200-x8, 4k/256 at 6.5 req/s, mean TTFT 1,066 / 986 ms with the lag,
1,057 / 979 ms without; closed loops of 24 and 256 requests within 0.2%.
Values are steady-state means: the search's screen. Percentiles, bursts and length mixes come from the
discrete-event simulator over these step costs (autotune/sim/serve.py), which re-ranks the screen's best plans.

Under an offered load R below capacity (`--rate`, open loop) the deployment serves R: the *_at_rate functions find
the batch where the modelled throughput equals R (bisection over the decoding batch, a continuous mean) and give
TTFT/TPOT there. Queueing for the prefill server is M/D/1 (Poisson arrivals, deterministic service;
Pollaczek-Khinchine: Wq = rho * S / (2 (1 - rho))); waiting for a free batch slot when max_running or the KV
capacity binds is not modelled (it stays small until utilisation nears 1), nor are bursts or length mixes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from autotune.perf.ops import StepInput
from autotune.specs import StepBreakdown, Workload

StepFn = Callable[[StepInput], StepBreakdown]  # or a TimedStep (ops.step_fn): serving reads step_ms only


class Point(NamedTuple):
    """One operating point of a whole deployment. Immutable (a NamedTuple: a V4.1 prediction builds ~8, and a frozen
    dataclass's __init__, one object.__setattr__ per field, costs ~3x the NamedTuple's tuple.__new__)."""

    requests_per_s: float
    ttft_ms: float
    tpot_ms: float
    concurrency: float  # requests in flight
    steps: tuple[StepBreakdown, ...]


class Ranks(NamedTuple):
    """The attention-DP ranks of an instance, each prompt on one of them (opcore.rank_prompt_tokens): how many, and
    one rank's prompt tokens per step (sharding.rank_chunk)."""

    dp: int = 1
    chunk: float = math.inf
    # each rank prefills apart from its own decodes while the others decode beside it (sharding.dp_prefill_apart):
    # the steps mix prompts and decodes (aggregated_point's mixed path) but the prompts' budget is theirs alone
    apart: bool = False


NO_DP = Ranks()


def _input(ranks: Ranks, d: float, dctx: float, p: float, pctx: float, piece: float, pp: int = 1) -> StepInput:
    """The StepInput (per micro-batch: / pp) of `d` decoding sequences and `p` prompt tokens in pieces of `piece`
    (one prompt's tokens in the step), with the busiest attention-DP rank's prompt tokens expected as the round
    robin (sim/engine.py) places the pieces: ceil(pieces / dp) of them on the busiest rank, within its budget and
    the step's tokens, at least the even spread. A lone prompt is all on one rank; dp or more pieces spread. The
    pieces are the step's prompts (StepInput.prefill_seqs, per micro-batch)."""
    if not p:
        return StepInput(d / pp, dctx, p / pp, pctx)
    seqs = p / max(piece, 1.0) / pp
    if ranks.dp <= 1:
        return StepInput(d / pp, dctx, p / pp, pctx, 1.0, 0.0, seqs)
    even = p / ranks.dp
    busiest = min(p, ranks.chunk, max(even, math.ceil(p / max(piece, 1.0) / ranks.dp - 1e-9) * piece))
    return StepInput(d / pp, dctx, p / pp, pctx, 1.0, busiest / pp if busiest > even * (1 + 1e-9) else 0.0, seqs)


def _prefill_input(tokens: float, ctx: float, ranks: Ranks = NO_DP, piece: float = 0.0) -> StepInput:
    return _input(ranks, 0.0, 0.0, tokens, ctx, piece or tokens)


def _prompt(w: Workload) -> tuple[float, float]:
    """(prompt tokens a request computes, their mean attention context): the prefix cache already holds the
    first `prefix_hit_rate` of each prompt (its KV is read by the rest, not computed)."""
    computed = max(1.0, w.isl * (1.0 - w.prefix_hit_rate))
    return computed, w.isl - computed / 2


def aggregated_point(
    step: StepFn,
    seqs: int,
    replicas: int,
    w: Workload,
    chunk: int,
    pp: int,
    spec: tuple[int, float] = (1, 1.0),
    mixed: bool = True,
    pickup: float = 0.0,
    ranks: Ranks = NO_DP,
) -> Point:
    """`seqs` requests resident in each of `replicas` identical instances; `spec` = (tokens verified, tokens
    accepted) per decoding sequence and step (ops.speculation); `mixed`: prompt chunks ride in the decode steps
    (the engine profile's `mixed_prefill_chunks`), else prompts run in prefill-only steps (separate_point);
    `pickup`: steps the engine's loop has already scheduled when it reads a request that arrives while others run
    (efficiency.pickup_lag_steps): a closed loop's request, sent when its predecessor finishes at a step boundary,
    starts that many (mean) steps later; with one request per instance it finds the instance idle and starts at
    once. sim/engine.py admits by the same rule.
    `ranks`: the attention-DP ranks, each prompt on one (_input)."""
    width, accepted = spec
    decode_ctx = w.isl + w.osl / 2
    prompt, prompt_ctx = _prompt(w)
    if seqs > 1 and not mixed:
        return separate_point(step, seqs, replicas, w, chunk, pp, spec, pickup, ranks)
    if seqs <= 1:
        alone = min(chunk, ranks.chunk, prompt)  # a lone prompt runs on one rank, in its budget
        first = step(_prefill_input(alone, prompt_ctx, ranks))
        decode = step(StepInput(decode_seqs=1, decode_ctx=decode_ctx))
        ttft = math.ceil(prompt / alone) * first.step_ms
        tpot = decode.step_ms / accepted
        per_request_ms = ttft + w.osl * tpot
        return Point(replicas * 1e3 / per_request_ms, ttft, tpot, replicas, (first, decode))
    advance = accepted * prompt / w.osl  # prompt tokens per decoding sequence per step, in steady state
    budget_w = 0.0 if ranks.apart else width  # decode tokens a step's prompt budget gives up per sequence
    decoding = min(seqs - 1, chunk / (budget_w + advance))
    decoding = max(decoding, 1.0)
    need = decoding * advance  # prompt tokens the decoding sequences' successors bring per step, on average
    piece = max(1.0, min(prompt, chunk - decoding * budget_w, ranks.chunk))  # a prompt's share of a free step
    if need < piece * (1 - 1e-9):  # (equal at the budget's equilibrium) the prompts run as fast as the budget
        # allows (the scheduler does not ration them): a share of the steps carries one `piece`, the others only
        # decode (sim/engine.py agrees); a request holds its slot for ceil(isl/piece) prompt steps, then
        # osl/accepted decode steps
        steps = w.osl / accepted
        held = max(1.0, seqs * steps / (steps + math.ceil(prompt / piece)))  # decoding, on average
        held_piece = max(1.0, min(prompt, chunk - held * budget_w, ranks.chunk))
        if held * advance < held_piece:  # else the prompt budget binds after all: every step carries prompts
            mixed = step(_input(ranks, held, decode_ctx, held_piece, prompt_ctx, held_piece, pp))
            decode = step(StepInput(held / pp, decode_ctx))
            share = held * advance / held_piece
            t_ms = share * mixed.step_ms + (1 - share) * decode.step_ms
            rate = held * accepted / w.osl / t_ms * 1e3  # requests/s per instance
            ttft = mixed.step_ms * prompt / held_piece + pickup * t_ms
            return Point(rate * replicas, ttft, t_ms / accepted, seqs * replicas, (mixed, decode))
    prompt_tokens = max(1.0, min(need, chunk - decoding * budget_w))  # every step carries prompt tokens
    mixed = step(_input(ranks, decoding, decode_ctx, prompt_tokens, prompt_ctx, min(prompt, prompt_tokens), pp))
    t_ms = mixed.step_ms
    rate = min(decoding * accepted / w.osl, prompt_tokens / prompt) / t_ms * 1e3  # requests/s per instance
    waiting = max(0.0, seqs - decoding - 1)
    # a request queued for the prompt budget is read while it waits: the loop's lag hides in that queue; a prompt
    # runs on one rank
    ttft = t_ms * max(1.0, prompt / min(prompt_tokens, ranks.chunk)) + max(waiting / rate * 1e3, pickup * t_ms)
    return Point(rate * replicas, ttft, t_ms / accepted, seqs * replicas, (mixed,))


def _prefill_batch(piece: float, arrivals: float, chunk: int) -> float:
    """Prompt tokens in one prefill-only step: the prompts that arrive during a decode step, each a `piece` (the
    prompt, or the chunk of it its rank's budget takes: _piece), packed up to the chunk budget."""
    return max(1.0, min(float(chunk), max(piece, arrivals * piece)))


def _piece(prompt: float, chunk: int, ranks: Ranks) -> float:
    """A prompt's tokens in one step: the prompt, or the chunk of it that the budget (its rank's, ranks.chunk, under
    attention DP) takes."""
    return max(1.0, min(prompt, float(chunk), ranks.chunk))


def separate_point(
    step: StepFn,
    seqs: int,
    replicas: int,
    w: Workload,
    chunk: int,
    pp: int,
    spec: tuple[int, float] = (1, 1.0),
    pickup: float = 0.0,
    ranks: Ranks = NO_DP,
) -> Point:
    """Steady state of an engine that runs prompts in prefill-only steps (SGLang without --enable-mixed-chunk,
    its default; sim/engine.py runs the same rule): while prompts wait, a prefill step takes the whole chunk
    budget and the `seqs` decoding sequences wait for it. Per decode step seqs * accepted / osl requests finish
    and as many prompts arrive (closed loop), so each decode step carries that share of prefill time: the step
    a decoding request sees (TPOT) is decode + its share of prefill, and a prompt's first token comes when its
    prefill steps end (it is sent at the step boundary that finished its predecessor, and `pickup` decode steps
    the engine's loop had already scheduled run first: aggregated_point)."""
    _, accepted = spec
    decode_ctx = w.isl + w.osl / 2
    prompt, prompt_ctx = _prompt(w)
    arrivals = seqs * accepted / w.osl  # prompts per decode step
    piece = _piece(prompt, chunk, ranks)
    batch = _prefill_batch(piece, arrivals, chunk)
    decode = step(StepInput(seqs / pp, decode_ctx))
    fill = step(_input(ranks, 0.0, 0.0, batch, prompt_ctx, piece, pp))
    cycle_ms = decode.step_ms + arrivals * prompt * fill.step_ms / batch
    rate = arrivals / cycle_ms * 1e3  # requests/s per instance
    ttft = math.ceil(prompt / piece) * fill.step_ms + pickup * decode.step_ms
    return Point(rate * replicas, ttft, cycle_ms / accepted, seqs * replicas, (fill, decode))


@dataclass(frozen=True)
class PrefillPool:
    requests_per_s: float  # capacity of the pool: every step full
    ttft_ms: float  # prompt latency in a full step, without queueing or KV transfer
    step: StepBreakdown  # a full step (chunk tokens)
    lone_ttft_ms: float = 0.0  # prompt latency on an otherwise idle instance
    replicas: int = 1


def prefill_pool(step: StepFn, replicas: int, w: Workload, chunk: int, pp: int, ranks: Ranks = NO_DP) -> PrefillPool:
    """Prefill-only instances. Saturated, each step fills the whole token budget: prompts shorter than the chunk
    are packed several per step (vLLM and SGLang schedule waiting prompts until max_num_batched_tokens /
    chunked_prefill_size is reached, chunking the last one), longer ones are chunked. A lone prompt runs on one
    attention-DP rank, in its budget (`ranks`)."""
    prompt, prompt_ctx = _prompt(w)
    piece = _piece(prompt, chunk, ranks)
    s = step(_prefill_input(chunk, prompt_ctx, ranks, piece))
    stage_ms = s.step_ms / pp
    rate = replicas * chunk / (prompt * stage_ms) * 1e3
    ttft = (math.ceil(prompt / piece) + pp - 1) * stage_ms
    alone = piece
    lone = s if alone == chunk else step(_prefill_input(alone, prompt_ctx, ranks))
    lone_ttft = (math.ceil(prompt / alone) + pp - 1) * lone.step_ms / pp
    return PrefillPool(rate, ttft, s, lone_ttft, replicas)


def md1_wait_ms(rho: float, service_ms: float) -> float:
    """Mean queueing delay of an M/D/1 server at utilisation rho (Pollaczek-Khinchine)."""
    return math.inf if rho >= 1.0 else rho * service_ms / (2.0 * (1.0 - rho))


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
    ttft = pre.ttft_ms + kv_transfer_ms  # prefill-bound: every prefill step full
    if rate < pre.requests_per_s * (1 - 1e-9):  # decode-bound: a closed loop's prompts mostly meet an idle
        ttft = min(ttft, pre.lone_ttft_ms + kv_transfer_ms)  # prefill instance (the simulator has the spread)
    concurrency = rate * (ttft + steps_per_request * s.step_ms) / 1e3
    return Point(rate, ttft, s.step_ms / accepted, concurrency, (pre.step, s))


def aggregated_at_rate(
    step: StepFn,
    limit: int,
    replicas: int,
    w: Workload,
    chunk: int,
    pp: int,
    rate_rps: float,
    spec: tuple[int, float] = (1, 1.0),
    mixed: bool = True,
    pickup: float = 0.0,
    ranks: Ranks = NO_DP,
) -> Point:
    """Aggregated instances (up to `limit` requests each) under an offered load below their capacity: each gets
    rate_rps / replicas and settles at the mean decoding batch `d` where the mixed step serves exactly that
    (d * accepted / osl per step, carrying d * isl * accepted / osl prompt tokens). TPOT is the step a decoding
    request sees (at least itself in the batch); TTFT = its prompt run in steps carrying up to the budget left
    by the decode tokens (chunk - d * width), plus half a step (arrivals wait for the running step to end),
    plus M/D/1 queueing for that prompt budget (rho = the share of it the arrivals use), plus `pickup` steps the
    engine's loop had already scheduled (aggregated_point) for the arrivals that find requests running (at most
    the mean decoding batch's share: Little)."""
    width, accepted = spec
    r = rate_rps / replicas / 1e3  # requests per ms per instance
    decode_ctx = w.isl + w.osl / 2
    prompt, prompt_ctx = _prompt(w)
    if limit <= 1:  # one request at a time: the instance is an M/D/1 server of whole requests
        lone = aggregated_point(step, 1, 1, w, chunk, pp, spec, ranks=ranks)
        service = lone.ttft_ms + w.osl * lone.tpot_ms
        ttft = lone.ttft_ms + md1_wait_ms(r * service, service)
        return Point(rate_rps, ttft, lone.tpot_ms, rate_rps * (ttft + w.osl * lone.tpot_ms) / 1e3, lone.steps)
    if not mixed:
        return separate_at_rate(step, limit, w, chunk, pp, r, rate_rps, spec, pickup, ranks)
    advance = accepted * prompt / w.osl  # prompt tokens per decoding sequence per step, in steady state
    budget_w = 0.0 if ranks.apart else width  # as in aggregated_point

    def mean_step(d: float) -> tuple[float, StepBreakdown]:
        """(mean step ms, the step that carries prompt tokens) with `d` decoding: prompts that fit the free
        budget run whole in a share of the steps, as in aggregated_point; otherwise every step carries some."""
        piece = max(1.0, min(prompt, chunk - d * budget_w, ranks.chunk))
        need = d * advance
        if need < piece:
            mixed = step(_input(ranks, d, decode_ctx, piece, prompt_ctx, piece, pp))
            share = need / piece
            return share * mixed.step_ms + (1 - share) * step(StepInput(d / pp, decode_ctx)).step_ms, mixed
        mixed = step(_input(ranks, d, decode_ctx, need, prompt_ctx, min(prompt, need), pp))
        return mixed.step_ms, mixed

    lo, hi = 0.0, max(1.0, min(limit - 1.0, chunk / (budget_w + advance)))
    for _ in range(40):
        mid = (lo + hi) / 2
        if mid * accepted / w.osl / mean_step(mid)[0] < r:
            lo = mid
        else:
            hi = mid
    d = hi
    mean_ms, mean = mean_step(d)
    tpot = (mean_ms if d >= 1.0 else mean_step(1.0)[0]) / accepted
    budget = max(1.0, chunk - d * budget_w)
    piece = min(prompt, budget, ranks.chunk)
    first = step(_input(ranks, d, decode_ctx, piece, prompt_ctx, piece, pp))
    rho = min(1.0, d * advance / budget)
    ttft = first.step_ms * prompt / piece + mean_ms / 2 + md1_wait_ms(rho, mean_ms * prompt / budget)
    ttft += pickup * mean_ms * min(1.0, d)
    return Point(rate_rps, ttft, tpot, rate_rps * (ttft + w.osl * tpot) / 1e3, (mean,))


def separate_at_rate(
    step: StepFn,
    limit: int,
    w: Workload,
    chunk: int,
    pp: int,
    r: float,
    rate_rps: float,
    spec: tuple[int, float],
    pickup: float = 0.0,
    ranks: Ranks = NO_DP,
) -> Point:
    """aggregated_at_rate for prefill-only steps (separate_point): the mean decoding batch `d` whose cycle (a
    decode step and its share of prefill) serves `r` requests per ms; TTFT = the prompt's prefill steps, plus
    half a cycle (arrivals wait for the running step), plus M/D/1 queueing for the prefill work (rho = the share
    of time spent in prefill), plus the `pickup` decode steps already scheduled (aggregated_at_rate)."""
    _, accepted = spec
    decode_ctx = w.isl + w.osl / 2
    prompt, prompt_ctx = _prompt(w)
    piece = _piece(prompt, chunk, ranks)

    def cycle(d: float) -> tuple[float, float, StepBreakdown]:
        """(cycle ms, its prefill ms, the decode step) with `d` decoding."""
        arrivals = d * accepted / w.osl
        batch = _prefill_batch(piece, arrivals, chunk)
        fill_ms = arrivals * prompt * step(_input(ranks, 0.0, 0.0, batch, prompt_ctx, piece, pp)).step_ms / batch
        decode = step(StepInput(max(d, 1e-3) / pp, decode_ctx))
        return decode.step_ms + fill_ms, fill_ms, decode

    lo, hi = 0.0, max(1.0, limit - 1.0)
    for _ in range(40):
        mid = (lo + hi) / 2
        if mid * accepted / w.osl / cycle(mid)[0] < r:
            lo = mid
        else:
            hi = mid
    cycle_ms, fill_ms, decode = cycle(hi)
    tpot = (cycle_ms if hi >= 1.0 else cycle(1.0)[0]) / accepted
    batch = _prefill_batch(piece, hi * accepted / w.osl, chunk)
    lone = math.ceil(prompt / piece) * step(_input(ranks, 0.0, 0.0, batch, prompt_ctx, piece, pp)).step_ms
    rho = min(1.0, fill_ms / cycle_ms)
    ttft = lone + cycle_ms / 2 + md1_wait_ms(rho, lone) + pickup * decode.step_ms * min(1.0, hi)
    return Point(rate_rps, ttft, tpot, rate_rps * (ttft + w.osl * tpot) / 1e3, (decode,))


def disaggregated_at_rate(
    pre: PrefillPool,
    decode_step: StepFn,
    limit: int,
    replicas: int,
    w: Workload,
    kv_transfer_ms: float,
    pp: int,
    rate_rps: float,
    accepted: float = 1.0,
) -> Point:
    """Prefill and decode pools under an offered load below the deployment's capacity: the decode instances
    settle at the batch that serves rate_rps; each prefill instance is an M/D/1 server of prompts (service =
    its capacity per prompt) in front of the prompt's own latency on an idle instance."""
    decode_ctx = w.isl + w.osl / 2
    steps_per_request = w.osl / accepted

    def decode_rate(b: float) -> float:
        s = decode_step(StepInput(decode_seqs=b / pp, decode_ctx=decode_ctx))
        return replicas * b / (steps_per_request * s.step_ms) * 1e3

    lo, hi = 0.0, float(max(1, limit))
    for _ in range(40):
        mid = (lo + hi) / 2
        if decode_rate(mid) < rate_rps:
            lo = mid
        else:
            hi = mid
    s = decode_step(StepInput(decode_seqs=max(hi, 1.0) / pp, decode_ctx=decode_ctx))
    tpot = s.step_ms / accepted
    rho = rate_rps / pre.requests_per_s
    ttft = pre.lone_ttft_ms + md1_wait_ms(rho, pre.replicas / pre.requests_per_s * 1e3) + kv_transfer_ms
    return Point(rate_rps, ttft, tpot, rate_rps * (ttft + w.osl * tpot) / 1e3, (pre.step, s))


def candidate_sizes(limit: int) -> list[int]:
    """Resident-sequence counts to try: powers of two up to `limit`, and `limit` itself."""
    sizes, n = [], 1
    while n < limit:
        sizes.append(n)
        n *= 2
    sizes.append(max(1, limit))
    return sizes


def meets(p: Point, w: Workload) -> bool:
    return w.meets_slo(p.ttft_ms, p.tpot_ms)


def choose(points: list[Point], w: Workload) -> tuple[Point, bool]:
    """Pick the closed-loop operating point for the workload; returns (point, whether the SLO holds there). An
    offered rate below capacity is served by the *_at_rate functions; at or above it the deployment runs
    saturated (its maximum throughput) while the queue grows without bound: no TTFT SLO can hold."""
    if w.concurrency:
        within = [p for p in points if p.concurrency <= w.concurrency + 1e-9] or points[:1]
        best = max(within, key=lambda p: p.concurrency)
        return best, meets(best, w)
    if w.rate_rps:
        best = max(points, key=lambda p: p.requests_per_s)
        return best, meets(best, w) and not w.ttft_ms
    ok = [p for p in points if meets(p, w)]
    if ok:
        return max(ok, key=lambda p: p.requests_per_s), True
    return max(points, key=lambda p: p.requests_per_s), False
