"""Checks of command-line values before any work starts: each failure names its flag and what it expects.

The CLI calls these; a failure is a MiTuneError, which the CLI prints on one line and exits 2 with.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from autotune.specs import MiTuneError, ModelSpec, Workload

SEED_MAX = 2**32 - 1  # Optuna's samplers seed numpy's RandomState, which takes 0..2**32 - 1


def _number(flag: str, value: float) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise MiTuneError(f"{flag}: expected a finite number, got {value}")


def at_least(flag: str, value: float | None, low: float, meaning: str = "") -> None:
    """`value` >= `low` (None: the flag was not given). `meaning` explains a special value, e.g. '0 = none'."""
    if value is None:
        return
    _number(flag, value)
    if value < low:
        note = f" ({meaning})" if meaning else ""
        raise MiTuneError(f"{flag}: expected {_fmt(low)} or more{note}, got {_fmt(value)}")


def above(flag: str, value: float | None, low: float, unit: str = "") -> None:
    """`value` > `low` (None: the flag was not given)."""
    if value is None:
        return
    _number(flag, value)
    if value <= low:
        raise MiTuneError(f"{flag}: expected more than {_fmt(low)}{unit}, got {_fmt(value)}")


def _fmt(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def workload_flags(isl: int, osl: int, concurrency: int, rate: float, ttft_ms: float, tpot_ms: float) -> None:
    """The workload flags every command shares (search, estimate)."""
    at_least("--isl", isl, 1)
    at_least("--osl", osl, 1)
    at_least("--concurrency", concurrency, 0, "0 = as many as fit")
    at_least("--rate", rate, 0, "requests/s; 0 = closed loop")
    at_least("--ttft-ms", ttft_ms, 0, "0 = no TTFT SLO")
    at_least("--tpot-ms", tpot_ms, 0, "0 = no TPOT SLO")
    if concurrency and rate:
        raise MiTuneError(f"--concurrency {concurrency} and --rate {rate:g}: give one of them, not both")


# The simulator's workload flags: Workload field -> (flag, lowest value, highest value (excluded), unit or meaning)
SIM_FLAGS = {
    "burst": ("--burst", 0, None, "0 = no burst"),
    "isl_std": ("--isl-std", 0, None, "tokens"),
    "osl_std": ("--osl-std", 0, None, "tokens"),
    "prefix_hit_rate": ("--prefix-hit-rate", 0, 1, "a share of the prompt"),
    "num_requests": ("--num-requests", 1, None, "requests the simulator runs"),
    "slo_percentile": ("--slo-percentile", 0, 100, "a percentile"),
    "draft_acceptance": ("--draft-acceptance", 0, 1, "a per-draft-token acceptance (0 = the model's default)"),
}


def simulator_flags(given: dict) -> None:
    """The simulator's workload flags that were given, keyed by Workload field as the CLI passes them on."""
    for name, value in given.items():
        if name not in SIM_FLAGS or isinstance(value, str):
            continue
        flag, low, high, meaning = SIM_FLAGS[name]
        _number(flag, value)
        if high is None:
            at_least(flag, value, low, meaning)
        elif not low <= value < high or (name == "slo_percentile" and value == low):
            bounds = f"{low:g} < x < {high:g}" if name == "slo_percentile" else f"{low:g} <= x < {high:g}"
            raise MiTuneError(f"{flag}: expected {meaning}, {bounds}, got {_fmt(value)}")


def search_flags(trials: int, timeout_s: float | None, seed: int, workers: int, gpus: int) -> None:
    at_least("--trials", trials, 1)
    above("--timeout", timeout_s, 0, " seconds (leave it out for no limit)")
    if not 0 <= seed <= SEED_MAX:
        raise MiTuneError(f"--seed: expected 0..{SEED_MAX}, got {seed}")
    at_least("--workers", workers, 1)
    at_least("--gpus", gpus, 0, "0 = every GPU of the box")


def context(model: ModelSpec, workload: Workload) -> None:
    """A request (prompt plus output) must fit the model's context window (config.json max_position_embeddings)."""
    tokens = workload.isl + workload.osl
    if tokens > model.max_position:
        raise MiTuneError(
            f"--isl {workload.isl} + --osl {workload.osl} = {tokens} tokens: more than {model.name}'s context of "
            f"{model.max_position} tokens (max_position_embeddings)"
        )


def run_dir(flag: str, path: str | Path | None) -> None:
    """A directory that exists or can be created: not an existing file, not under a file, writable."""
    if path is None:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise MiTuneError(f"{flag} {path}: expected a directory, but it is an existing file")
    _writable_below(flag, path, p if p.is_dir() else p.parent)


def out_file(flag: str, path: str | Path | None) -> None:
    """A file that can be written: not a directory, its folder creatable and writable."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise MiTuneError(f"{flag} {path}: expected a file name, but it is a directory")
    _writable_below(flag, path, p.parent)


def _writable_below(flag: str, given: str | Path, folder: Path) -> None:
    """The nearest existing ancestor of `folder` must be a directory this process may write into (as root, a
    permission bit does not stop the write, but a regular file in the path still does)."""
    probe = folder.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise MiTuneError(f"{flag} {given}: cannot be created: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise MiTuneError(f"{flag} {given}: cannot be created: no write permission in {probe}")


__all__ = ["above", "at_least", "context", "out_file", "run_dir", "search_flags", "workload_flags"]
