"""What `mi-tune search` prints: the top plans on the scale the best was chosen by, the best, the plan keeping the
checkpoint's numerics and the plan meeting an interactive SLO (api.SearchOutcome in, lines of text out)."""

from __future__ import annotations

TOP_COLUMNS = ("plan", "total_tok_s", "screened_tok_s", "ttft_{q}_ms", "tpot_{q}_ms", "concurrency", "note")


def table(rows: list[dict], columns: list[str]) -> str:
    cells = [[_fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


def top_lines(outcome) -> list[str]:
    w = outcome.best.workload
    q = f"p{w.slo_percentile:g}"
    columns = [c.format(q=q) for c in TOP_COLUMNS]
    lines = [
        f"top plans, ranked by {outcome.scale} (the best was chosen the same way); total_tok_s and the "
        f"{q.upper()} latencies are simulated over the workload's trace, screened_tok_s is the steady-state screen:",
        table(list(outcome.top), columns),
    ]
    if outcome.missed:
        first = outcome.missed[0]
        latency = first.get(f"ttft_{q}_ms")
        lines.append(
            f"{len(outcome.missed)} plan(s) the screen scored above the best missed the SLO once simulated, e.g. "
            f"{first['plan']}: screen {first['screened_tok_s']:,.0f} tok/s"
            + (f", simulated {q.upper()} TTFT {latency:,.0f} ms" if latency == latency and latency else "")
        )
    return lines


def best_lines(outcome) -> list[str]:
    best = outcome.best
    p = best.prediction
    above = " -- ABOVE CAPACITY: " + p.note if p.note and "capacity" in p.note else ""
    lines = [
        f"best: {best.plan.describe()}: {p.total_tok_s:,.0f} tok/s ({p.input_tok_s:,.0f} in, "
        f"{p.output_tok_s:,.0f} out), {best.baseline.versus()}{above}"
    ]
    if p.note and not above:
        lines.append(f"note: {p.note}")
    if best.numerics:
        lines.append(f"numerics: the best plan changes the checkpoint's numerics: {'; '.join(best.numerics)}")
        same = best.same_numerics
        if same is None:
            lines.append("keeping the checkpoint's numerics: no feasible plan was sampled (try --keep-precision)")
        elif same.label == best.baseline.label:
            lines.append(
                "keeping the checkpoint's numerics: no plan of this search beats the engine default, which keeps "
                f"them ({same.label}: {same.prediction.total_tok_s:,.0f} tok/s; --keep-precision searches for one)"
            )
        else:
            lines.append(
                f"keeping the checkpoint's numerics (simulated like the best; --keep-precision searches for it): "
                f"{same.label}: {same.prediction.total_tok_s:,.0f} tok/s, {best.baseline.versus(same.speedup)}"
            )
    lines += latency_lines(outcome.interactive)
    return lines


def latency_lines(interactive: dict | None) -> list[str]:
    """The interactive-SLO line, and a warning naming which of the best plan's figures (TTFT, TPOT) miss it."""
    if not interactive:
        return []
    slo = interactive["slo"]
    pct = f"P{slo['percentile']:g}"
    text = f"{pct} TTFT <= {slo['ttft_ms']:,.0f} ms, TPOT <= {slo['tpot_ms']:,.0f} ms"
    whose = "your SLO" if interactive["source"] == "yours" else f"the default interactive SLO ({text})"
    if interactive["best_meets"]:
        return [f"latency: the best plan meets {whose}: {pct} TTFT {interactive['best_ttft_ms']:,.0f} ms"]
    ttft, tpot = interactive["best_ttft_ms"], interactive.get("best_tpot_ms") or 0.0
    missed = []
    if slo["ttft_ms"] and ttft > slo["ttft_ms"]:
        missed.append(f"{pct} TTFT is {ttft:,.0f} ms")
    if slo["tpot_ms"] and tpot > slo["tpot_ms"]:
        missed.append(f"{pct} TPOT is {tpot:,.1f} ms")
    lines = [
        f"warning: the best plan misses {whose}: its {' and its '.join(missed) or 'percentile figures miss it'}; it "
        "is a throughput plan (every request it holds in flight waits its turn)"
    ]
    if interactive["plan"]:
        lines.append(
            f"meeting it: {interactive['plan']}: {interactive['total_tok_s']:,.0f} tok/s, {pct} TTFT "
            f"{interactive['ttft_ms']:,.0f} ms, {pct} TPOT {interactive['tpot_ms']:,.1f} ms (pass --ttft-ms/--tpot-ms "
            "to search for it)"
        )
    else:
        lines.append("no plan of this search meets it; pass --ttft-ms/--tpot-ms to search for one")
    return lines
