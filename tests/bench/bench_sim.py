"""Time the serving simulator: 1,000 requests through 8-GPU plans, median of N runs on one core.

Run: `.venv/bin/python tests/bench/bench_sim.py [--runs 7] [--requests 1000]`

Target (issue 8): a 1,000-request simulation of an 8-GPU plan under 50 ms on one core. "cold" builds the
deployment anew each run (its step costs are evaluated through perf's step function as buckets are first met,
as in a search trial); "warm" reuses the deployment's step-cost cache (the simulation alone). Each is given as
wall-clock time and as this process's CPU time (time.process_time: the one-core figure, less sensitive to other
processes on a shared machine); the verdict reads the cold CPU time. The plans are
Llama-3.1-70B FP8 and Qwen3-235B-A22B on the h200-x8 preset; workloads: closed loop at the plan's steady-state
operating point, a burst of all requests at t=0, and Poisson arrivals at 80% of the plan's capacity.
"""

from __future__ import annotations

import argparse
import statistics
import time

from autotune.catalog import load_model, load_preset
from autotune.perf import predict
from autotune.sim.engine import simulate
from autotune.sim.serve import closed_concurrency, deployment
from autotune.sim.trace import make_trace
from autotune.specs import Kernels, PhasePlan, Plan, Workload

TARGET_MS = 50.0
FP8 = Kernels(gemm_dtype="fp8")
EIGHT = tuple(range(8))


def plans() -> dict[str, tuple[str, Plan]]:
    return {
        "llama-70b agg tp8": ("llama-3.1-70b", Plan("vllm", "aggregated", {"both": PhasePlan(gpus=EIGHT, tp=8)})),
        "llama-70b agg tp2 x4": (
            "llama-3.1-70b",
            Plan("vllm", "aggregated", {"both": PhasePlan(gpus=EIGHT, tp=2, replicas=4, kernels=FP8)}),
        ),
        "llama-70b agg tp4 pp2": (
            "llama-3.1-70b",
            Plan("vllm", "aggregated", {"both": PhasePlan(gpus=EIGHT, tp=4, pp=2, kernels=FP8)}),
        ),
        "llama-70b disagg 2x tp2 / 2x tp2": (
            "llama-3.1-70b",
            Plan(
                "vllm",
                "disaggregated",
                {
                    "prefill": PhasePlan(gpus=(0, 1, 2, 3), tp=2, replicas=2, kernels=FP8),
                    "decode": PhasePlan(gpus=(4, 5, 6, 7), tp=2, replicas=2, kernels=FP8),
                },
            ),
        ),
        "qwen3-235b agg tp8": ("qwen3-235b-a22b", Plan("vllm", "aggregated", {"both": PhasePlan(gpus=EIGHT, tp=8)})),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--requests", type=int, default=1000)
    args = ap.parse_args()
    hw = load_preset("h200-x8")
    n = args.requests
    worst = 0.0
    heads = ("cold ms", "cold cpu", "warm ms", "warm cpu")
    print(f"{'plan':34s} {'workload':9s} " + " ".join(f"{h:>9s}" for h in heads) + f" {'steps':>6s}")
    for label, (model_name, plan) in plans().items():
        model = load_model(model_name)
        base_w = Workload(isl=2048, osl=256)
        capacity = predict(plan, model, hw, base_w).capacity_rps
        for kind, w in (
            ("closed", base_w),
            ("burst", Workload(isl=2048, osl=256, burst=n)),
            ("poisson", Workload(isl=2048, osl=256, rate_rps=0.8 * capacity)),
        ):
            base = predict(plan, model, hw, w)
            trace = make_trace(w, n)
            concurrency = closed_concurrency(w, base)
            cold, cold_cpu, warm, warm_cpu = [], [], [], []
            for _ in range(args.runs):
                t0, c0 = time.perf_counter(), time.process_time()
                dep = deployment(plan, model, hw, w, base)
                out = simulate(dep, trace, concurrency)
                cold.append((time.perf_counter() - t0) * 1e3)
                cold_cpu.append((time.process_time() - c0) * 1e3)
                t0, c0 = time.perf_counter(), time.process_time()
                simulate(dep, trace, concurrency)
                warm.append((time.perf_counter() - t0) * 1e3)
                warm_cpu.append((time.process_time() - c0) * 1e3)
            med = [statistics.median(x) for x in (cold, cold_cpu, warm, warm_cpu)]
            worst = max(worst, med[1])
            print(f"{label:34s} {kind:9s} " + " ".join(f"{m:9.1f}" for m in med) + f" {out.steps:6d}")
    verdict = "met" if worst < TARGET_MS else "NOT met"
    print(f"worst median cold CPU time {worst:.1f} ms for {n} requests; target < {TARGET_MS:.0f} ms: {verdict}")


if __name__ == "__main__":
    main()
