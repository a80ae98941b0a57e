"""Where a GEMM group of tests/bench/op_check.py is off: its points split by m, n and k (and m x n) buckets, each
bucket's median |predicted / measured - 1| and signed median, from the same AIConfigurator tables, the same boxes
and the same op lists as op_check's gemm_points. For finding which shapes and which direction, not for tuning:
AIConfigurator's tables are the independent check (README). Needs pandas + pyarrow, like op_check:

    PYTHONPATH=. /tmp/aic-venv/bin/python tests/bench/op_check_buckets.py \\
        /tmp/aic-venv/lib/python3.11/site-packages/aiconfigurator_core/systems/data --system b200_sxm --dtype nvfp4

`--all` takes every row of the group instead of op_check's thinned sample; `--rows N` prints N sampled rows with
their per-rates-key seconds.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import op_check  # noqa: E402

from autotune.catalog.models import load_model  # noqa: E402
from autotune.perf import oplist  # noqa: E402
from autotune.perf.ops import cost_ops  # noqa: E402

M_EDGES = (1, 16, 128, 1024)
N_EDGES = (1024, 8192)
K_EDGES = (1024, 4096, 16384)


def _bucket(x: float, edges: tuple[int, ...]) -> str:
    return next((f"<={e}" for e in edges if x <= e), f">{edges[-1]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="AIConfigurator's systems/data directory")
    parser.add_argument("--system", default="b200_sxm", choices=sorted(op_check.SYSTEMS))
    parser.add_argument("--dtype", default="fp8", choices=sorted(op_check.GEMM_DTYPES))
    parser.add_argument("--all", action="store_true", help="every row, not op_check's thinned sample")
    parser.add_argument("--rows", type=int, default=0, help="print this many sampled rows")
    args = parser.parse_args(argv)
    import pandas as pd

    path = op_check.latest(args.data, args.system, "gemm", "gemm_perf.parquet")
    if not path:
        print(f"no vLLM GEMM table for {args.system}", file=sys.stderr)
        return 2
    frame = pd.read_parquet(path)
    rows = frame[frame.gemm_dtype == args.dtype]
    rows = rows if args.all else op_check._thin(rows)
    hw = op_check.box(args.system)
    dtype = op_check.GEMM_DTYPES[args.dtype]
    model = load_model("llama-3.1-70b")
    spec = dataclasses.replace(model, dense_dtype=dtype, dense_format=op_check.FORMATS.get(args.dtype, dtype))
    c = op_check._context(spec, hw)
    by: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    points = []
    for r in rows.itertuples():
        cost = cost_ops(c, oplist.linear_ops(c, float(r.m), int(r.n), int(r.k), "op_check"))
        err = cost.time_s / (r.latency * 1e-3) - 1
        points.append((r, cost, err))
        by[("m", _bucket(r.m, M_EDGES))].append(err)
        by[("n", _bucket(r.n, N_EDGES))].append(err)
        by[("k", _bucket(r.k, K_EDGES))].append(err)
        by[("m x n", f"{_bucket(r.m, M_EDGES)} x {_bucket(r.n, N_EDGES)}")].append(err)
    print(f"{args.system} gemm_{args.dtype}: {len(points)} points, "
          f"median |err| {statistics.median(abs(p[2]) for p in points):.1%}")  # fmt: skip
    print(f"{'axis':6} {'bucket':20} {'points':>6} {'median |err|':>12} {'median signed':>14}")
    for (axis, name), errs in sorted(by.items()):
        med = statistics.median(abs(e) for e in errs)
        print(f"{axis:6} {name:20} {len(errs):6d} {med:12.1%} {statistics.median(errs):+14.1%}")
    for r, cost, err in sorted(random.Random(0).sample(points, min(args.rows, len(points))), key=lambda p: p[0].m):
        parts = {"/".join((k[0], k[2])): round(s * 1e6, 1) for k, s in cost.by_rate.items()}
        print(f"m={r.m:6d} n={r.n:6d} k={r.k:6d} predicted {cost.time_s * 1e6:8.1f} us, measured "
              f"{r.latency * 1e3:8.1f} us ({err:+.0%}) {parts}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
