"""How routed tokens spread over a MoE layer's experts: the distinct experts a batch hits under skewed popularity;
the router that picks them (its GEMM and top-k kernel)."""

from __future__ import annotations

from functools import lru_cache

from autotune.perf import efficiency as eff
from autotune.perf import precision
from autotune.perf.opcore import Context, Op, _act_bytes, _gemm
from autotune.specs import FfnSpec

LOGIT_BYTES = 4  # router logits in fp32 (vLLM GateLinear's fp32 out_dtype tier, gate_linear.py:38)


def router_ops(c: Context, ffn: FfnSpec, tokens: float) -> list[Op]:
    """The router of a MoE layer on each rank's rows: a bf16 GEMM hidden x experts, replicated on every rank and
    never quantised (vLLM GateLinear, a ReplicatedLinear: fused_moe/router/gate_linear.py:26, used by
    models/deepseek_v2.py:321 and qwen3_next.py:199; SGLang MoEGate / ReplicatedLinear: srt/models/deepseek_v2.py:497,
    qwen3_moe.py:290), then the top-k selection over its logits (topk_softmax / grouped_topk: one kernel reading
    the logits and writing the ids and weights)."""
    rows, hidden = tokens / c.phase.dp, c.model.hidden_size
    weights = hidden * ffn.num_experts
    act = precision.ACTIVATION_BYTES
    gemm = _gemm("moe router", "bf16", rows, weights, hidden, 2 * weights * rows,
                 weights * act + _act_bytes(rows, ffn.num_experts, hidden, 1, act))  # fmt: skip
    topk = rows * (ffn.num_experts * LOGIT_BYTES + ffn.experts_per_token * 8)  # logits in; int32 id + fp32 weight out
    return [gemm, Op("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, topk, 1.0, "moe router top-k")]


def distinct_experts(num_experts: int, top_k: int, tokens: float, skew: float | None = None) -> float:
    """Expected number of experts hit when `tokens` tokens each route to top-k of E experts, the experts' routing
    popularity falling as rank^-skew (eff.ROUTING_SKEW; 0 = uniform): popular experts are hit by many of the
    tokens, so a batch hits fewer distinct experts than uniform routing would (exactly top-k for one token)."""
    if tokens <= 0:
        return 0.0
    per_group, misses = _miss_rates(num_experts, top_k, eff.ROUTING_SKEW if skew is None else skew)
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
