"""Bit-identical prediction check for behaviour-preserving refactors (issue 14).

`--write FILE` samples plans as the search does (default space, the engines' rules applied) for a fixed set of
models, boxes and workloads, predicts each with the steady-state model and, for every fourth plan, the simulator,
and stores the plans and the predictions (floats as `repr`, so equality is bit equality). `--check FILE` reads the
stored plans back (it does not re-sample, so a refactor of sampling or admission cannot move the set), predicts
them again and prints every field that differs; exit 1 when any does.

    .venv/bin/python tests/bench/prediction_snapshot.py --write /tmp/pred-before.json
    ... refactor ...
    .venv/bin/python tests/bench/prediction_snapshot.py --check /tmp/pred-before.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# this checkout's autotune, not the one the venv installed (run as a file, the checkout is not on sys.path: a worktree
# would otherwise compare the venv's checkout with itself)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.catalog import load_preset  # noqa: E402
from autotune.catalog.models import load_model  # noqa: E402
from autotune.perf import predict  # noqa: E402
from autotune.search.random_plans import random_plans  # noqa: E402
from autotune.sim.serve import simulate_prediction  # noqa: E402
from autotune.specs import Plan, Workload  # noqa: E402
from autotune.specs.io import from_dict, to_dict  # noqa: E402

CASES = (  # (model, preset, workload fields)
    ("deepseek-v4.1-flash", "rtx-pro-6000-x8", {}),
    ("deepseek-v3", "rtx-pro-6000-x8", {"isl": 4000, "osl": 1000, "ttft_ms": 2000.0, "tpot_ms": 30.0}),
    ("qwen3-235b-a22b", "h200-x8", {}),
    ("qwen3.5-397b-a17b", "h200-x8", {"isl": 8000, "osl": 500}),
    ("glm-5.3-flash", "rtx-pro-6000-x8", {}),
)
SIMULATE_EVERY = 4


def _exact(value):
    """Floats as repr strings (bit equality survives JSON), recursively."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_exact(v) for v in value]
    return value


def _predictions(plan: Plan, model, hw, workload, simulate: bool) -> dict:
    steady = predict(plan, model, hw, workload)
    out = {"steady": _exact(to_dict(steady))}
    if simulate:
        out["simulated"] = _exact(to_dict(simulate_prediction(plan, model, hw, workload, steady, seed=0)))
    return out


def write(path: str, n: int) -> None:
    cases = []
    for model_name, preset, fields in CASES:
        model, hw, workload = load_model(model_name), load_preset(preset), Workload(**fields)
        rows = []
        for plan in random_plans(model, hw, workload, 20 * n, seed=0):
            steady_ok = predict(plan, model, hw, workload).feasible
            if steady_ok or len(rows) % 10 == 0:  # feasible plans, and some refused ones for their reasons
                simulate = len(rows) % SIMULATE_EVERY == 0
                rows.append({"plan": to_dict(plan), **_predictions(plan, model, hw, workload, simulate)})
            if len(rows) >= n:
                break
        cases.append({"model": model_name, "preset": preset, "workload": fields, "rows": rows})
        print(f"{model_name} on {preset}: {len(rows)} plans", file=sys.stderr)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cases, f, indent=1)  # key order kept: a plan's phases are ordered


def _diff(old, new, where: str, out: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _diff(old.get(key), new.get(key), f"{where}.{key}", out)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{where}[{i}]", out)
    elif old != new:
        out.append(f"{where}: {old!r} -> {new!r}")


def check(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)
    differences, compared = [], 0
    for case in cases:
        model, hw = load_model(case["model"]), load_preset(case["preset"])
        workload = Workload(**case["workload"])
        for i, row in enumerate(case["rows"]):
            plan = from_dict(Plan, row["plan"], f"{path}: plan {i}")
            now = _predictions(plan, model, hw, workload, "simulated" in row)
            old = {k: row[k] for k in now}
            _diff(old, now, f"{case['model']}/{case['preset']}#{i}", differences)
            compared += 1
    for line in differences[:50]:
        print(line)
    print(f"{compared} plans compared, {len(differences)} fields differ")
    return 1 if differences else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="FILE")
    group.add_argument("--check", metavar="FILE")
    parser.add_argument("--plans", type=int, default=80, help="plans per case (--write)")
    args = parser.parse_args()
    if args.write:
        write(args.write, args.plans)
    else:
        sys.exit(check(args.check))


if __name__ == "__main__":
    main()
