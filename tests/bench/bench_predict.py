"""Plan evaluations per second of the performance model on one core (issue 6 target: >= 2,000/s for
deepseek-v4.1-flash on rtx-pro-6000-x8). Run: `.venv/bin/python tests/bench/bench_predict.py [--plans N]`.

Plans are sampled as the search samples them (default space, the engines' rules applied), so the mix of
layouts, kernels and collectives is the one a search evaluates. Each model is timed over the same plans
twice: cold (first prediction of each plan, the search's case) and warm (repeat), best of three rounds. The
process runs with the collector setting the `mi-tune` console script sets (cli/app.py YOUNG_GC_THRESHOLD), as a search
does; `--python-gc-default` measures Python's default threshold (700) instead.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.cli.app import YOUNG_GC_THRESHOLD
from autotune.perf import predict
from autotune.search.random_plans import random_plans
from autotune.specs import Workload

CASES = (
    ("deepseek-v4.1-flash", "rtx-pro-6000-x8"),
    ("deepseek-v3", "rtx-pro-6000-x8"),
    ("qwen3-235b-a22b", "h200-x8"),
)
TARGET_PER_S = 2000.0


def rate_per_s(plans, model, hw, workload) -> float:
    started = time.perf_counter()
    for plan in plans:
        predict(plan, model, hw, workload)
    return len(plans) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--python-gc-default", action="store_true", help="keep Python's young-generation threshold")
    args = parser.parse_args()
    if not args.python_gc_default:
        gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    workload = Workload()
    print(f"young-generation GC threshold {gc.get_threshold()[0]:,}")
    print(
        f"{'model':22} {'box':16} {'plans':>6} {'cold evals/s':>13} {'warm evals/s':>13}  target {TARGET_PER_S:,.0f}/s"
    )
    for model_name, preset in CASES:
        model, hw = load_model(model_name), load_preset(preset)
        rounds = []
        for seed in range(3):  # fresh plans each round: the first evaluation of each plan is what a search pays
            plans = random_plans(model, hw, workload, args.plans, seed)
            rounds.append((rate_per_s(plans, model, hw, workload), rate_per_s(plans, model, hw, workload)))
        cold, warm = max(r[0] for r in rounds), max(r[1] for r in rounds)
        print(f"{model_name:22} {preset:16} {args.plans:6d} {cold:13,.0f} {warm:13,.0f}")


if __name__ == "__main__":
    main()
