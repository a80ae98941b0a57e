"""Search speed and quality: trials/s at 200 / 2,000 / 10,000 trials, and the search against an exhaustive
enumeration of the same space; distinct plans per trial for one process, --workers 2 and two independent
processes on one storage (`--distinct 120` runs only that part).

    .venv/bin/python tests/bench/bench_search.py            # full run (~several minutes on 2 cores)
    .venv/bin/python tests/bench/bench_search.py --quick    # 200 / 2,000 trials and a smaller exhaustive space

Part 1 runs the search as `mi-tune search` does (deepseek-v4.1-flash on rtx-pro-6000-x8, default space and
workload, trials written to a journal storage in a temporary run directory) and prints trials/s and the wall
ratio between budgets (target: 2,000 trials <= 20 s; 10x the trials <= ~10x the time).

Part 2: the default space holds ~1e10 admitted plans (its size is estimated here by random descents of the
sampler's decision tree, Knuth's estimator), too many to score. The exhaustive comparison therefore uses a
screened space, the same for the search and the enumeration: the default space with mode=aggregated and the
NCCL environment dimensions and kernel choices pinned to their first value (written to a temporary space
file). Every admitted plan of it is scored by the model (depth-first over the sampler's own decisions, so the
capability rules screen exactly as in the search), and the search runs on the same space file.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna
import yaml

from autotune import capability
from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space, run_study
from autotune.search.admit import Admission
from autotune.search.explain import simplify
from autotune.search.sampler import CachedAdmission, sample_plan
from autotune.search.storage import open_storage
from autotune.search.study import study_choices
from autotune.search.trial import evaluate_or_reason as _evaluate
from autotune.search.trial import objective_value
from autotune.specs import Plan, Workload, from_dict

MODEL, PRESET = "deepseek-v4.1-flash", "rtx-pro-6000-x8"
DEFAULT_SPACE = Path(__file__).resolve().parents[2] / "search_spaces" / "default.yaml"
PINNED = ("nccl_min_channels", "nccl_p2p_level", "nccl_proto", "linear_kernel", "attention_kernel")
PINNED_QUICK = (*PINNED, "moe_kernel", "chunked_prefill_tokens")


def request(trials: int, storage: str = "", space=None, mode: str = "auto", seed: int = 0) -> SearchRequest:
    hw = load_preset(PRESET)
    return SearchRequest(
        model=load_model(MODEL),
        hardware=hw,
        workload=Workload(),
        space=space or load_space(),
        num_gpus=hw.num_gpus,
        trials=trials,
        seed=seed,
        storage=storage,
        study_name="bench",
        mode=mode,
        run_id="bench",
    )


def estimate_size(req: SearchRequest, descents: int = 2000) -> float:
    """Knuth's estimator: the mean over random descents of the product of the branching factors."""
    choices = study_choices(req)
    admission = CachedAdmission(Admission(capability.box_facts(req.hardware, req.model)))
    rng = random.Random(0)
    sizes = []
    for _ in range(descents):
        product = 1

        def suggest(name, options):
            nonlocal product
            product *= len(options)
            return rng.choice(options)

        sample_plan(req.space, choices, suggest, req.num_gpus, admission)
        sizes.append(product)
    return statistics.mean(sizes)


def enumerate_space(req: SearchRequest):
    """Every (plan, reason) the sampler can produce: depth-first over its decisions (an odometer)."""
    choices = study_choices(req)
    admission = CachedAdmission(Admission(capability.box_facts(req.hardware, req.model)))
    path: list[list[int]] = []  # [index chosen, options offered] per decision
    while True:
        depth = 0

        def suggest(name, options):
            nonlocal depth
            if depth == len(path):
                path.append([0, len(options)])
            path[depth][1] = len(options)
            depth += 1
            return options[path[depth - 1][0]]

        plan, reason = sample_plan(req.space, choices, suggest, req.num_gpus, admission)
        del path[depth:]
        yield plan, reason
        while path and path[-1][0] + 1 >= path[-1][1]:
            path.pop()
        if not path:
            return
        path[-1][0] += 1


def exhaustive(req: SearchRequest):
    """(best plan simplified, its value, plans scored, wall s)."""
    started = time.perf_counter()
    best, best_value, scored = None, -1.0, 0
    for plan, reason in enumerate_space(req):
        scored += 1
        value = objective_value(_evaluate(req, plan, reason))
        if value > best_value:
            best, best_value = plan, value
    wall = time.perf_counter() - started
    choices = study_choices(req)
    best = simplify(req.space, best, choices, req.model, req.hardware, req.workload)
    return best, best_value, scored, wall


def screened_space(pinned: tuple[str, ...], folder: Path):
    doc = yaml.safe_load(DEFAULT_SPACE.read_text())
    for dim in doc["dimensions"]:
        if dim["name"] in pinned:
            dim["choices"] = dim["choices"][:1]
    doc["name"] = "bench-screened"
    path = folder / "bench-screened.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_space(str(path))


