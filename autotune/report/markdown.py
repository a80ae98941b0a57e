"""report.md: what was searched, what won, by how much, and why."""

from __future__ import annotations

import pandas as pd

from autotune.perf.rates import is_prior
from autotune.report.tables import markdown_table as _table
from autotune.specs import BestConfig, PhasePlan, Prediction, StepBreakdown


def _phase_rows(phases: dict[str, PhasePlan]) -> pd.DataFrame:
    rows = []
    for name, p in phases.items():
        rows.append(
            {
                "phase": name,
                "gpus": ",".join(map(str, p.gpus)),
                "replicas": p.replicas,
                "tp": p.tp,
                "dp": p.dp,
                "ep": p.ep,
                "pp": p.pp,
                "gemm": p.kernels.gemm_dtype,
                "kv cache": p.kernels.kv_cache_dtype,
                "attention": p.kernels.attention,
                "moe": p.kernels.moe,
                "all-reduce": p.comm.allreduce,
                "all-to-all": p.comm.all2all,
                "two-batch": p.overlap.two_batch,
                "max running (requests)": p.batching.max_running,
                "prefill chunk (tokens)": p.batching.chunked_prefill_tokens,
                "decode graph max (requests)": p.batching.cuda_graph_max_bs or "default",
            }
        )
    return pd.DataFrame(rows)


def _metrics(label: str, p: Prediction) -> dict:
    row = {
        "plan": label,
        "total tok/s": p.total_tok_s,
        "input tok/s": p.input_tok_s,
        "output tok/s": p.output_tok_s,
        "tok/s per GPU": p.total_tok_s_per_gpu,
        "TTFT mean (ms)": p.ttft_ms.get("mean", float("nan")),
        "TPOT mean (ms)": p.tpot_ms.get("mean", float("nan")),
    }
    for metric in ("ttft", "tpot"):
        if "p95" in getattr(p, f"{metric}_ms"):
            row[f"{metric.upper()} P95 (ms)"] = getattr(p, f"{metric}_ms")["p95"]
    row["in flight (requests)"] = p.concurrency
    return row


def _step_rows(label: str, steps: tuple[StepBreakdown, ...]) -> list[dict]:
    rows = []
    for s in steps:
        comm = sum(s.comm_ms.values())
        rows.append(
            {
                "plan": label,
                "step": s.phase,
                "tokens/step": s.batch_tokens,
                "step (ms)": s.step_ms,
                "compute (ms)": s.compute_ms,
                "memory (ms)": s.memory_ms,
                "comm (ms)": comm,
                "comm detail (ms)": ", ".join(f"{k} {v:.1f}" for k, v in s.comm_ms.items()) or "-",
                "overlap saved (ms)": s.overlap_saved_ms,
                "launch (ms)": s.launch_ms,
            }
        )
    return rows


def why(best: Prediction, baseline: Prediction) -> str:
    """One sentence from the breakdowns: the share of step time the default loses to communication."""

    def comm_share(p: Prediction) -> float:
        total = sum(s.step_ms for s in p.steps)
        return sum(sum(s.comm_ms.values()) for s in p.steps) / total if total else 0.0

    if not baseline.feasible:
        return f"The engine default cannot run here ({baseline.reason})."
    return (
        f"The engine default spends {comm_share(baseline):.0%} of its step time in collectives; the best plan "
        f"spends {comm_share(best):.0%}, and runs {best.concurrency} requests in flight against "
        f"{baseline.concurrency}."
    )


def _choice(value) -> str:
    return "(unset)" if value is None else str(value)


def _numerics(best: BestConfig) -> str:
    """Whether the plan serves the checkpoint as published; the speed-up both ways when it does not."""
    if not best.numerics:
        return "**Numerics:** the checkpoint's own (no online quantisation, KV cache in its native dtype)."
    text = f"**Numerics changed:** {'; '.join(best.numerics)}."
    same = best.same_numerics
    if same:
        text += (
            f" Keeping the checkpoint's numerics, the best plan found is {same.label}: "
            f"{same.prediction.total_tok_s:,.0f} tokens/s, {best.baseline.versus(same.speedup, bold=True)}."
        )
    return text


