"""How routed tokens spread over a MoE layer's experts: the distinct experts a batch hits under skewed popularity.
The router that picks them (its GEMM and top-k kernel) is perf/ffn_shape.py's router_ops."""

from __future__ import annotations

from functools import lru_cache

from autotune.perf import efficiency as eff

LOGIT_BYTES = 4  # router logits in fp32 (vLLM GateLinear's fp32 out_dtype tier, gate_linear.py:38)


def distinct_experts(num_experts: int, top_k: int, tokens: float, skew: float | None = None) -> float:
    """Expected number of experts hit when `tokens` tokens each route to top-k of E experts, the experts' routing
    popularity falling as rank^-skew (eff.ROUTING_SKEW; 0 = uniform): popular experts are hit by many of the
    tokens, so a batch hits fewer distinct experts than uniform routing would (exactly top-k for one token)."""
    if tokens <= 0:
        return 0.0
    return experts_hit(_miss_rates(num_experts, top_k, eff.ROUTING_SKEW if skew is None else skew), tokens)


def experts_hit(miss_rates: tuple[float, tuple[float, ...]], tokens: float) -> float:
    """distinct_experts from its token-independent terms (`miss_rates`: _miss_rates), `tokens` > 0: the FFN's
    op builder keeps them in its FfnShape (perf/ffn_shape.py)."""
    per_group, misses = miss_rates
    return sum([per_group * (1.0 - miss**tokens) for miss in misses])  # a list: no generator resumed per group


@lru_cache(maxsize=256)
def _miss_rates(num_experts: int, top_k: int, skew: float) -> tuple[float, tuple[float, ...]]:
    """(experts per popularity group, the chance one token misses an expert of each group): distinct_experts'
    per-group terms that do not depend on the tokens, the same floats, computed once per (E, top-k, skew) rather
    than per call (it runs for every MoE FFN half a step costs)."""
    weights = _popularity(num_experts, skew)
    return num_experts / len(weights), tuple(max(0.0, 1.0 - top_k * w / num_experts) for w in weights)


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
