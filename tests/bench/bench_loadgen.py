"""How faithfully `mi-tune bench` measures a server of known timing as load grows: the stand-in engine
(autotune/engines/standin.py) is started with TTFT and TPOT set, and bench's measured means are printed beside them
with the client's throughput in token events per second. The gap is the client's (and the stand-in's) own cost on
this machine, so read it as an upper bound on the error bench adds. Run:
`.venv/bin/python tests/bench/bench_loadgen.py [--tpot-ms 20] [--osl 64] [--concurrency 1 16 64 256]`.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autotune.engines import standin
from autotune.loadgen import bench
from autotune.specs import Workload


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(timing: dict, tmp: Path) -> tuple[subprocess.Popen, str]:
    path = tmp / "timing.json"
    path.write_text(json.dumps(timing))
    port = _free_port()
    argv = [sys.executable, standin.__file__, "--timing", str(path), "--", "vllm", "serve", "m", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the stand-in did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--tpot-ms", type=float, default=20.0)
    parser.add_argument("--isl", type=int, default=512)
    parser.add_argument("--osl", type=int, default=64)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    args = parser.parse_args()
    print(f"stand-in timing: TTFT {args.ttft_ms:g} ms, TPOT {args.tpot_ms:g} ms; isl {args.isl}, osl {args.osl}")
    head = ("concurrency", "requests", "TTFT ms", "err", "TPOT ms", "err", "events/s")
    print("  ".join(f"{h:>{w}}" for h, w in zip(head, (11, 8, 8, 6, 8, 6, 9), strict=True)))
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start({"ttft_ms": args.ttft_ms, "tpot_ms": args.tpot_ms}, Path(tmp))
        try:
            for c in args.concurrency:
                n = 2 * c
                report = bench(url, Workload(isl=args.isl, osl=args.osl, concurrency=c), num_requests=n)
                ttft, tpot = report.ttft_ms["mean"], report.tpot_ms["mean"]
                events = report.output_tok_s
                print(
                    f"{c:>11}  {report.completed:>8}  {ttft:>8.2f}  {ttft / args.ttft_ms - 1:>+6.1%}  "
                    f"{tpot:>8.2f}  {tpot / args.tpot_ms - 1:>+6.1%}  {events:>9,.0f}"
                )
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
