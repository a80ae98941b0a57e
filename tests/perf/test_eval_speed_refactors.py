"""The bit-identical speed-ups of the evaluation round pred21 (tests/bench/bench_predict.py): each keeps the exact
floats of the form it replaced, checked here against that form written out."""

from __future__ import annotations

import random

from autotune.catalog.models import load_model
from autotune.perf import efficiency as eff
from autotune.perf import opcore, ops, rates, routing
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


def test_op_builders_make_the_ops_op_would():
    gemm = opcore._gemm("tp", "fp8", 24.0, 7168.0 * 2048, 7168, 1.5e9, 3.0e7, 2.0, 0.75)
    assert type(gemm) is opcore.Op
    fields = dict(m=24.0, n=2048.0, k=7168, flops=1.5e9, nbytes=3.0e7, count=2.0, source="tp", speed=0.75)
    assert gemm == opcore.Op("gemm", "fp8", rates.m_bucket(24.0), **fields)
    no_k = opcore.Op("gemm", "bf16", rates.m_bucket(8.0), 8.0, 0.0, 0, 1.0, 2.0, source="x")
    assert opcore._gemm("x", "bf16", 8.0, 100.0, 0, 1.0, 2.0) == no_k
    coll = opcore._collective("allreduce", (0, 1, 2, 3), 4096.0, "tp")
    assert type(coll) is opcore.Op and coll.group == (0, 1, 2, 3) and coll.nbytes == 4096.0
    assert coll == opcore.Op("collective", "", "allreduce", 0.0, 0.0, 0.0, 0.0, 4096.0, 1.0, "tp", 1.0, (0, 1, 2, 3))
