"""Predictions made when the report is built (not stored by the search): throughput against concurrency, and
stored plans predicted again the way the search predicted them."""

from __future__ import annotations

import dataclasses

import pandas as pd

from autotune.search.evaluate import evaluate
from autotune.specs import HardwareProfile, ModelSpec, Plan, Prediction, Workload

MAX_LEVEL = 1 << 14  # requests in flight: beyond what any plan in the catalog holds on one box


def concurrency_levels(max_in_flight: int) -> list[int]:
    """Powers of two up to twice the largest stored operating point (the curve shows where it flattens)."""
    top, levels, n = min(MAX_LEVEL, max(2, 2 * max_in_flight)), [], 1
    while n <= top:
        levels.append(n)
        n *= 2
    return levels


def concurrency_curve(
    plan: Plan, model: ModelSpec, hw: HardwareProfile, workload: Workload, levels: list[int]
) -> pd.DataFrame:
    """The plan predicted at a fixed number of requests in flight (closed loop, no SLO), one row per distinct
    operating point: the plan runs at most the level asked for, and no more than its KV cache holds."""
    rows = []
    for level in levels:
        closed = dataclasses.replace(workload, concurrency=level, rate_rps=0.0, burst=0, ttft_ms=0.0, tpot_ms=0.0)
        p = evaluate(plan, model, hw, closed)
        if p.feasible:
            rows.append(
                {
                    "asked": level,
                    "in_flight": max(p.concurrency, 1),
                    "total_tok_s": p.total_tok_s,
                    "ttft_ms": p.ttft_ms.get("mean", float("nan")),
                    "tpot_ms": p.tpot_ms.get("mean", float("nan")),
                }
            )
    frame = pd.DataFrame(rows, columns=["asked", "in_flight", "total_tok_s", "ttft_ms", "tpot_ms"])
    return frame.drop_duplicates("in_flight").reset_index(drop=True)


def repredict(
    plan: Plan, model: ModelSpec, hw: HardwareProfile, workload: Workload, simulated: bool, seed: int
) -> Prediction:
    """A plan predicted again as the search predicted it: the steady state, then the simulator over the
    workload's trace when the stored prediction was simulated (search/objectives.py: same seed, same trace)."""
    steady = evaluate(plan, model, hw, workload)
    if not (simulated and steady.feasible):
        return steady
    from autotune.sim.serve import simulate_prediction

    return simulate_prediction(plan, model, hw, workload, steady, seed=seed)
