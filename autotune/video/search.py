"""Plan search for video: every combination of the declared dimensions (plan.SPACE) that uses the box's GPUs is
screened by the capability rules, costed (perf.py), put through the queueing model, and ranked.

The space is small (a few thousand plans on 8 GPUs), so it is enumerated exhaustively rather than sampled: the
result is exact for the model and the same on every run.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from autotune.capability.facts import compute_capability
from autotune.specs import HardwareProfile, MiTuneError
from autotune.video.catalog import DiTSpec
from autotune.video.perf import VideoCost, video_cost
from autotune.video.plan import SPACE, VideoPlan
from autotune.video.rules import attention_backends, violations
from autotune.video.workload import VideoWorkload


@dataclass(frozen=True)
class Outcome:
    """A plan with its prediction under the workload."""

    plan: VideoPlan
    cost: VideoCost
    p50_s: float
    p95_s: float
    videos_per_hour: float
    videos_per_hour_per_gpu: float
    exact: bool  # keeps the model's output: dense bf16 attention, no cache reuse
    changes: tuple[str, ...]  # what changes the output, when not exact
    meets_slo: bool

    def score(self, objective: str) -> float:
        """Higher is better."""
        if objective == "latency":
            return -self.p95_s
        return self.videos_per_hour_per_gpu if self.meets_slo else -self.p95_s / 1e9


def queue_latency(service_s: float, replicas: int, work: VideoWorkload) -> tuple[float, float, float]:
    """(P50, P95 latency, videos/hour) of `replicas` FIFO servers with deterministic service time. Open loop:
    Poisson arrivals at videos_per_hour simulated for num_requests (seeded: the same result every run); an
    overloaded plan has infinite latency. Closed loop: in_flight requests kept outstanding (0 = one per replica)."""
    capacity = replicas * 3600.0 / service_s
    if not work.videos_per_hour:
        k = work.in_flight or replicas
        latency = service_s * math.ceil(k / replicas)  # each replica works through its share of the k in turn
        return latency, latency, capacity * min(1.0, k / replicas)
    if work.videos_per_hour >= capacity:
        return math.inf, math.inf, capacity
    rng = random.Random(0)
    free = [0.0] * replicas
    t, latencies = 0.0, []
    mean_gap = 3600.0 / work.videos_per_hour
    for _ in range(work.num_requests):
        t += rng.expovariate(1.0 / mean_gap)
        i = min(range(replicas), key=free.__getitem__)
        start = max(t, free[i])
        free[i] = start + service_s
        latencies.append(free[i] - t)
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    return pick(0.5), pick(0.95), work.videos_per_hour


def _splits(gpus: int):
    """(cfg, tp, ulysses, ring) whose product is `gpus`."""
    for cfg, tp, u, r in itertools.product(SPACE["cfg"], SPACE["tp"], SPACE["ulysses"], SPACE["ring"]):
        if cfg * tp * u * r == gpus:
            yield cfg, tp, u, r


def candidate_plans(model: DiTSpec, work: VideoWorkload, hw: HardwareProfile, keep_quality: bool = False):
    """Every plan over the declared dimensions that uses all GPUs of the box."""
    n = hw.num_gpus
    backends = [b for b in attention_backends(compute_capability(hw.gpu.arch)) if b.exact or not keep_quality]
    for per_replica in (g for g in (1, 2, 4, 8, 16) if g <= n and n % g == 0):
        for (cfg, tp, u, r), b, cache, offload, te in itertools.product(
            _splits(per_replica), backends, SPACE["cache_dit"], SPACE["dit_offload"], SPACE["text_encoder_offload"]
        ):
            if keep_quality and cache:
                continue
            yield VideoPlan(n // per_replica, tp, u, r, cfg, b.name, b.config, b.density, cache, offload, te)


def evaluate(plan: VideoPlan, model: DiTSpec, work: VideoWorkload, hw: HardwareProfile) -> Outcome:
    cost = video_cost(plan, model, work, hw)
    p50, p95, vph = queue_latency(cost.latency_s, plan.replicas, work)
    backend = next(b for b in attention_backends(compute_capability(hw.gpu.arch)) if b.name == plan.attention)
    changes = []
    if not backend.exact:
        changes.append(
            f"{backend.kind} attention ({plan.attention}{', density ' + str(plan.density) if plan.density < 1 else ''})"
        )
    if plan.cache_dit:
        changes.append("cache-dit reuses block residuals across steps")
    meets = not work.latency_slo_s or p95 <= work.latency_slo_s
    return Outcome(plan, cost, p50, p95, vph, vph / plan.gpus, not changes, tuple(changes), meets and cost.fits)


@dataclass(frozen=True)
class SearchResult:
    ranked: tuple[Outcome, ...]  # feasible plans, best first
    refused: dict[str, int]  # rule text -> plans it refused
    unfit: int  # plans that do not fit in memory
    evaluated: int


def search(model: DiTSpec, work: VideoWorkload, hw: HardwareProfile, keep_quality: bool = False) -> SearchResult:
    refused: dict[str, int] = {}
    feasible, unfit, count, least = [], 0, 0, float("inf")
    for plan in candidate_plans(model, work, hw, keep_quality):
        count += 1
        broken = violations(plan, model, work, hw)
        if broken:
            key = str(broken[0])
            refused[key] = refused.get(key, 0) + 1
            continue
        out = evaluate(plan, model, work, hw)
        if not out.cost.fits:
            unfit += 1
            least = min(least, out.cost.memory_gib)
            continue
        feasible.append(out)
    if not feasible:
        te = model.text_encoder
        raise MiTuneError(
            f"no plan for {model.name} fits on {hw.name}: {unfit} plans over memory, the smallest needs "
            f"{least:.1f} GiB per GPU of {hw.gpu.memory_gib:g} (the {te.name} alone holds "
            f"{te.params * te.bytes_per_param / 2**30:.1f} GiB while it encodes)"
        )
    feasible.sort(key=lambda o: (-o.score(work.objective), o.p95_s, o.plan.gpus_per_replica))
    return SearchResult(tuple(feasible), refused, unfit, count)


def engine_default(model: DiTSpec, work: VideoWorkload, hw: HardwareProfile) -> VideoPlan:
    """What `sglang serve --model-path M --num-gpus N` runs (performance mode auto):
    - CFG parallel at degree 2 when the model's default sampling uses guidance and N is even
      (runtime/server_args/server_args.py:1683-1716; model_deployment_config.py:35-39 default degree 2);
    - the remaining GPUs as SP, all Ulysses (server_args.py:1725-1760; at sp 2 a K/V-gather exchange, costed as
      Ulysses here);
    - attention: FA, Torch SDPA on SM12x (runtime/platforms/cuda.py:725-730);
    - DiT layerwise offload when the model's deployment config lists performance mode auto and the GPU has less
      free memory than keep_resident_min_available_gb (runtime/server_args/auto_tune.py:766-781;
      configs/pipeline_configs/wan.py:290-297: Wan2.2 A14B streams below 120 GiB);
    - the text encoder offloaded to host memory, the video-task default when unset
      (runtime/server_args/server_args.py:1072-1076)."""
    n = hw.num_gpus
    cfg = 2 if model.default_guidance > 1.0 and n >= 2 and n % 2 == 0 else 1
    # below 30 GB of device memory every video model's DiT is offloaded (runtime/server_args/server_args.py:1053-1062)
    offload = model.name == "wan2.2-t2v-a14b" and hw.gpu.memory_gib < 120 or hw.gpu.memory_gib < 30
    return VideoPlan(1, 1, n // cfg, 1, cfg, "fa", "", 1.0, False, offload, True)


def same_quality_best(result: SearchResult) -> Outcome | None:
    return next((o for o in result.ranked if o.exact), None)


def best_where(result: SearchResult, **fields) -> Outcome | None:
    """The best ranked plan whose fields hold the given values (explain table rows)."""
    for o in result.ranked:
        if all(_holds(getattr(o.plan, k) if hasattr(o.plan, k) else getattr(o, k), v) for k, v in fields.items()):
            return o
    return None


def _holds(value, wanted) -> bool:
    return wanted(value) if callable(wanted) else value == wanted


__all__ = ["Outcome", "SearchResult", "best_where", "engine_default", "evaluate", "search"]
