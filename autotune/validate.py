"""Checks of command-line values before any work starts: each failure names its flag and what it expects.

The CLI calls these; a failure is a MiTuneError, which the CLI prints on one line and exits 2 with.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from autotune.specs import MiTuneError, ModelSpec, Workload, rundir
from autotune.specs.ranges import MAX_GPUS, Range, field_range

SEED_MAX = 2**32 - 1  # Optuna's samplers seed numpy's RandomState, which takes 0..2**32 - 1
MAX_PORT = 65535


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


def _workload(name: str) -> Range:
    rng = field_range("Workload", name)
    assert rng is not None, name
    return rng


# Every numeric flag's range (specs/ranges.py Range): a workload flag takes its Workload field's range, so a flag
# and a workload file accept the same values. "COMMAND --flag" entries override where a command means another
# thing by the same flag. A new numeric flag adds its row here and passes through `flags` before any work.
FLAGS: dict[str, Range] = {
    "--isl": _workload("isl"),
    "--osl": _workload("osl"),
    "--concurrency": _workload("concurrency"),
    "--rate": _workload("rate_rps"),
    "--ttft-ms": _workload("ttft_ms"),
    "--tpot-ms": _workload("tpot_ms"),
    "--burst": _workload("burst"),
    "--isl-std": _workload("isl_std"),
    "--osl-std": _workload("osl_std"),
    "--num-requests": _workload("num_requests"),
    "--prefix-hit-rate": _workload("prefix_hit_rate"),
    "--slo-percentile": _workload("slo_percentile"),
    "--draft-acceptance": _workload("draft_acceptance"),
    "--expert-load-cv": _workload("expert_load_cv"),
    "--trials": Range(1, 1_000_000, "trials"),
    "--timeout": Range(0, 1e7, "seconds (leave it out for no limit)", open_low=True),  # ~4 months
    "--seed": Range(0, SEED_MAX),
    "--workers": Range(1, 1024, "processes"),
    "--gpus": Range(0, MAX_GPUS, note="0 = every GPU of the box"),
    "--measure": Range(0, 1000, "plans", "0 = no measuring"),
    "--measure-port": Range(1, MAX_PORT),
    # bench: how long a request may wait (loadgen/client.py), and the share of failures it tolerates
    "--connect-timeout": Range(0, 86_400, "seconds", open_low=True),
    "--first-token-timeout": Range(0, 86_400, "seconds", open_low=True),
    "--idle-timeout": Range(0, 86_400, "seconds", open_low=True),
    "--max-failed": Range(0, 1, note="a share of the requests"),
    # video models (autotune/video/): video/workload.py `check` adds the shape rules (multiples of 16, 4k+1 frames)
    "--width": Range(64, 16_384, "pixels"),
    "--height": Range(64, 16_384, "pixels"),
    "--frames": Range(1, 100_001, "frames"),
    "--steps": Range(0, 1000, "denoising steps", "0 = the model's default"),
    "--guidance": Range(-1, 100, note="classifier-free guidance scale; -1 = the model's default, <= 1 = no CFG"),
    "--videos-per-hour": Range(0, 1e6, "videos/hour", "0 = closed loop"),
    "--latency-slo-s": Range(0, 604_800, "s", "0 = no SLO"),  # a week
    "--port": Range(1, MAX_PORT),
    "--top": Range(1, 1000, "plans"),
    "--ready-timeout": Range(0, 1e6, "seconds", open_low=True),
    "bench --num-requests": Range(0, 10_000_000, "requests", "0 = the workload's"),
    "measure --num-requests": Range(0, 10_000_000, "requests", "0 = 4 rounds of the concurrency"),
    "kernels --tp": Range(0, MAX_GPUS, note="GPUs of the MoE layers; required without --best"),
    "kernels --ep": Range(1, MAX_GPUS),
    "kernels --trials": Range(1, 100_000, "configs per batch size"),
}


def flags(command: str, values: dict[str, float | None]) -> None:
    """Check the numeric flags of `command` that were given (None: left out) against FLAGS, before any work."""
    for flag, value in values.items():
        rng = FLAGS.get(f"{command} {flag}") or FLAGS[flag]
        if value is not None:
            rng.check(value, flag)


def workload_flags(isl: int, osl: int, concurrency: int, rate: float, ttft_ms: float, tpot_ms: float) -> None:
    """The workload flags every command shares (search, estimate, bench)."""
    values = {"--isl": isl, "--osl": osl, "--concurrency": concurrency, "--rate": rate}
    flags("", {**values, "--ttft-ms": ttft_ms, "--tpot-ms": tpot_ms})
    if concurrency and rate:
        raise MiTuneError(f"--concurrency {concurrency} and --rate {rate:g}: give one of them, not both")


# The simulator's workload flags: Workload field -> flag (their ranges are the fields', in FLAGS)
SIM_FLAGS = {
    "burst": "--burst",
    "isl_std": "--isl-std",
    "osl_std": "--osl-std",
    "prefix_hit_rate": "--prefix-hit-rate",
    "num_requests": "--num-requests",
    "slo_percentile": "--slo-percentile",
    "draft_acceptance": "--draft-acceptance",
    "expert_load_cv": "--expert-load-cv",
}


def simulator_flags(given: dict) -> None:
    """The simulator's workload flags that were given, keyed by Workload field as the CLI passes them on."""
    flags("", {SIM_FLAGS[k]: v for k, v in given.items() if k in SIM_FLAGS and not isinstance(v, str)})


def search_flags(trials: int, timeout_s: float | None, seed: int, workers: int, gpus: int) -> None:
    flags("search", {"--trials": trials, "--timeout": timeout_s, "--seed": seed, "--workers": workers, "--gpus": gpus})


def context(model: ModelSpec, workload: Workload) -> None:
    """A request (prompt plus output) must fit the model's context window (config.json max_position_embeddings)."""
    tokens = workload.isl + workload.osl
    if tokens > model.max_position:
        raise MiTuneError(
            f"--isl {workload.isl} + --osl {workload.osl} = {tokens} tokens: more than {model.name}'s context of "
            f"{model.max_position} tokens (max_position_embeddings)"
        )


# Folders a run directory holds (specs/rundir.py): a file of that name would stop the run after its work, when it
# writes there.
RUN_DIR_FOLDERS = rundir.FOLDERS


def run_dir(flag: str, path: str | Path | None) -> None:
    """A directory that exists or can be created: not an existing file, not under a file, writable, and no file
    where the run writes a folder."""
    if path is None:
        return
    p = Path(path)
    name = f"{flag} {path}".strip()
    if p.exists() and not p.is_dir():
        raise MiTuneError(f"{name}: expected a directory, but it is an existing file")
    for folder in RUN_DIR_FOLDERS:
        if (p / folder).exists() and not (p / folder).is_dir():
            raise MiTuneError(f"{name}: {p / folder} is a file; the run writes its '{folder}' folder there")
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


__all__ = ["FLAGS", "above", "at_least", "context", "flags", "out_file", "run_dir", "search_flags", "workload_flags"]
