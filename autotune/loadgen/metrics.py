"""A bench run summarised: throughput, TTFT / TPOT / ITL / E2E percentiles and goodput against an SLO."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from autotune.loadgen.client import RequestResult
from autotune.specs.workload import within_slo

PERCENTILES = (50, 90, 95, 99)
MAX_ERRORS_KEPT = 5


@dataclass(frozen=True)
class BenchReport:
    source: str  # mi-tune bench | vllm bench serve | sglang bench_serving
    model: str
    num_requests: int
    completed: int
    failed: int
    duration_s: float
    input_tok_s: float
    output_tok_s: float
    total_tok_s: float
    request_rate_rps: float
    ttft_ms: dict[str, float] = field(default_factory=dict)  # mean, p50, p90, p95, p99
    tpot_ms: dict[str, float] = field(default_factory=dict)
    itl_ms: dict[str, float] = field(default_factory=dict)
    e2e_ms: dict[str, float] = field(default_factory=dict)
    slo_ttft_ms: float = 0.0  # 0 = no SLO on it
    slo_tpot_ms: float = 0.0
    goodput_rps: float | None = None  # completed requests/s that met every SLO given (None: no per-request data)
    goodput_tok_s: float | None = None  # their input + output tokens per second
    concurrency: int = 0  # the cap the client kept (0 = none)
    url: str = ""
    errors: tuple[str, ...] = ()  # the first few distinct request errors


def stats_ms(values_s: Sequence[float]) -> dict[str, float]:
    """mean and p50/p90/p95/p99 in ms (linear interpolation between samples, numpy's default and the engines'
    bench clients'); empty when there are no samples."""
    if not len(values_s):
        return {}
    arr = np.asarray(values_s, dtype=float) * 1e3
    out = {"mean": float(arr.mean())}
    out.update({f"p{p}": float(np.percentile(arr, p)) for p in PERCENTILES})
    return out


def meets_slo(ttft_s: float, tpot_s: float, slo_ttft_ms: float, slo_tpot_ms: float) -> bool:
    return within_slo(ttft_s * 1e3, tpot_s * 1e3, slo_ttft_ms, slo_tpot_ms)


@dataclass(frozen=True)
class Sample:
    """One finished request, whatever recorded it."""

    input_tokens: int
    output_tokens: int
    ttft_s: float
    e2e_s: float
    itls_s: Sequence[float] = ()

    @property
    def tpot_s(self) -> float:
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0


def summarize_samples(
    samples: Sequence[Sample],
    *,
    failed: int,
    duration_s: float,
    source: str,
    model: str,
    slo_ttft_ms: float = 0.0,
    slo_tpot_ms: float = 0.0,
    concurrency: int = 0,
    url: str = "",
    errors: Sequence[str] = (),
) -> BenchReport:
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0
    tin = sum(s.input_tokens for s in samples)
    tout = sum(s.output_tokens for s in samples)
    good = [s for s in samples if meets_slo(s.ttft_s, s.tpot_s, slo_ttft_ms, slo_tpot_ms)]
    return BenchReport(
        source=source,
        model=model,
        num_requests=len(samples) + failed,
        completed=len(samples),
        failed=failed,
        duration_s=duration_s,
        input_tok_s=tin * per_s,
        output_tok_s=tout * per_s,
        total_tok_s=(tin + tout) * per_s,
        request_rate_rps=len(samples) * per_s,
        ttft_ms=stats_ms([s.ttft_s for s in samples]),
        tpot_ms=stats_ms([s.tpot_s for s in samples if s.output_tokens > 1]),
        itl_ms=stats_ms(np.concatenate([np.asarray(s.itls_s, dtype=float) for s in samples]) if samples else ()),
        e2e_ms=stats_ms([s.e2e_s for s in samples]),
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        goodput_rps=len(good) * per_s,
        goodput_tok_s=sum(s.input_tokens + s.output_tokens for s in good) * per_s,
        concurrency=concurrency,
        url=url,
        errors=tuple(dict.fromkeys(errors))[:MAX_ERRORS_KEPT],
    )


def summarize(
    results: Sequence[RequestResult],
    duration_s: float,
    *,
    model: str,
    slo_ttft_ms: float = 0.0,
    slo_tpot_ms: float = 0.0,
    concurrency: int = 0,
    url: str = "",
) -> BenchReport:
    ok = [r for r in results if r.ok]
    samples = [
        Sample(
            r.input_tokens,
            r.output_tokens,
            r.ttft_s,
            r.e2e_s,
            np.diff(np.asarray(r.token_times_s, dtype=float)),
        )
        for r in ok
    ]
    return summarize_samples(
        samples,
        failed=len(results) - len(ok),
        duration_s=duration_s,
        source="mi-tune bench",
        model=model,
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        concurrency=concurrency,
        url=url,
        errors=[r.error for r in results if r.error],
    )


def format_report(report: BenchReport) -> str:
    """A fixed-width table: throughput lines, then one row per latency metric."""

    def num(value: float | None, unit: str) -> str:
        return "-" if value is None else f"{value:,.1f} {unit}"

    head = [
        f"source: {report.source}" + (f" ({report.url})" if report.url else "") + f", model {report.model}",
        f"requests: {report.completed} completed, {report.failed} failed in {report.duration_s:.2f} s"
        + (f", concurrency {report.concurrency}" if report.concurrency else ""),
        f"throughput: {num(report.total_tok_s, 'tok/s')} ({num(report.input_tok_s, 'in')}, "
        f"{num(report.output_tok_s, 'out')}), {report.request_rate_rps:.2f} req/s",
    ]
    if report.slo_ttft_ms or report.slo_tpot_ms:
        slo = " and ".join(
            f"{name} <= {value:g} ms"
            for name, value in (("TTFT", report.slo_ttft_ms), ("TPOT", report.slo_tpot_ms))
            if value
        )
        head.append(f"goodput ({slo}): {num(report.goodput_rps, 'req/s')}, {num(report.goodput_tok_s, 'tok/s')}")
    columns = ("mean", *(f"p{p}" for p in PERCENTILES))
    rows = [("metric (ms)", *columns)]
    for name, stats in (
        ("TTFT", report.ttft_ms),
        ("TPOT", report.tpot_ms),
        ("ITL", report.itl_ms),
        ("E2E", report.e2e_ms),
    ):
        if stats:
            rows.append((name, *(f"{stats[c]:,.2f}" if c in stats else "-" for c in columns)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    tail = [f"error: {e}" for e in report.errors]
    return "\n".join(head + table + tail)
