"""Two trees' predict() side by side on a shared machine: `python tests/bench/bench_predict_ab.py TREE_A TREE_B
[--plans N] [--no-gc]` starts one worker process per tree (PYTHONPATH=TREE), both sample the same plans
(search/random_plans.py, 3 seeds a model, bench_predict.py's models) and predict them in alternating batches of
100, timed in CPU time, so a load that comes and goes hits both alike. Prints each tree's cold evaluations/s per
round, over all rounds, and its best warm round."""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time

CASES = (
    ("deepseek-v4.1-flash", "rtx-pro-6000-x8"),
    ("deepseek-v3", "rtx-pro-6000-x8"),
    ("qwen3-235b-a22b", "h200-x8"),
)
BATCH = 100
ROUNDS = 3


def worker(plans_per_round: int) -> None:
    """Sample every case's plans, then answer `case round start end` lines with the CPU seconds predicting them."""
    from autotune.catalog import load_preset
    from autotune.catalog.models import load_model
    from autotune.perf import predict
    from autotune.search.random_plans import random_plans
    from autotune.specs import Workload

    workload, cases = Workload(), []
    for model_name, preset in CASES:
        model, hw = load_model(model_name), load_preset(preset)
        rounds = [random_plans(model, hw, workload, plans_per_round, seed) for seed in range(ROUNDS)]
        cases.append((model, hw, rounds))
    print("ready", flush=True)
    for line in sys.stdin:
        case, seed, start, end = map(int, line.split())
        model, hw, rounds = cases[case]
        started = time.process_time()
        for plan in rounds[seed][start:end]:
            predict(plan, model, hw, workload)
        print(time.process_time() - started, flush=True)


def _ask(proc: subprocess.Popen, line: str) -> float:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return float(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2)
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--no-gc", action="store_true", help="disable the garbage collector in both workers")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.no_gc:
            gc.disable()
        worker(args.plans)
        return
    command = [sys.executable, os.path.abspath(__file__), "a", "b", "--worker", f"--plans={args.plans}"]
    command += ["--no-gc"] if args.no_gc else []
    procs = [
        subprocess.Popen(
            command,
            env={**os.environ, "PYTHONPATH": os.path.abspath(tree)},
            cwd="/",
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )  # fmt: skip
        for tree in args.trees
    ]
    for proc in procs:
        if proc.stdout.readline().strip() != "ready":
            sys.exit("bench_predict_ab: a worker failed to start")
    for case, (model_name, _) in enumerate(CASES):
        cold: list[list[float]] = [[], []]
        warm: list[list[float]] = [[], []]
        for seed in range(ROUNDS):
            for rates in (cold, warm):
                seconds = [0.0, 0.0]
                for i, start in enumerate(range(0, args.plans, BATCH)):
                    for which in (0, 1) if i % 2 == 0 else (1, 0):  # each tree goes first every other batch
                        seconds[which] += _ask(procs[which], f"{case} {seed} {start} {start + BATCH}")
                for which in (0, 1):
                    rates[which].append(args.plans / seconds[which])
        for which, tree in enumerate(args.trees):
            overall = len(cold[which]) * args.plans / sum(args.plans / r for r in cold[which])
            rounds = " / ".join(f"{r:,.0f}" for r in cold[which])
            print(f"{model_name:20} {tree}: cold {rounds} (all {overall:,.0f}), warm {max(warm[which]):,.0f}")
    for proc in procs:
        proc.stdin.close()
        proc.wait()


if __name__ == "__main__":
    main()
