"""mi-tune against NVIDIA AIConfigurator on the same question, side by side in one run on this machine.

    /work/main/.venv/bin/python tests/bench/bench_aic.py [--aic /tmp/aic-venv/bin/aiconfigurator] [--repeats 3]

The question (issue 17): DeepSeek-V3 on 8x RTX PRO 6000 (AIConfigurator's `rtx_pro_6000_server` system; mi-tune's
`rtx-pro-6000-x8` preset), 4,000 input / 1,000 output tokens, TTFT 2,000 ms, TPOT 30 ms. Each repeat runs the two
CLIs back to back as fresh processes (wall time, imports included), alternating which goes first, so both see the
same machine load; the medians and their ratio are printed, with mi-tune's own time per part (--json timings_s,
plus `uncounted_s`: wall time outside its total_s, i.e. printing the answer and ending the process;
`report_warmup_s` is the report side's imports in its forked process, beside the trials, not part of the wall),
its wall time outside the trials (wall - trials_s) and each tool's best. Not part of the test suite: it skips
(exit 0) when AIConfigurator is not installed. Only wall times and mi-tune's figures are printed; AIConfigurator's
answer is shown as its own output, unparsed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_AIC = "/tmp/aic-venv/bin/aiconfigurator"
QUESTION = {"isl": 4000, "osl": 1000, "ttft_ms": 2000, "tpot_ms": 30}


def mi_tune_argv(out: Path) -> list[str]:
    q = QUESTION
    return [
        sys.executable, "-c", "from autotune.cli import main; main()", "search",
        "--model", "deepseek-v3", "--preset", "rtx-pro-6000-x8",
        "--isl", str(q["isl"]), "--osl", str(q["osl"]), "--ttft-ms", str(q["ttft_ms"]), "--tpot-ms",
        str(q["tpot_ms"]), "--out", str(out), "--json",
    ]  # fmt: skip


def aic_argv(aic: str, out: Path) -> list[str]:
    q = QUESTION
    return [
        aic, "cli", "default", "--model-path", "deepseek-ai/DeepSeek-V3", "--system", "rtx_pro_6000_server",
        "--total-gpus", "8", "--isl", str(q["isl"]), "--osl", str(q["osl"]), "--ttft", str(q["ttft_ms"]),
        "--tpot", str(q["tpot_ms"]), "--save-dir", str(out),
    ]  # fmt: skip


def timed(argv: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, check=False)
    return time.perf_counter() - started, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic", default=DEFAULT_AIC)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not (os.access(args.aic, os.X_OK) or shutil.which(args.aic)):
        print(f"skipped: AIConfigurator not installed ({args.aic})")
        return 0
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    mine, theirs, parts, outside, answer, aic_tail = [], [], [], [], None, ""
    with tempfile.TemporaryDirectory(prefix="bench-aic-") as tmp:
        for k in range(args.repeats):
            runs = [
                ("mi-tune", mi_tune_argv(Path(tmp) / f"mi-{k}")),
                ("aic", aic_argv(args.aic, Path(tmp) / f"aic-{k}")),
            ]
            for name, argv in runs if k % 2 == 0 else runs[::-1]:  # alternate who goes first
                wall, done = timed(argv, env)
                if done.returncode != 0:
                    print(f"{name} failed (exit {done.returncode}): {done.stderr[-2000:]}")
                    return 1
                if name == "mi-tune":
                    mine.append(wall)
                    answer = json.loads(done.stdout)
                    timings = answer.get("timings_s") or {}
                    # the wall time no part counts: printing the answer and ending the process
                    parts.append({**timings, "uncounted_s": wall - timings.get("total_s", wall)})
                    outside.append(wall - timings.get("trials_s", 0.0))
                else:
                    theirs.append(wall)
                    aic_tail = done.stdout[-3000:]
                print(f"repeat {k + 1}: {name:8s} {wall:6.1f} s")
    m, a = statistics.median(mine), statistics.median(theirs)
    print(f"\nmedian wall: mi-tune {m:.1f} s, AIConfigurator {a:.1f} s, ratio {m / a:.2f}x (target <= 0.5x)")
    keys = sorted({key for p in parts for key in p})
    medians = {key: statistics.median(p.get(key, 0.0) for p in parts) for key in keys}
    print("mi-tune time per part (median s): " + ", ".join(f"{key} {v:.2f}" for key, v in medians.items()))
    print(f"mi-tune wall time outside the trials (wall - trials_s, median): {statistics.median(outside):.2f} s")
    print(f"mi-tune best: {answer['best_plan']}: {answer['total_tok_s']:,.0f} tok/s "
          f"({answer['total_tok_s'] / 8:,.1f} tok/s per GPU), P95 TTFT {answer['ttft_p95_ms']:,.0f} ms")  # fmt: skip
    print("\nAIConfigurator's own summary (last run, unparsed):\n" + aic_tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