def _rates(p: Prediction) -> str:
    """The rates-table entries that carried the best plan's step time, with where each figure comes from."""
    if not p.rates:
        return "_no rates recorded_"
    rows = [
        {"op / dtype / shape": k, "provenance": v, "prior": "yes" if is_prior(v) else ""} for k, v in p.rates.items()
    ]
    priors = sum(1 for r in rows if r["prior"])
    return f"{priors} of {len(rows)} rates rest on datasheet priors.\n\n" + _table(pd.DataFrame(rows))


TRIAL_HEADERS = {
    "objective": "objective (tok/s)",
    "total_tok_s_per_gpu": "tok/s per GPU",
    "ttft_ms": "TTFT mean (ms)",
    "tpot_ms": "TPOT mean (ms)",
    "ttft_p95_ms": "TTFT P95 (ms)",
    "tpot_p95_ms": "TPOT P95 (ms)",
    "concurrency": "in flight (requests)",
    "repredicted": "objective re-predicted (tok/s)",
}


def _trial_table(frame: pd.DataFrame, repredicted: dict[str, Prediction] | None) -> str:
    wanted = ["plan", "objective", "total_tok_s_per_gpu", "ttft_ms", "tpot_ms", "ttft_p95_ms", "tpot_p95_ms"]
    shown = [c for c in [*wanted, "concurrency", "trial"] if c in frame and frame[c].notna().any()]
    frame = frame[shown].copy()
    if repredicted is not None:
        frame.insert(2, "repredicted", [_objective(repredicted.get(p)) for p in frame["plan"]])
    return _table(frame, TRIAL_HEADERS)


def _objective(p: Prediction | None) -> float:
    return float("nan") if p is None else p.total_tok_s if p.feasible and p.slo_met else 0.0


def _repredicted(stored: dict[str, Prediction], fresh: dict[str, Prediction], version: str) -> str:
    rows = []
    for label, p in stored.items():
        q = fresh.get(label)
        if q is None:
            continue
        rows.append(
            {
                "plan": label,
                "stored tok/s": p.total_tok_s,
                "re-predicted tok/s": q.total_tok_s if q.feasible else float("nan"),
                "change": f"{q.total_tok_s / p.total_tok_s - 1:+.1%}" if q.feasible and p.total_tok_s else "-",
                "stored TPOT mean (ms)": p.tpot_ms.get("mean", float("nan")),
                "re-predicted TPOT mean (ms)": q.tpot_ms.get("mean", float("nan")) if q.feasible else float("nan"),
                "re-predicted note": "" if q.feasible else q.reason,
            }
        )
    frame = pd.DataFrame(rows)
    if not frame.empty and not frame["re-predicted note"].any():
        frame = frame.drop(columns="re-predicted note")
    return (
        f"## Stored and re-predicted\nThe search's stored predictions beside the same plans predicted again now "
        f"by mi-tune {version} (`mi-tune report --repredict`).\n\n{_table(frame)}"
    )


def _on_the_box(run, figures: dict[str, str]) -> str:
    """The topology figure and which collectives of the best plan cross a switch uplink or the socket link."""
    from autotune.report.topology import crossings

    rows = crossings(run.hardware, run.best.plan)
    socket = sum(r["sockets"] > 1 for r in rows)
    uplink = sum(r["switches"] > 1 and r["sockets"] == 1 for r in rows)
    text = (
        f"Where the best plan's GPUs sit on the box. Of its {len(rows)} communicating groups (first replica of "
        f"each phase; the others repeat it on their own GPUs), {socket} cross the socket link and {uplink} more "
        "cross a PCIe switch uplink; the rest stay under one switch."
        if rows
        else "The best plan runs each replica on one GPU: no collective crosses a shared link."
    )
    figure = _figure(figures, "topology", "the plan on the box")
    return f"{text}\n\n{figure}\n\n" + (_table(pd.DataFrame(rows)) if rows else "")


def _latency(interactive: dict | None) -> str:
    """The interactive-SLO paragraph (search/interactive.py, as summary.json stores it)."""
    from autotune.report.console import latency_lines

    lines = latency_lines(interactive)
    return "**Latency:** " + " ".join(lines) if lines else ""


