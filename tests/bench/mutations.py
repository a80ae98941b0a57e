"""Mutation check of the performance model: apply single-line mutations, one at a time, to a temporary copy of
the repository, run the perf tests, and report which test caught each one.

Run: `.venv/bin/python tests/bench/mutations.py [--rev HEAD] [--tests tests/perf] [--only NAME]`.

Each mutation names its file and a unique substring of the line it changes (not a line number), so it survives
edits elsewhere; a substring that is absent or ambiguous is reported as "not applied" (update it when the code
moves). The unmutated copy is tested first: tests already failing there are deselected, so a mutation is only
"caught" by a test that passed before it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PERF = "autotune/perf"

# (name, file, unique substring of the original line, replacement)
MUTATIONS = [
    ("no switch-uplink hops (topology.transfer_s)", f"{PERF}/topology.py",
     "if topo.switch_of[i] != topo.switch_of[j]:", "if False:"),
    ("free pipeline hand-off", f"{PERF}/ops.py",
     '_collective("pp_send", hand_off_group, hand_off, "pp")', '_collective("pp_send", hand_off_group, 0.0, "pp")'),
    ("EP imbalance 1.0", f"{PERF}/efficiency.py", "EXPERT_LOAD_CV = 0.65", "EXPERT_LOAD_CV = 0.0"),
    ("all-reduce traffic 2(p-1)/p -> (p-1)/p", f"{PERF}/comm.py",
     "steps, per_edge = 2 * (p - 1), 2 * (p - 1) / p * nbytes",
     "steps, per_edge = 2 * (p - 1), (p - 1) / p * nbytes"),
    ("distinct experts -> top_k x tokens", f"{PERF}/oplist.py",
     "return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)", "return top_k * tokens"),
    ("KV bytes per token halved", f"{PERF}/memory.py", "    return total / shard\n", "    return total / shard / 2\n"),
    ("attention flops without heads", f"{PERF}/oplist.py",
     "flops = 2 * heads_per_rank * att.score_dim * entries * tokens_per_rank",
     "flops = 2 * att.score_dim * entries * tokens_per_rank"),
    ("prefill launch cost 0", f"{PERF}/efficiency.py",
     "PREFILL_LAUNCH_US_PER_LAYER = DECODE_LAUNCH_US_PER_LAYER + PIECEWISE_EXTRA_US_PER_LAYER",
     "PREFILL_LAUNCH_US_PER_LAYER = 0.0"),
    ("MoE weight bytes without /ranks", f"{PERF}/oplist.py",
     "hit * ffn.expert_params * e_bytes / ranks * imbalance", "hit * ffn.expert_params * e_bytes * imbalance"),
    ("memory reserve 0", f"{PERF}/memory.py", "RESERVE_GB = 1.5", "RESERVE_GB = 0.0"),
    ("LM head ignored", f"{PERF}/ops.py", "    total.add(head, 1 / phase.pp)", "    total.add(head, 0.0)"),
    ("custom all-reduce on 8 PCIe GPUs", f"{PERF}/comm.py",
     'return kind == "nvlink" or (len(group) == 2 and kind == "p2p")', 'return kind in ("nvlink", "p2p")'),
    ("chunked prefill cap ignored (prefill pool)", f"{PERF}/serving.py",
     "s = step(_prefill_input(chunk, w.isl))", "s = step(_prefill_input(max(chunk, w.isl), w.isl))"),
    ("chunked prefill cap ignored (first chunk)", f"{PERF}/serving.py",
     "first = step(_prefill_input(min(chunk, w.isl), w.isl))", "first = step(_prefill_input(w.isl, w.isl))"),
    ("all-gather traffic (p-1)/p -> 1", f"{PERF}/comm.py",
     '"ring", (p - 1) / p * out_bytes)', '"ring", out_bytes)'),
    ("online FP8 keeps bf16 bytes", f"{PERF}/precision.py",
     'DTYPE_BYTES[model.dense_dtype] > DTYPE_BYTES["fp8"]', "DTYPE_BYTES[model.dense_dtype] > 99"),
    ("FP8 KV ignored", "autotune/specs/model.py",
     'dtype = self.kv_dtype if kv_dtype == "auto" else kv_dtype', "dtype = self.kv_dtype"),
    ("TP all-reduce after attention dropped", f"{PERF}/oplist.py",
     '    ops.append(_collective("allreduce", tp_group, tokens / dp * row_bytes, "tp"))\n    if ffn.kind',
     "    if ffn.kind"),
    ("HBM bandwidth ignored", f"{PERF}/rates.py",
     'entries[("gemm", dtype, bucket)] = Rate(tflops, stream,',
     'entries[("gemm", dtype, bucket)] = Rate(tflops, 1280.0,'),
]  # fmt: skip

IGNORE = shutil.ignore_patterns(".git", ".venv", "results", "build", "*.egg-info", "__pycache__", ".pytest_cache")


def copy_repo(dest: Path, rev: str | None) -> None:
    if rev:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        for name in ("autotune", "tests", "search_spaces", "pyproject.toml"):
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, dest / name, ignore=IGNORE)
            elif src.exists():
                shutil.copy2(src, dest / name)


def run_tests(repo: Path, tests: list[str], extra: list[str]) -> tuple[int, list[str]]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *extra, *tests]
    env = {"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out.stdout, re.M)
    if out.returncode not in (0, 1) and not failed:
        failed = [f"<pytest exit {out.returncode}: {out.stdout.strip().splitlines()[-1:] or out.stderr[-200:]}>"]
    return out.returncode, failed


def apply(repo: Path, file: str, old: str, new: str) -> tuple[str, str]:
    """Mutate the copy; returns (original text, '') or ('', why not applied)."""
    path = repo / file
    if not path.exists():
        return "", "file not found"
    text = path.read_text()
    count = text.count(old)
    if count != 1:
        return "", "substring not found" if count == 0 else f"substring found {count} times"
    path.write_text(text.replace(old, new))
    return text, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="mutate this git revision instead of the working tree")
    parser.add_argument("--tests", nargs="+", default=["tests/perf"], help="test paths to run (default tests/perf)")
    parser.add_argument("--only", help="run only mutations whose name contains this")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mi-tune-mutations-") as tmp:
        repo = Path(tmp)
        copy_repo(repo, args.rev)
        _, broken = run_tests(repo, args.tests, [])
        deselect = [arg for t in broken if "::" in t for arg in ("--deselect", t)]
        if broken:
            print(f"unmutated copy: {len(broken)} failing test(s) deselected: {', '.join(broken)}")
        rows = []
        for name, file, old, new in MUTATIONS:
            if args.only and args.only not in name:
                continue
            original, why = apply(repo, file, old, new)
            if why:
                rows.append((name, f"not applied ({why})"))
                continue
            try:
                code, failed = run_tests(repo, args.tests, ["-x", *deselect])
            finally:
                (repo / file).write_text(original)
            rows.append((name, f"caught ({failed[0]})" if failed else "NOT CAUGHT" if code == 0 else f"exit {code}"))
    width = max(len(name) for name, _ in rows)
    print(f"{'mutation':{width}}  result")
    for name, result in rows:
        print(f"{name:{width}}  {result}")
    caught = sum(result.startswith("caught") for _, result in rows)
    applied = sum(not result.startswith("not applied") for _, result in rows)
    print(
        f"\n{caught} of {applied} applied mutations caught ({len(rows)} listed) in {time.perf_counter() - start:.0f} s"
    )
    return 0 if caught == applied else 1


if __name__ == "__main__":
    sys.exit(main())
