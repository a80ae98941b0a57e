"""`mi-tune bench`: an OpenAI-compatible streaming load generator (client.py), its report (metrics.py), and the
engines' own bench clients' results read into the same report (engine_files.py)."""

from __future__ import annotations

import asyncio

from autotune.loadgen.client import ENDPOINTS, RequestResult, Target, Timeouts, run_requests, served_model
from autotune.loadgen.engine_files import read_result
from autotune.loadgen.metrics import BenchReport, format_report, summarize
from autotune.specs.errors import MiTuneError
from autotune.specs.workload import Workload

MAX_REQUESTS = 1_000_000
MAX_TOKEN_TIMES = 64_000_000  # token times kept (8 bytes each: 512 MB), request count x output tokens


def bench(
    url: str,
    workload: Workload,
    *,
    model: str = "",
    endpoint: str = "completions",
    num_requests: int | None = None,
    concurrency: int = 0,
    seed: int = 0,
    timeouts: Timeouts = Timeouts(),
) -> BenchReport:
    """Replay the workload's trace (sim/trace.py) against `url`. Closed loop: `concurrency` (else the workload's)
    requests in flight; Poisson and burst arrivals are sent at their times with no cap. `model` "" = the first
    model the server lists."""
    from autotune.sim.trace import make_trace

    target = Target.parse(url)
    if endpoint not in ENDPOINTS:
        raise MiTuneError(f"--endpoint: expected one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
    cap = concurrency or workload.concurrency
    if workload.arrival == "closed" and cap < 1:
        raise MiTuneError("--concurrency: a closed-loop bench needs requests in flight (or give --rate / --burst)")
    if workload.arrival != "closed":
        cap = 0
    count = num_requests if num_requests is not None else (workload.burst or workload.num_requests)
    flag = "--num-requests" if num_requests is not None or not workload.burst else "--burst"
    if count > MAX_REQUESTS or count * workload.osl > MAX_TOKEN_TIMES:
        raise MiTuneError(
            f"{flag}: at most {MAX_REQUESTS:,} requests and {MAX_TOKEN_TIMES:,} output tokens a run (every token's "
            f"time is kept), got {count:,} requests of {workload.osl:,} tokens; run several benches"
        )
    try:
        trace = make_trace(workload, num_requests, seed)
    except ValueError as exc:
        raise MiTuneError(f"--num-requests: {exc}") from None

    async def go():
        name = model or await served_model(target, timeouts)
        results, duration = await run_requests(target, trace, name, cap, endpoint, seed, timeouts)
        return name, results, duration

    name, results, duration = asyncio.run(go())
    return summarize(
        results,
        duration,
        model=name,
        slo_ttft_ms=workload.ttft_ms,
        slo_tpot_ms=workload.tpot_ms,
        concurrency=cap,
        url=url,
    )


__all__ = ["BenchReport", "RequestResult", "Timeouts", "bench", "format_report", "read_result", "summarize"]