def _top_plans(trials: pd.DataFrame, w, repredicted) -> str:
    """The top plans on the best's scale, with the screen's figure beside the simulated one and why the best beat
    any row the screen scored higher."""
    from autotune.report.tables import candidate_rows, missed_in_simulation, scale_of, top_plans

    top = top_plans(trials)
    if "rank" not in trials or top.empty:
        return _trial_table(top, repredicted)
    rows = candidate_rows(trials, w.slo_percentile)
    notes = pd.DataFrame([{"plan": r["plan"], "screened (tok/s)": r["screened_tok_s"], "why": r.get("note", "")}
                          for r in rows])  # fmt: skip
    missed = missed_in_simulation(trials, rows[0]["screened_tok_s"]) if rows else pd.DataFrame()
    extra = (
        f"\n{len(missed)} plan(s) the screen scored above the best missed the SLO once simulated "
        f"(e.g. {missed.iloc[0]['plan']}).\n"
        if len(missed)
        else ""
    )
    return (
        f"Ranked by {scale_of(w.slo_percentile, w.has_slo)}, the scale the best plan was chosen by (objective and "
        "latencies simulated over the workload's trace); the steady-state screen's figure is shown beside it.\n\n"
        f"{_trial_table(top, repredicted)}\n{_table(notes)}{extra}"
    )


def _alternatives(frame: pd.DataFrame | None) -> str:
    if frame is None:
        return "_not recorded in this run directory (alternatives.csv is missing)_"
    return _table(frame) if not frame.empty else "_no setting had an alternative_"


def _figure(figures: dict[str, str], name: str, alt: str, missing: str = "") -> str:
    return f"![{alt}]({figures[name]})" if name in figures else f"_{missing or 'figure not drawn'}_"


def render(
    run,
    figures: dict[str, str],
    launch_text: str,
    stored: dict[str, Prediction],
    repredicted: dict[str, Prediction] | None = None,
    curve_note: str = "",
) -> str:
    """report.md of a run (rundata.RunData); `figures` maps figure names to paths relative to the run directory,
    `stored` labels the stored predictions a --repredict table compares against."""
    from autotune import __version__

    fresh = _repredicted(stored, repredicted, __version__) + "\n" if repredicted is not None else ""
    return "".join(
        (
            _best_section(run),
            fresh,
            _why_section(run, figures, curve_note, __version__),
            _plans_section(run, figures, repredicted),
            _search_section(run, figures, launch_text),
            HOW_TO_READ,
        )
    )


def _workload_text(w) -> tuple[str, str]:
    """(the load, the SLO) of a workload, as the report's header says them."""
    load = (
        f"concurrency {w.concurrency}"
        if w.concurrency
        else f"rate {w.rate_rps} req/s"
        if w.rate_rps
        else "as many requests in flight as the plan holds"
    )
    slo = (
        ", ".join(
            x
            for x in (
                f"TTFT <= {w.ttft_ms:g} ms" if w.ttft_ms else "",
                f"TPOT <= {w.tpot_ms:g} ms" if w.tpot_ms else "",
            )
            if x
        )
        or "none"
    )
    return load, slo


def _best_section(run) -> str:
    """The header (box, workload) and the best plan: its layout, numerics and figures against the engine default."""
    best = run.best
    w, hw, p, base = best.workload, best.hardware, best.prediction, best.baseline
    load, slo = _workload_text(w)
    metrics = pd.DataFrame([_metrics("best", p), _metrics("engine default", base.prediction)])
    return f"""# mi-tune report: {best.model.name} on {hw.name}

**Box:** {hw.summary}

**Workload:** input {w.isl} tokens, output {w.osl} tokens, {load}; SLO: {slo}; objective: {w.objective}.

## Best plan: {best.plan.describe()}
Predicted **{p.total_tok_s:,.0f} tokens/s** ({p.input_tok_s:,.0f} in + {p.output_tok_s:,.0f} out), \
{base.versus(bold=True)}.

{_numerics(best)}

{_table(_phase_rows(best.phases))}
{_latency(run.interactive)}

{_table(metrics)}
"""


