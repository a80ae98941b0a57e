"""report.md: what was searched, what won, by how much, and why."""

from __future__ import annotations

import pandas as pd

from autotune.perf.rates import is_prior
from autotune.specs import BestConfig, PhasePlan, Prediction, StepBreakdown


def _table(frame: pd.DataFrame, floatfmt: str = "{:,.1f}") -> str:
    if frame.empty:
        return "_none_\n"
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        cells = [floatfmt.format(v) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


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
                "max running": p.batching.max_running,
                "chunk": p.batching.chunked_prefill_tokens,
            }
        )
    return pd.DataFrame(rows)


def _metrics(p: Prediction) -> dict:
    return {
        "total tok/s": p.total_tok_s,
        "input tok/s": p.input_tok_s,
        "output tok/s": p.output_tok_s,
        "total tok/s/GPU": p.total_tok_s_per_gpu,
        "TTFT ms": p.ttft_ms.get("mean", 0.0),
        "TPOT ms": p.tpot_ms.get("mean", 0.0),
        "in flight": p.concurrency,
    }


def _step_rows(label: str, steps: tuple[StepBreakdown, ...]) -> list[dict]:
    rows = []
    for s in steps:
        comm = sum(s.comm_ms.values())
        rows.append(
            {
                "plan": label,
                "step": s.phase,
                "tokens/step": s.batch_tokens,
                "step ms": s.step_ms,
                "compute ms": s.compute_ms,
                "memory ms": s.memory_ms,
                "comm ms": comm,
                "comm detail": ", ".join(f"{k} {v:.1f}" for k, v in s.comm_ms.items()) or "-",
                "overlap saved ms": s.overlap_saved_ms,
                "launch ms": s.launch_ms,
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
            f"{same.prediction.total_tok_s:,.0f} tokens/s, **{same.speedup:.2f}x** the engine default."
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


def render(
    best: BestConfig,
    trials: pd.DataFrame,
    top: pd.DataFrame,
    front: pd.DataFrame,
    reasons: pd.Series,
    choices: dict,
    launch_text: str,
    elapsed_s: float,
    alternatives: pd.DataFrame | None = None,
) -> str:
    w, hw, p, base = best.workload, best.hardware, best.prediction, best.baseline
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
    metrics = pd.DataFrame([{"plan": "best", **_metrics(p)}, {"plan": "engine default", **_metrics(base.prediction)}])
    steps = pd.DataFrame(_step_rows("best", p.steps) + _step_rows("engine default", base.prediction.steps))
    feasible = int(trials["feasible"].sum())
    space = pd.DataFrame(
        [
            {"dimension": k, "values searched": ", ".join(_choice(x) for x in v) or "(moot here)"}
            for k, v in choices.items()
        ]
    )
    shown = ["plan", "objective", "total_tok_s_per_gpu", "ttft_ms", "tpot_ms", "concurrency", "trial"]
    return f"""# mi-tune report: {best.model.name} on {hw.name}

**Box:** {hw.summary}
**Workload:** input {w.isl} tokens, output {w.osl} tokens, {load}; SLO: {slo}; objective: {w.objective}.

## Best plan: {best.plan.describe()}
Predicted **{p.total_tok_s:,.0f} tokens/s** ({p.input_tok_s:,.0f} in + {p.output_tok_s:,.0f} out), \
**{base.speedup:.2f}x** the engine default ({base.label}: {base.prediction.total_tok_s:,.0f} tokens/s).

{_numerics(best)}

{_table(_phase_rows(best.phases))}
{_table(metrics)}
### Why
{why(p, base.prediction)}

{_table(steps)}
![step breakdown](plots/breakdown.png)

### Rates and their provenance
{_rates(p)}

### Each choice against its alternatives
The best plan re-predicted with one setting changed to each other value the engine's rules admit on this box
(layouts are compared in the top plans below).

{_table(alternatives) if alternatives is not None and not alternatives.empty else "_no setting had an alternative_"}

## Top plans
{_table(top[shown]) if not top.empty else "_none_"}
## Pareto front (throughput per GPU vs TPOT)
![pareto](plots/pareto.png)

{_table(front[shown]) if not front.empty else "_none_"}
## Rejected plans
{feasible} of {len(trials)} trials were feasible. Most frequent reasons:

{_table(reasons.rename("trials").reset_index().rename(columns={"index": "reason"}))}
## Search
{len(trials)} trials in {elapsed_s:.1f} s, seed {best.provenance.seed}, study `{best.provenance.study}` in \
`{best.provenance.storage}`, space `{best.provenance.space}`.

{_table(space)}
## Launch ({best.launch.engine} {best.launch.engine_version})
```
{launch_text}
```

## How to read these numbers
Predictions come from mi-tune's analytical model (v2): each step's op list costed against this box's rates
table (see "Rates and their provenance" for which rates are priors), collectives costed on this box's link
matrix, and steady-state continuous batching. TTFT and TPOT are
steady-state means, not percentiles. They are predictions, not measurements: run `mi-tune serve` and an
engine benchmark client to measure.
"""
