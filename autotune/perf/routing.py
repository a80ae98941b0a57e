"""How routed tokens spread over a MoE layer's experts: the distinct experts a batch hits under skewed popularity."""

from __future__ import annotations

from functools import lru_cache

from autotune.perf import efficiency as eff


def distinct_experts(num_experts: int, top_k: int, tokens: float, skew: float | None = None) -> float:
    """Expected number of experts hit when `tokens` tokens each route to top-k of E experts, the experts' routing
    popularity falling as rank^-skew (eff.ROUTING_SKEW; 0 = uniform): popular experts are hit by many of the
    tokens, so a batch hits fewer distinct experts than uniform routing would (exactly top-k for one token)."""
    if tokens <= 0:
        return 0.0
    weights = _popularity(num_experts, eff.ROUTING_SKEW if skew is None else skew)
    per_group = num_experts / len(weights)
    return sum(per_group * (1.0 - max(0.0, 1.0 - top_k * w / num_experts) ** tokens) for w in weights)


@lru_cache(maxsize=256)
def _popularity(num_experts: int, skew: float) -> tuple[float, ...]:
    """Mean routing probability of each of ROUTING_GROUPS equal groups of experts (ranked by popularity, mean 1)."""
    groups = min(eff.ROUTING_GROUPS, num_experts) if skew else 1
    p = [(i + 1) ** -skew for i in range(num_experts)]
    mean = sum(p) / num_experts
    size = num_experts / groups
    return tuple(
        sum(p[int(g * size) : int((g + 1) * size)]) / (int((g + 1) * size) - int(g * size)) / mean
        for g in range(groups)
    )