def _why_section(run, figures: dict[str, str], curve_note: str, version: str) -> str:
    """Why the best plan wins: step times, the plan on the box, memory, the concurrency curve, rates, alternatives."""
    p, base = run.best.prediction, run.best.baseline
    steps = pd.DataFrame(_step_rows("best", p.steps) + _step_rows("engine default", base.prediction.steps))
    return f"""### Why
{why(p, base.prediction)}

{_table(steps)}
{_figure(figures, "breakdown", "step time per phase")}

### The plan on the box
{_on_the_box(run, figures)}

### Memory per GPU
{_figure(figures, "memory", "memory per GPU")}

### Throughput against concurrency
Computed when this report was built (mi-tune {version}): the best plan and the engine default predicted by
the steady-state model at 1, 2, 4, ... requests in flight with no SLO; the diamonds are the stored operating
points (simulated over the workload's trace where the search simulated them).

{_figure(figures, "concurrency", "throughput against concurrency", curve_note)}

### Rates and their provenance
{_rates(p)}

### Each choice against its alternatives
The best plan re-predicted at search time with one setting changed to each other value the engine's rules admit
on this box (layouts are compared in the top plans below). The chosen rows carry the headline figure (simulated);
a change whose steady-state screen reaches it is simulated too, the others are screened (below the headline even
there); `scale` says which.

{_alternatives(run.alternatives)}

"""


def _tried(trials: pd.DataFrame) -> pd.DataFrame:
    """The search's own trials (not the refinement's moves after it)."""
    return trials[~trials["after_search"].astype(bool)] if "after_search" in trials else trials


def _plans_section(run, figures: dict[str, str], repredicted: dict[str, Prediction] | None) -> str:
    """The top plans, the Pareto front and why the rejected plans were rejected."""
    from autotune.report.tables import infeasible_reasons, latency_column

    trials, w = run.trials, run.best.workload
    tried = _tried(trials)
    feasible = int(tried["feasible"].sum())
    reasons = infeasible_reasons(tried).rename("trials").reset_index().rename(columns={"index": "reason"})
    latency = "TPOT P95" if latency_column(trials, "tpot") == "tpot_p95_ms" else "mean TPOT"
    return f"""## Top plans
{_top_plans(trials, w, repredicted)}
## Pareto front (throughput per GPU against {latency})
{_figure(figures, "pareto", "pareto front")}

{_trial_table(run.front, repredicted) if not run.front.empty else "_none_"}
## Rejected plans
{feasible} of {len(tried)} trials were feasible. Most frequent reasons:

{_table(reasons)}
"""


def _search_section(run, figures: dict[str, str], launch_text: str) -> str:
    """How the search ran (trials, time, seed, study, space) and the launch of the best plan."""
    best = run.best
    tried = _tried(run.trials)
    strategy = f" ({run.strategy})" if run.strategy else ""
    space = pd.DataFrame(
        [
            {"dimension": k, "values searched": ", ".join(_choice(x) for x in v) or "(moot here)"}
            for k, v in run.choices.items()
        ]
    )
    return f"""## Search
{len(tried)} trials in {run.elapsed_s:.1f} s{strategy}, seed {best.provenance.seed}, \
study `{best.provenance.study}` in `{best.provenance.storage}`, space `{best.provenance.space}`.

{_figure(figures, "history", "search history")}

{_table(space)}
## Launch ({best.launch.engine} {best.launch.engine_version})
```
{launch_text}
```

"""


HOW_TO_READ = """## How to read these numbers
Every figure here is a prediction, made in two stages. **Screened**: each trial is admitted by the engine's
capability rules, then costed by the steady-state model (each step's op list against this box's rates table, see
"Rates and their provenance" for which rates are priors; collectives on this box's link matrix; the memory fit;
steady-state continuous batching). **Simulated**: the screen's best plans are then run through the discrete-event
serving simulator over the workload's request trace, which gives the TTFT/TPOT percentiles the SLO is held at; the
best plan and the top plans are ranked on the simulated figure, and a `scale` column says which figure a row
carries. Tables and figures show the predictions stored when the search ran (the throughput-against-concurrency
figure and any re-predicted column are computed when the report is built).

Nothing in this report is **measured**. `mi-tune measure RUN_DIR` (or `search --measure K`) launches the top plans,
benches each with this workload and writes the measured figures beside this report (`measured.csv`, and the best
measured plan as `best-measured.yaml`).
"""
