"""Discrete-event simulation of one deployment serving a request trace, stepped with the performance model's step
costs (perf/ops.step_fn, through StepCache: the simulator never costs a step itself).

Each engine instance runs continuous batching the way vLLM's scheduler does at a step boundary: decoding
requests first (each runs `width` tokens: 1, or 1 + draft tokens), then prompts already admitted take chunks of
the remaining token budget (`chunked_prefill_tokens`), then waiting requests are admitted in arrival order while
the budget, `max_running` and the KV cache allow. SGLang (without --enable-mixed-chunk, its default:
engines/flags/sglang-0.5.23.yaml) does not mix them: while prompts wait or are being chunked, a prefill-only
step takes the whole budget and the decoding requests wait for it; otherwise a decode-only step runs.

KV is reserved for a request's whole length (input + output) when it is admitted, so a full cache queues
requests instead of preempting them (vLLM's recompute preemption is not modelled: it changes who waits, not how
much work is done). A prefix-cache hit rate h skips the first h * input tokens of each prompt's compute (their
KV is still held). With pp > 1 a step runs the batch as pp
micro-batches in flight, as the steady-state model does (perf/serving.py). A request's first token comes at the
end of the step that finishes its prompt; with speculative decoding each step advances a request by the expected
accepted length on average. A request that arrives while the instance runs joins at the step boundary after its
arrival, or `pickup` steps later where the engine's loop schedules the next step while the current one runs (SGLang's
overlap loop, vLLM's async scheduling: perf/efficiency.pickup_lag_steps); one that finds it idle starts at once.

Decode-only stretches with an unchanged batch are advanced in one segment up to the next event (a request
finishing, an arrival that can be admitted, or the context growing by a bucket), so the cost grows with the
number of requests, not the number of steps.

Deployments: replicas of one instance behind a round-robin router (vllm-router runs with --policy round_robin,
engines/routers.py); in a closed loop each replica keeps its share of the concurrency (the router alternates,
so the shares stay even). Disaggregated: prefill-only instances (round-robin) whose finished prompts move their
KV to a decode instance (round-robin) in `kv_transfer_ms`; the client sees the first token when the KV lands.
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from autotune.sim.step_cache import StepCache
from autotune.sim.trace import Request

INF = math.inf
CTX_DRIFT = 0.1  # a decode segment ends once its mean context has grown by this share (a new context bucket)
_TAKE = operator.itemgetter(1)  # a step's chunk's tokens: (prefilling item, tokens)


@dataclass(frozen=True)
class InstanceSpec:
    role: str  # both | prefill | decode
    cache: StepCache
    max_running: int
    chunk: int  # token budget per step
    kv_tokens: int  # KV cache capacity, tokens
    width: int = 1  # tokens each decoding request runs per step (1 + draft tokens)
    accepted: float = 1.0  # tokens each decoding request advances per step, on average
    prefix_hit_rate: float = 0.0
    mixed: bool = True  # prompt chunks ride in the decode steps (vLLM); False: prefill-only steps first (SGLang)
    # 0: prompts are chunked into the instance's pooled budget (vLLM, SGLang). n > 0: prompts run whole, each on one
    # of n attention-DP ranks that schedules its own step under its own budget (chunk / n), its decoding requests
    # (an even share of the instance's) counted first: TensorRT-LLM without chunked prefill, where a context request
    # that does not fit the rank's remaining max_num_tokens waits for a later step (PyMicroBatchScheduler.schedule,
    # "No Chunking: Greedy allocation", tensorrt_llm/_torch/pyexecutor/scheduler.py, commit 034fffb)
    whole_prompt_ranks: int = 0
    # attention-DP ranks (the phase's dp): each prompt runs on one of them (opcore.rank_prompt_tokens; round robin,
    # SGLang's default load_balance_method: srt/arg_groups/serving_hook.py:222-234,
    # srt/managers/data_parallel_controller.py:880-890; vLLM's client picks the least loaded engine, round robin
    # from its start index while they are even: v1/engine/core_client.py:1829-1860) and the step costs the busiest
    # rank's prompt tokens on the attention side. `rank_chunk`: one rank's prompt budget per step (0: the pooled
    # budget only; SGLang: chunk / dp, srt/arg_groups/parallel_hook.py:326-331)
    dp_ranks: int = 1
    rank_chunk: int = 0
    budget_apart: bool = False  # mixed steps whose prompt budget is not shared with decodes (sharding.dp_prefill_apart)
    # steps a request arriving while the instance runs waits after the next step boundary before it can join: the
    # engine loop's batches already scheduled (perf/efficiency.pickup_lag_steps); 0: it joins at that boundary
    pickup: float = 0.0


class Outcome:
    """Per-request times (ms) filled in by the simulation."""

    def __init__(self, trace: tuple[Request, ...]):
        n = len(trace)
        self.arrival_ms = [r.arrival_s * 1e3 for r in trace]
        self.isl = [r.input_tokens for r in trace]
        self.osl = [r.output_tokens for r in trace]
        self.admit_ms = [0.0] * n  # admitted to a batch (first instance)
        self.first_ms = [0.0] * n  # first token at the client
        self.done_ms = [0.0] * n
        self.in_system_area_ms = 0.0  # integral of requests held by instances over time (Little's law check)
        self.steps = 0


class Instance:
    def __init__(self, spec: InstanceSpec, out: Outcome, on_done: Callable[[int, float], None]):
        self.s, self.out, self.on_done = spec, out, on_done
        self.clock = 0.0
        self.steps = 0  # steps run
        self.dsteps = 0  # steps that advanced the decoding requests (all of them when prompts mix in)
        self.future: list[tuple[float, int]] = []  # (arrival ms, request) not yet at the instance
        self.waiting: deque[int] = deque()
        self.prefilling: deque[list] = deque()  # [request, prompt tokens left, context so far, attention-DP rank]
        self.decoders: list[tuple[int, int]] = []  # heap of (step at whose end it finishes, request)
        self.ctx_sum = 0.0  # sum over decoders of (context when it joined - accepted * step it joined at)
        self.kv_used = 0
        self.emitted: list[tuple[int, float]] = []  # prefill role: (request, time its prompt finished)
        self.terms: dict[int, float] = {}  # decoder -> its term of ctx_sum
        self.step_ms = 0.0  # the last step's time (a segment's per step)
        self.next_rank = 0  # the attention-DP rank the next admitted prompt goes to (round robin)

    def arrive(self, t_ms: float, rid: int) -> None:
        heapq.heappush(self.future, (t_ms, rid))

    @property
    def busy(self) -> bool:
        return bool(self.future or self.waiting or self.prefilling or self.decoders)

    def next_time(self) -> float:
        """When this instance acts next: now if it holds work, else when its next request arrives."""
        if self.waiting or self.prefilling or self.decoders:
            return self.clock
        return max(self.clock, self.future[0][0]) if self.future else INF

    def _kv_fit(self, rid: int) -> tuple[int, bool, bool]:
        """(KV tokens request `rid` reserves, whether the instance holds no work, whether its cache takes the request
        now: a request larger than the cache still runs alone)."""
        need = self.out.isl[rid] + self.out.osl[rid]
        idle = not self.decoders and not self.prefilling
        return need, idle, idle or self.kv_used + need <= self.s.kv_tokens

    def _take(self, items, chunks: list, left: float, ranks: list | None, taken: list | None) -> None:
        """Append (item, tokens) to `chunks` for the prompts `items` in order: each takes what is left of its
        prompt, the pooled budget `left` and its rank's budget (`ranks`, None: no per-rank budget); `taken`: each
        rank's prompt tokens in the step so far, added to (None with one rank)."""
        for item in items:
            if left <= 0:
                return
            take = min(item[1], left)
            if ranks is not None:
                take = min(take, ranks[item[3]])
                if take <= 0:
                    continue
                ranks[item[3]] -= take
            if taken is not None:
                taken[item[3]] += take
            chunks.append((item, take))
            left -= take

    def _admit(self, budget: int, ranks: list | None = None) -> None:
        s, out = self.s, self.out
        ranks = list(ranks) if ranks is not None else None  # what each rank has left after this step's admissions
        while self.waiting and len(self.decoders) + len(self.prefilling) < s.max_running:
            rid = self.waiting[0]
            need, _, fits = self._kv_fit(rid)
            if not fits:
                return
            if s.role != "decode" and (budget <= 0 or (ranks is not None and ranks[self.next_rank] <= 0)):
                return
            self.waiting.popleft()
            self.kv_used += need
            if s.role == "decode":
                self._join_decode(rid, out.isl[rid] + 1, out.osl[rid] - 1)
                continue
            out.admit_ms[rid] = self.clock
            hit = int(out.isl[rid] * s.prefix_hit_rate)
            self.prefilling.append([rid, out.isl[rid] - hit, hit, self.next_rank])
            if ranks is not None:
                ranks[self.next_rank] -= out.isl[rid] - hit
            self.next_rank = (self.next_rank + 1) % s.dp_ranks
            budget -= out.isl[rid] - hit

    def _admit_whole(self, n: int) -> int:
        """InstanceSpec.whole_prompt_ranks: admit waiting prompts whole, each to the rank with the most budget
        left, while one fits there; the prompt tokens admitted (this step runs them all)."""
        s, out = self.s, self.out
        r = s.whole_prompt_ranks
        room = [s.chunk / r - (n // r + (i < n % r)) * s.width for i in range(r)]  # decoding requests first
        total = 0
        while self.waiting and len(self.decoders) + len(self.prefilling) < s.max_running:
            rid = self.waiting[0]
            need, idle, fits = self._kv_fit(rid)
            if not fits:
                break
            tokens = out.isl[rid] - int(out.isl[rid] * s.prefix_hit_rate)
            i = max(range(r), key=room.__getitem__)
            if room[i] < tokens and not idle:
                break
            room[i] -= tokens
            self.waiting.popleft()
            self.kv_used += need
            out.admit_ms[rid] = self.clock
            self.prefilling.append([rid, tokens, out.isl[rid] - tokens, i])
            total += tokens
        return total

    def _prompt_done(self, rid: int) -> None:
        out = self.out
        if self.s.role == "prefill":  # the request leaves for a decode instance with its KV
            self.kv_used -= out.isl[rid] + out.osl[rid]
            self.emitted.append((rid, self.clock))
        else:  # its first token comes with the step that finished the prompt
            out.first_ms[rid] = self.clock
            self._join_decode(rid, out.isl[rid] + 1, out.osl[rid] - 1)

    def _join_decode(self, rid: int, ctx: int, tokens_left: int) -> None:
        if tokens_left <= 0:
            self._finish(rid)
            return
        steps = math.ceil(tokens_left / self.s.accepted - 1e-9)
        heapq.heappush(self.decoders, (self.dsteps + steps, rid))
        term = self.terms[rid] = ctx - self.s.accepted * self.dsteps
        self.ctx_sum += term

    def _finish(self, rid: int) -> None:
        self.kv_used -= self.out.isl[rid] + self.out.osl[rid]
        self.out.done_ms[rid] = self.clock
        self.on_done(rid, self.clock)

    def advance(self, horizon_ms: float) -> None:
        """Run one step, or one decode-only segment ending no later than `horizon_ms` (when another instance
        may hand this one a request)."""
        s, out = self.s, self.out
        seen = self.clock  # requests that arrived by then can join now (InstanceSpec.pickup)
        if not (self.waiting or self.prefilling or self.decoders):  # idle: the loop reads and runs it at once
            seen = self.clock = max(self.clock, self.future[0][0])
        elif s.pickup:  # busy: read at the boundary after its arrival, it runs after the batches already scheduled
            seen -= s.pickup * self.step_ms
        while self.future and self.future[0][0] <= seen:
            t, rid = heapq.heappop(self.future)
            out.in_system_area_ms += self.clock - t  # held since it arrived, before the loop read it
            self.waiting.append(rid)
        n = len(self.decoders)
        decode_w = s.width if s.mixed and not s.budget_apart else 0  # decode tokens the prompt budget gives up
        budget = s.chunk - n * decode_w
        # each attention-DP rank's own prompt budget (InstanceSpec.rank_chunk), its even share of the decoders first
        ranks = [s.rank_chunk - n * decode_w / s.dp_ranks] * s.dp_ranks if s.rank_chunk else None
        # prompts already admitted take their chunks first, in order; `taken`: each attention-DP rank's tokens
        chunks, left, taken = [], budget, [0.0] * s.dp_ranks if s.dp_ranks > 1 else None
        if self.prefilling:
            self._take(self.prefilling, chunks, left, ranks, taken)
            left -= sum(map(_TAKE, chunks))
        before = len(self.prefilling)
        if s.whole_prompt_ranks:
            left = self._admit_whole(n)
            ranks = None
        elif self.waiting:
            self._admit(left, ranks)
        if len(self.prefilling) > before:
            self._take(itertools.islice(self.prefilling, before, None), chunks, left, ranks, taken)
        accepted = s.accepted
        dctx = self.ctx_sum / n + accepted * self.dsteps if n else 0.0
        if chunks:
            p = sum(map(_TAKE, chunks))
            pctx = sum(t * (item[2] + t / 2) for item, t in chunks) / p
            busiest = max(taken) if taken else 0.0  # the busiest attention-DP rank's
            if s.mixed:
                k, ms, advanced = 1, s.cache.ms(n, dctx, p, pctx, busiest, len(chunks)), n
            else:  # SGLang without --enable-mixed-chunk: a prefill batch runs alone, the decoding requests wait
                k, ms, advanced = 1, s.cache.ms(0, 0, p, pctx, busiest, len(chunks)), 0
        elif n:
            advanced = n
            ms = s.cache.ms(n, dctx, 0, 0)
            k = self.decoders[0][0] - self.dsteps
            k = min(k, max(1, int(CTX_DRIFT * dctx / accepted)))
            if self.prefilling:  # prompts wait for their ranks' budgets (InstanceSpec.rank_chunk): one step
                k = 1
            room = len(self.decoders) + len(self.prefilling) < s.max_running
            if self.future and room:  # stop at the step boundary where the next arrival can join
                k = min(k, max(1, math.ceil((self.future[0][0] - self.clock) / ms + s.pickup)))
            if horizon_ms < INF:
                k = min(k, max(1, int((horizon_ms - self.clock) / ms)))
            if k > 1:  # cost the segment at its middle context
                ms = s.cache.ms(n, dctx + accepted * (k - 1) / 2, 0, 0)
        else:  # waiting requests that cannot be admitted with nothing running cannot happen (_admit runs one alone)
            return
        dt = k * ms
        self.step_ms = ms
        out.in_system_area_ms += (n + len(self.prefilling) + len(self.waiting)) * dt
        self.clock += dt
        self.steps += k
        if advanced:
            self.dsteps += k
        out.steps += k
        for item, take in chunks:
            item[1] -= take
            item[2] += take
        if chunks:  # prompts this step finished (in order, or a later short one inside the same step)
            finished = [item[0] for item in self.prefilling if item[1] <= 0]
            if finished:
                self.prefilling = deque(item for item in self.prefilling if item[1] > 0)
                for rid in finished:
                    self._prompt_done(rid)
        while self.decoders and self.decoders[0][0] <= self.dsteps:
            _, rid = heapq.heappop(self.decoders)
            self.ctx_sum -= self.terms.pop(rid)
            self._finish(rid)


@dataclass(frozen=True)
class Deployment:
    """What the simulator needs of a plan: instance specs per pool, replica counts, the KV hand-off."""

    mode: str  # aggregated | disaggregated
    instance: InstanceSpec  # aggregated: every replica; disaggregated: the decode instances
    replicas: int
    prefill: InstanceSpec | None = None
    prefill_replicas: int = 0
    kv_transfer_ms: float = 0.0


def simulate(dep: Deployment, trace: tuple[Request, ...], concurrency: int = 0) -> Outcome:
    """Run the trace through the deployment. `concurrency` > 0: closed loop (the trace's arrival times are
    ignored; each finished request releases the next one); 0: the trace's arrival times."""
    out = Outcome(trace)
    n = len(trace)
    if dep.mode == "aggregated":
        _aggregated(dep, out, n, concurrency)
    else:
        _disaggregated(dep, out, n, concurrency)
    return out


def _aggregated(dep: Deployment, out: Outcome, n: int, concurrency: int) -> None:
    # replicas do not interact: each runs its round-robin share of the trace; a closed loop with fewer requests in
    # flight than replicas keeps only that many replicas busy at a time, as if `concurrency` replicas served it
    replicas = min(dep.replicas, concurrency or dep.replicas, n)
    for r in range(replicas):
        share = concurrency // replicas + (r < concurrency % replicas) if concurrency else 0
        _replica(dep.instance, out, list(range(r, n, replicas)), share)


def _replica(spec: InstanceSpec, out: Outcome, mine: list[int], share: int) -> None:
    queue = deque(mine)

    def release(_rid: int, t: float) -> None:
        if queue:
            rid = queue.popleft()
            out.arrival_ms[rid] = t  # a closed loop sends the next request when one finishes
            inst.arrive(t, rid)

    inst = Instance(spec, out, release if share else _ignore)
    if share:
        for _ in range(min(share, len(queue))):
            rid = queue.popleft()
            out.arrival_ms[rid] = 0.0
            inst.arrive(0.0, rid)
    else:
        for rid in mine:
            inst.arrive(out.arrival_ms[rid], rid)
    while inst.busy:
        inst.advance(INF)


def _ignore(_rid: int, _t: float) -> None:
    return None


def _disaggregated(dep: Deployment, out: Outcome, n: int, concurrency: int) -> None:
    pre = [Instance(dep.prefill, out, _ignore) for _ in range(dep.prefill_replicas)]
    queue = deque(range(n))
    sent = [0]  # requests handed to the prefill pool so far (round-robin)

    def send(t: float) -> None:
        if queue:
            rid = queue.popleft()
            out.arrival_ms[rid] = t
            pre[sent[0] % len(pre)].arrive(t, rid)
            sent[0] += 1

    def release(_rid: int, t: float) -> None:
        if concurrency:
            send(t)

    dec = [Instance(dep.instance, out, release) for _ in range(dep.replicas)]
    if not concurrency:  # open loop: the prefill pool does not depend on the decode pool; run it first
        while queue:
            send(out.arrival_ms[queue[0]])
        emitted = []
        for inst in pre:
            while inst.busy:
                inst.advance(INF)
            emitted += inst.emitted
        emitted.sort(key=lambda e: (e[1], e[0]))
        for k, (rid, done) in enumerate(emitted):  # handed to decode instances round-robin, in the order ready
            out.first_ms[rid] = done + dep.kv_transfer_ms
            dec[k % len(dec)].arrive(done + dep.kv_transfer_ms, rid)
        for inst in dec:
            while inst.busy:
                inst.advance(INF)
        return
    for _ in range(min(concurrency, n)):
        send(0.0)
    handed = 0
    everyone = (*pre, *dec)
    spec = dep.prefill
    while True:
        active = [(i.next_time(), k) for k, i in enumerate(everyone) if i.busy]
        if not active:
            return
        t, k = min(active)
        inst = everyone[k]
        horizon = INF
        if inst.s.role == "decode":  # stop where a request from elsewhere could land on it
            # a finish elsewhere sends the next request, which lands no sooner than its first prompt chunk
            # on an idle prefill instance and the KV transfer later
            if queue:
                first = min(
                    spec.rank_chunk or spec.chunk, out.isl[queue[0]] - int(out.isl[queue[0]] * spec.prefix_hit_rate)
                )
                first = max(1, first)  # on one attention-DP rank
                loop_ms = spec.cache.ms(0, 0, first, first / 2, first, 1) + dep.kv_transfer_ms
            else:
                loop_ms = INF
            for tt, kk in active:
                if kk != k:
                    horizon = min(horizon, tt + (dep.kv_transfer_ms if kk < len(pre) else loop_ms))
        inst.advance(horizon)
        for rid, done in inst.emitted:
            out.first_ms[rid] = done + dep.kv_transfer_ms
            dec[handed % len(dec)].arrive(done + dep.kv_transfer_ms, rid)
            handed += 1
        inst.emitted.clear()
