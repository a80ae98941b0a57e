"""What several commands share: the workload options of `search` and `estimate`, the workload they
build, the host/port checks of `serve` and `measure`, and the plain-text table."""

from __future__ import annotations

import ipaddress
import re

import typer

from autotune import validate
from autotune.specs import MiTuneError, Workload

# The workload options `search` and `estimate` share (one declaration; `bench` has its own: it sends requests).
ISL = typer.Option(4096, "--isl", help="Input tokens per request.")
OSL = typer.Option(1024, "--osl", help="Output tokens per request.")
CONCURRENCY = typer.Option(0, "--concurrency", help="Requests in flight (0 = as many as fit).")
RATE = typer.Option(0.0, "--rate", help="Arrival rate, requests/s (instead of --concurrency).")
TTFT_MS = typer.Option(0.0, "--ttft-ms", help="SLO: time to first token at --slo-percentile, ms.")
TPOT_MS = typer.Option(0.0, "--tpot-ms", help="SLO: time per output token at --slo-percentile, ms.")
WORKLOAD_FILE = typer.Option(None, "--workload", help="Workload YAML (mi-tune/workload/v1); flags override.")
DATASET = typer.Option(None, "--dataset", help="Built-in length profile, e.g. sharegpt-stats.")
BURST = typer.Option(0, "--burst", help="N requests all at t=0 (instead of --concurrency/--rate).")
LENGTH_DIST = typer.Option("fixed", "--length-dist", help="fixed | normal | lognormal | file")
ISL_STD = typer.Option(0.0, "--isl-std", help="Input tokens' standard deviation (normal/lognormal).")
OSL_STD = typer.Option(0.0, "--osl-std", help="Output tokens' standard deviation (normal/lognormal).")
LENGTHS_FILE = typer.Option("", "--lengths-file", help="CSV/JSONL of (input, output) token counts.")
PREFIX_HIT_RATE = typer.Option(0.0, "--prefix-hit-rate", help="Share of prompt tokens cached, 0..1.")
NUM_REQUESTS = typer.Option(1000, "--num-requests", help="Requests the simulator runs.")
SLO_PERCENTILE = typer.Option(95.0, "--slo-percentile", help="Percentile --ttft-ms/--tpot-ms hold at (default 95).")
DRAFT_ACCEPTANCE = typer.Option(
    0.0, "--draft-acceptance", help="Speculative decoding: per-draft-token acceptance, 0..1 (0 = the model's default)."
)

EXPERT_LOAD_CV = typer.Option(
    0.0,
    "--expert-load-cv",
    help="MoE expert parallel: the routed experts' popularity CV under this traffic (0 = the model's default).",
)


def workload_from_flags(
    isl: int,
    osl: int,
    concurrency: int,
    rate: float,
    ttft_ms: float,
    tpot_ms: float,
    objective: str,
    file: str | None = None,
    dataset: str | None = None,
    **extra,
) -> Workload:
    validate.workload_flags(isl, osl, concurrency, rate, ttft_ms, tpot_ms)
    validate.simulator_flags(extra)
    if file or dataset or extra:  # --workload / --dataset / the simulator's workload flags (sim/workloads.py)
        from autotune.sim.workloads import build, load_workload_file

        flags = dict(isl=isl, osl=osl, concurrency=concurrency, rate_rps=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
        flags.update(objective=objective, **extra)
        if file or dataset:  # a file or a profile: only flags given away from their defaults override it
            flags = {k: v for k, v in flags.items() if v != getattr(Workload(), k)}
            if flags.keys() & {"concurrency", "rate_rps", "burst"}:  # the flags' arrival replaces the file's
                flags = {"concurrency": 0, "rate_rps": 0.0, "burst": 0, **flags}
        return build(load_workload_file(file) if file else None, dataset, flags)
    try:
        return Workload(
            isl=isl,
            osl=osl,
            concurrency=concurrency,
            rate_rps=rate,
            ttft_ms=ttft_ms,
            tpot_ms=tpot_ms,
            objective=objective,
        )
    except ValueError as exc:
        raise MiTuneError(f"workload flags: {exc}") from None


def sim_flags(
    burst, length_dist, isl_std, osl_std, lengths_file, prefix_hit_rate, num_requests, slo, accept=0.0, skew=0.0
):
    """The simulator's workload flags given away from their defaults (Workload fields)."""
    flags = dict(
        draft_acceptance=accept,
        expert_load_cv=skew,
        burst=burst,
        length_dist="file" if lengths_file and length_dist == "fixed" else length_dist,
        isl_std=isl_std,
        osl_std=osl_std,
        lengths_file=lengths_file,
        prefix_hit_rate=prefix_hit_rate,
        num_requests=num_requests,
        slo_percentile=slo,
    )
    return {k: v for k, v in flags.items() if v != getattr(Workload(), k)}


def table(rows: list[dict], columns: list[str]) -> str:
    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
MAX_PORT = 65535


def check_host(host: str | None) -> None:
    """A host name (RFC 1123 labels) or an IP literal; anything else (whitespace, shell characters) is bad input."""
    if host is None:
        return
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not (0 < len(name) <= 253 and all(HOST_LABEL.fullmatch(label) for label in name.split("."))):
        raise MiTuneError(f"--host: expected a host name or an IP address (no brackets), got {host!r}")


def check_port(port: int | None) -> None:
    if port is not None and not 1 <= port <= MAX_PORT:
        raise MiTuneError(f"--port: expected 1..{MAX_PORT}, got {port}")