def timed_search(req: SearchRequest):
    """(result, wall s, CPU s, best trial): the best trial by its screened value (the performance model's
    steady state), read from the storage; result.best is the plan chosen after simulating the screen's best."""
    started, cpu = time.perf_counter(), time.process_time()
    result = run_study(req)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    study = optuna.load_study(study_name=req.study_name, storage=open_storage(req.storage))
    top = max(study.get_trials(deepcopy=False), key=lambda t: (t.value or 0.0, -t.number))
    return result, wall, cpu, top


def label(trial) -> str:
    return from_dict(Plan, trial.user_attrs["plan"], "storage").describe()


def _distinct(url: str) -> tuple[int, int]:
    """(finished trials, distinct parameter sets) of the study in `url`."""
    study = optuna.load_study(study_name="bench", storage=open_storage(url))
    done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
    return len(done), len({tuple(sorted((k, repr(v)) for k, v in t.params.items())) for t in done})


def _independent(url: str, trials: int, run_id: str) -> None:
    """One `mi-tune search --storage URL` process as the CLI makes it: its own run id and sampler stream."""
    run_study(dataclasses.replace(request(trials, storage=url), run_id=run_id, stream=run_id))


def distinct_plans(trials: int) -> None:
    """Distinct plans per trial: one process, --workers 2, and two independent processes on one SQLite file."""
    import multiprocessing

    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        url = f"sqlite:///{tmp}/one.db"
        run_study(request(trials, storage=url))
        rows.append(("1 process", *_distinct(url)))
        url = f"sqlite:///{tmp}/workers.db"
        run_study(dataclasses.replace(request(trials, storage=url), workers=2))
        rows.append(("--workers 2", *_distinct(url)))
        url = f"sqlite:///{tmp}/two.db"
        procs = [
            multiprocessing.get_context("fork").Process(target=_independent, args=(url, trials // 2, f"run{i}"))
            for i in range(2)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        rows.append((f"2 processes x {trials // 2}", *_distinct(url)))
    for name, done, distinct in rows:
        print(f"{name:>18}: {done} trials, {distinct} distinct plans ({distinct / max(done, 1):.0%})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 / 2,000 trials and a smaller exhaustive space")
    parser.add_argument("--distinct", type=int, default=0, help="only the distinct-plans part, with this many trials")
    args = parser.parse_args()
    if args.distinct:
        distinct_plans(args.distinct)
        return 0
    budgets = (200, 2000) if args.quick else (200, 2000, 10000)
    print(f"{MODEL} on {PRESET}, default workload; machine: {sys.platform}, python {sys.version.split()[0]}")
    print(f"default space: ~{estimate_size(request(0)):.2g} admitted plans (Knuth estimate over 2,000 descents)")

    print("\n# Part 1: the search as `mi-tune search` runs it (journal storage in a run directory)")
    walls, cpus = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in budgets:
            result, wall, cpu, top = timed_search(request(n, storage=f"journal:{tmp}/s{n}.journal"))
            walls[n], cpus[n] = wall, cpu
            print(
                f"{n:>6} trials: {wall:6.1f} s wall, {cpu:6.1f} s CPU, {n / wall:6.1f} trials/s (wall); "
                f"strategy: {result.strategy}\n"
                f"{'':>8}best screened trial {top.number}: {top.value:,.0f} tok/s {label(top)}\n"
                f"{'':>8}best.yaml (after simulation): trial {result.best.number}, {result.best.plan.describe()}"
            )
    for small, large in zip(budgets, budgets[1:], strict=False):
        print(
            f"{large / small:.0f}x the trials ({small} -> {large}): wall x{walls[large] / walls[small]:.2f}, "
            f"CPU x{cpus[large] / cpus[small]:.2f}"
        )

    print("\n# Part 1b: distinct plans per trial on one storage (120 trials in all)")
    distinct_plans(120)

    print("\n# Part 2: search vs exhaustive enumeration of one screened space")
    with tempfile.TemporaryDirectory() as tmp:
        pinned = PINNED_QUICK if args.quick else PINNED
        space = screened_space(pinned, Path(tmp))
        base = request(0, space=space, mode="aggregated")
        print(f"screened space: default with mode=aggregated and {', '.join(pinned)} pinned to their first value")
        best, best_value, scored, wall = exhaustive(base)
        choices, context = study_choices(base), (base.model, base.hardware, base.workload)
        print(f"exhaustive: {scored:,} admitted plans scored in {wall:.1f} s ({scored / wall:.0f} plans/s)")
        print(f"  best {best_value:,.0f} tok/s: {best.describe()}")
        for n in budgets[:2]:
            storage = f"journal:{tmp}/x{n}.journal"
            _, search_wall, _, top = timed_search(request(n, storage=storage, space=space, mode="aggregated"))
            found = simplify(space, from_dict(Plan, top.user_attrs["plan"], "storage"), choices, *context)
            same = found.describe() == best.describe() or top.value >= best_value * (1 - 1e-9)
            print(
                f"search {n:>5} trials: {search_wall:6.1f} s = {search_wall / wall:.3f} x the exhaustive wall; "
                f"best screened {top.value:,.0f} tok/s ({top.value / best_value:.4f} of the optimum); "
                f"same best plan: {'yes' if same else 'no'} ({found.describe()})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
