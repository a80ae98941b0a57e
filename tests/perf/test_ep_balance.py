"""EP imbalance as the expected maximum of the ranks' routed loads (perf/ep_balance.py), not a fixed 1.15."""

from __future__ import annotations

import math
import random

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import ep_balance
from autotune.perf.opcore import context
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")


def test_expected_max_normal_matches_order_statistics():
    """Blom's approximation against exact expected maxima: 3 / (2 sqrt(pi)) at n=3, 1.4236 at 8, 2.0697 at 32."""
    assert ep_balance.expected_max_normal(1) == 0.0
    for n, exact in ((3, 3 / (2 * math.sqrt(math.pi))), (8, 1.4236), (32, 2.0697)):
        assert ep_balance.expected_max_normal(n) == pytest.approx(exact, rel=0.03)


def test_large_batch_imbalance_grows_with_ep_size():
    """Same model, same (large) batch: more ranks, fewer experts each, a busier busiest rank (old: 1.15 at any ep)."""
    loads = [
        context(DSV3, PhasePlan(gpus=tuple(range(ep)), tp=ep, ep=ep), "vllm", H200, (0,)).imbalance for ep in (2, 4, 8)
    ]
    assert 1.0 < loads[0] < loads[1] < loads[2]
    assert loads[2] - 1.0 > 2 * (loads[0] - 1.0)


def test_eplb_keeps_the_sampling_spread():
    """EPLB removes most of the popularity skew but not the spread of a small batch."""
    small_eplb = ep_balance.busiest_rank_load(8, 256, 8, 64, eplb=True)
    large_eplb = ep_balance.busiest_rank_load(8, 256, 8, math.inf, eplb=True)
    assert small_eplb > large_eplb + 0.1
    assert large_eplb < ep_balance.busiest_rank_load(8, 256, 8, math.inf) - 0.1


def test_sampling_spread_matches_a_multinomial_draw():
    """No skew: the busiest rank of a uniformly routed batch, against a seeded multinomial simulation."""
    ep, experts, top_k, tokens = 8, 64, 4, 64
    rng = random.Random(7)
    maxima = []
    for _ in range(400):
        counts = [0] * ep
        for _ in range(tokens):
            for expert in rng.sample(range(experts), top_k):
                counts[expert * ep // experts] += 1
        maxima.append(max(counts) / (tokens * top_k / ep))
    simulated = sum(maxima) / len(maxima)
    modelled = 1.0 + ep_balance.expected_max_normal(ep) * math.sqrt((1 - 1 / ep) / (tokens * top_k / ep))
    assert modelled == pytest.approx(simulated, rel=0.05)
    assert ep_balance.busiest_rank_load(ep, experts, top_k, tokens) > modelled  # the skew adds on top
