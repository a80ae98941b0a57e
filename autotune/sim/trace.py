"""Request traces: a Workload turned into concrete requests, the one input shared by the simulator (sim/engine.py)
and the load generator (`mi-tune bench --url`), so that both replay the same traffic.

Arrivals, by the workload's `arrival`:
- poisson: exponential gaps at `rate_rps`, starting at t=0.
- burst: `burst` requests, all at arrival_s = 0.0.
- closed: every arrival_s is 0.0 and the CONSUMER keeps `concurrency` requests in flight, sending request i+1
  when one finishes (0 = as many as the deployment admits; a load generator must then pick a number).
Lengths come from the workload's `length_dist` (see specs/workload.py); a draw never goes below one token.
The same (workload, num_requests, seed) always gives the same trace; lengths and arrival gaps use separate
random streams, so changing the arrival process leaves the lengths alone.
"""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from autotune.specs import MiTuneError, Workload
from autotune.specs.io import read_text
from autotune.specs.ranges import field_range

LENGTHS_FILE_MAX_BYTES = 256 * 2**20  # ~20M (input, output) rows


@dataclass(frozen=True)
class Request:
    index: int
    arrival_s: float
    input_tokens: int
    output_tokens: int


def make_trace(workload: Workload, num_requests: int | None = None, seed: int = 0) -> tuple[Request, ...]:
    """`num_requests` requests (default: the workload's `burst` for a burst, else its `num_requests`)."""
    w = workload
    n = num_requests if num_requests is not None else (w.burst or w.num_requests)
    if n < 1:
        raise ValueError(f"num_requests: expected a positive count, got {n}")
    lengths = _lengths(w, n, random.Random(f"lengths-{seed}"))
    if w.arrival == "poisson":
        rng, t, arrivals = random.Random(f"arrivals-{seed}"), 0.0, []
        for _ in range(n):
            arrivals.append(t)
            t += rng.expovariate(w.rate_rps)
    else:
        arrivals = [0.0] * n
    return tuple(Request(i, a, isl, osl) for i, (a, (isl, osl)) in enumerate(zip(arrivals, lengths, strict=True)))


def _lengths(w: Workload, n: int, rng: random.Random) -> list[tuple[int, int]]:
    if w.length_dist == "file":
        rows = read_lengths(w.lengths_file)
        return [rows[i % len(rows)] for i in range(n)]
    if w.length_dist == "fixed" or (not w.isl_std and not w.osl_std):
        return [(w.isl, w.osl)] * n
    draw_in, draw_out = _sampler(w.length_dist, w.isl, w.isl_std, rng), _sampler(w.length_dist, w.osl, w.osl_std, rng)
    return [(draw_in(), draw_out()) for _ in range(n)]


def _sampler(dist: str, mean: float, std: float, rng: random.Random):
    if not std:
        return lambda: int(mean)
    if dist == "normal":
        return lambda: max(1, round(rng.gauss(mean, std)))
    # lognormal with this mean and standard deviation: sigma^2 = ln(1 + (std/mean)^2), mu = ln(mean) - sigma^2/2
    sigma = math.sqrt(math.log1p((std / mean) ** 2))
    mu = math.log(mean) - sigma * sigma / 2
    return lambda: max(1, round(rng.lognormvariate(mu, sigma)))


def read_lengths(path: str) -> tuple[tuple[int, int], ...]:
    """(input_tokens, output_tokens) rows of a CSV (two columns, an optional header) or a JSONL file (objects with
    input_tokens and output_tokens, or input and output); errors name the file and line."""
    p = Path(path)
    try:
        stamp = p.stat().st_mtime_ns
    except OSError:
        raise MiTuneError(f"{path}: lengths file not found") from None
    return _read_lengths(str(p), stamp)


@lru_cache(maxsize=8)
def _read_lengths(path: str, _mtime_ns: int) -> tuple[tuple[int, int], ...]:
    text = read_text(path, LENGTHS_FILE_MAX_BYTES)
    rows = _jsonl_rows(path, text) if path.endswith((".jsonl", ".json")) else _csv_rows(path, text)
    if not rows:
        raise MiTuneError(f"{path}: no (input, output) length rows")
    return tuple(rows)


def _positive(path: str, line: int, values) -> tuple[int, int]:
    try:
        isl, osl = (int(v) for v in values)
    except (TypeError, ValueError):
        raise MiTuneError(f"{path}:{line}: expected two whole token counts (input, output)") from None
    if isl < 1 or osl < 1:
        raise MiTuneError(f"{path}:{line}: expected positive token counts, got {isl}, {osl}")
    for name, value in (("isl", isl), ("osl", osl)):  # the workload file's range for the same lengths
        field_range("Workload", name).check(value, f"{path}:{line}: {name}")
    return isl, osl


def _csv_rows(path: str, text: str) -> list[tuple[int, int]]:
    rows = []
    for line, cells in enumerate(csv.reader(text.splitlines()), 1):
        if not cells or not "".join(cells).strip():
            continue
        if line == 1 and not cells[0].strip().lstrip("-").isdigit():
            continue  # header
        if len(cells) < 2:
            raise MiTuneError(f"{path}:{line}: expected two columns (input, output)")
        rows.append(_positive(path, line, (cells[0].strip(), cells[1].strip())))
    return rows


def _jsonl_rows(path: str, text: str) -> list[tuple[int, int]]:
    rows = []
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            raise MiTuneError(f"{path}:{line}: malformed JSON") from None
        if not isinstance(obj, dict):
            raise MiTuneError(f"{path}:{line}: expected an object with input_tokens and output_tokens")
        isl = obj.get("input_tokens", obj.get("input"))
        osl = obj.get("output_tokens", obj.get("output"))
        if isinstance(isl, bool) or isinstance(osl, bool) or not isinstance(isl, int) or not isinstance(osl, int):
            raise MiTuneError(f"{path}:{line}: expected whole input_tokens and output_tokens")
        rows.append(_positive(path, line, (isl, osl)))
    return rows


def mean_lengths(path: str) -> tuple[int, int]:
    """Rounded mean (input, output) tokens of a lengths file: the isl/osl the steady-state screen uses."""
    rows = read_lengths(path)
    return (
        max(1, round(sum(r[0] for r in rows) / len(rows))),
        max(1, round(sum(r[1] for r in rows) / len(rows))),
    )
