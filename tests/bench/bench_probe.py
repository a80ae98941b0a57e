"""How long `mi-tune probe --bench` takes on this box, per part, against the targets of issue 7 (an 8-GPU box:
full run under 5 minutes, `--quick` under 2). Each run is the real CLI in a subprocess; the parts' times come
from the run's own note ("probe --bench took N s (kernels .., copies .., collectives ..)"). Without a CUDA device
it times the harness on CPU tensors instead (`--bench-device cpu`: tiny shapes, 2 gloo processes, on the
recorded ESC8000A tree of tests/probe/fixtures), which checks the harness's own overhead, not the targets. Run:
`.venv/bin/python tests/bench/bench_probe.py [--full]` (figures taken while other work runs are noisy).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = {"--quick": 120.0, "full": 300.0}


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _run(extra: list[str], out: Path) -> tuple[float, int, str]:
    mi_tune = Path(sys.executable).with_name("mi-tune")
    argv = [str(mi_tune), "probe", "--bench", *extra, "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    took = next((line.strip() for line in proc.stdout.splitlines() if "probe --bench took" in line), "")
    return wall, proc.returncode, took or proc.stderr.strip().splitlines()[-1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="Also time the full run (minutes on a GPU box).")
    args = parser.parse_args()
    cuda = _cuda()
    runs = [["--quick"]] + ([[]] if args.full and cuda else [])
    with tempfile.TemporaryDirectory() as tmp:
        if not cuda:
            print("no CUDA device: timing the harness on CPU tensors (--bench-device cpu), not the targets")
            sys.path.insert(0, str(Path(__file__).parents[1] / "probe/fixtures"))
            import sysfs_tree

            sys_root, proc_root = sysfs_tree.build("esc8000a_rtx_pro_6000", Path(tmp, "box"))
            runs = [["--bench-device", "cpu", "--sysfs-root", str(sys_root), "--proc-root", str(proc_root)]]
        for extra in runs:
            out = Path(tmp, "hw.yaml")
            wall, rc, took = _run(extra, out)
            name = " ".join(extra[:2]) or "full"
            target = TARGET_S.get(name)
            verdict = "" if not cuda or target is None else (" (target met)" if wall < target else " (target MISSED)")
            print(f"probe --bench {name}: exit {rc}, {wall:.1f} s wall{verdict}; {took}")
            if rc == 0 and out.exists():
                import yaml

                measured = yaml.safe_load(out.read_text()).get("measured") or {}
                counts = {"kernel points": len(measured.get("ops", [])), "curves": len(measured.get("collectives", {}))}
                print(f"  {json.dumps(counts)}; notes: {len(measured.get('notes', []))}")


if __name__ == "__main__":
    main()
