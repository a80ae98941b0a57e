"""The bit-identical speed-ups of the evaluation round pred21 (tests/bench/bench_predict.py): each keeps the exact
floats of the form it replaced, checked here against that form written out."""

from __future__ import annotations

import random

from autotune.catalog.models import load_model
from autotune.perf import efficiency as eff
from autotune.perf import ops, routing
from autotune.perf.layers import layer_groups


def _distinct_experts_closed_form(num_experts: int, top_k: int, tokens: float) -> float:
    """routing.distinct_experts as it was written before its per-group miss rates were remembered."""
    weights = routing._popularity(num_experts, eff.ROUTING_SKEW)
    per_group = num_experts / len(weights)
    return sum(per_group * (1.0 - max(0.0, 1.0 - top_k * w / num_experts) ** tokens) for w in weights)


def test_distinct_experts_is_the_closed_form_bit_for_bit():
    rng = random.Random(5)
    for _ in range(2000):
        experts = rng.choice((8, 60, 128, 256, 384))
        top_k = rng.randint(1, min(8, experts))
        tokens = rng.choice((rng.uniform(0.01, 4.0), rng.uniform(4.0, 40000.0), float(rng.randint(1, 512))))
        assert routing.distinct_experts(experts, top_k, tokens) == _distinct_experts_closed_form(experts, top_k, tokens)
    assert routing.distinct_experts(256, 8, 0.0) == 0.0
    assert routing.distinct_experts(256, 8, 1.0) == _distinct_experts_closed_form(256, 8, 1.0)


def test_ffn_facts_key_equal_ffns_alike_and_group_as_before():
    for name in ("deepseek-v4.1-flash", "deepseek-v3", "qwen3-235b-a22b"):
        model = load_model(name)
        groups, ids = ops._ffn_facts(model)
        assert groups == ops._ffn_groups(layer_groups(model))
        for a in model.layers:
            for b in model.layers:
                assert (ids[id(a.ffn)] == ids[id(b.ffn)]) == (a.ffn == b.ffn)
    v41 = load_model("deepseek-v4.1-flash")
    assert len({id(layer.ffn) for layer in v41.layers}) > len(set(ops._ffn_facts(v41)[1].values()))  # merged
