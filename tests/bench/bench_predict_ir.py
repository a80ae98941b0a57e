"""Instructions per prediction of two (or more) trees, counted by valgrind, a figure a shared machine's load does not
move (bench_predict_ab.py's CPU seconds move by several percent between runs): `python tests/bench/bench_predict_ir.py
TREE_A TREE_B [--plans N]`. The plans are sampled once, with TREE_A's code (search/random_plans.py, seed 0, the
models of bench_predict.py), and pickled, so every tree predicts the same ones; each tree's predictions then run
under `valgrind --tool=callgrind`, which counts only what runs inside itertools.starmap's next (the prediction loop,
not the start-up, imports and model loading), with PYTHONHASHSEED=0. About a minute per tree and model (valgrind
runs ~50x slower). Runs of one tree agreed to 0.01-0.4% (id()-keyed memos follow the addresses). Needs valgrind."""

from __future__ import annotations

import argparse
import os
import pickle
import re
import subprocess
import sys
import tempfile

CASES = (
    ("deepseek-v4.1-flash", "rtx-pro-6000-x8"),
    ("deepseek-v3", "rtx-pro-6000-x8"),
    ("qwen3-235b-a22b", "h200-x8"),
)

SAMPLE = """
import pickle, sys
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.search.random_plans import random_plans
from autotune.specs import Workload
cases, count, out = pickle.loads(bytes.fromhex(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
plans = {m: random_plans(load_model(m), load_preset(p), Workload(), count, 0) for m, p in cases}
pickle.dump(plans, open(out, "wb"))
"""

PREDICT = """
import gc, itertools, pickle, sys
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.cli.app import YOUNG_GC_THRESHOLD
from autotune.perf import predict
from autotune.specs import Workload
gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
model_name, preset, path = sys.argv[1:4]
plans = pickle.load(open(path, "rb"))[model_name]
model, hw, workload = load_model(model_name), load_preset(preset), Workload()
for _ in itertools.starmap(predict, ((plan, model, hw, workload) for plan in plans)):  # counted: starmap_next
    pass
"""


def _env(tree: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.path.abspath(tree), "PYTHONHASHSEED": "0"}


def instructions(tree: str, model_name: str, preset: str, plans_path: str) -> int:
    valgrind = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=starmap_next"]
    valgrind.append("--callgrind-out-file=/dev/null")
    command = [*valgrind, sys.executable, "-c", PREDICT, model_name, preset, plans_path]
    run = subprocess.run(command, env=_env(tree), cwd="/", capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if not found:
        sys.exit(f"bench_predict_ir: no instruction count from valgrind:\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--plans", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plans_path = os.path.join(tmp, "plans.pkl")
        subprocess.run([sys.executable, "-c", SAMPLE, pickle.dumps(CASES).hex(), str(args.plans), plans_path],
                       env=_env(args.trees[0]), cwd="/", check=True)  # fmt: skip
        for model_name, preset in CASES:
            first = None
            for tree in args.trees:
                per_plan = instructions(tree, model_name, preset, plans_path) / args.plans
                first = first or per_plan
                change = per_plan / first - 1
                print(f"{model_name:20} {tree}: {per_plan:,.0f} instructions a prediction ({change:+.2%})")


if __name__ == "__main__":
    main()
