"""Tables of a search (every trial, the Pareto front, the distinct top plans) and their markdown form."""

from __future__ import annotations

import re

import pandas as pd

from autotune.search import SearchResult, TrialRecord
from autotune.search.explain import Alternative


def _row(r: TrialRecord) -> dict:
    p = r.prediction
    row = {
        "trial": r.number,
        "feasible": p.feasible,
        "slo_met": p.feasible and p.slo_met,
        "objective": r.value,
        "plan": r.plan.describe() if r.plan else "",
        "engine": r.plan.engine if r.plan else r.params.get("engine", ""),
        "mode": r.plan.mode if r.plan else r.params.get("mode", ""),
        "total_tok_s": p.total_tok_s,
        "input_tok_s": p.input_tok_s,
        "output_tok_s": p.output_tok_s,
        "total_tok_s_per_gpu": p.total_tok_s_per_gpu,
        "output_tok_s_per_gpu": p.output_tok_s_per_gpu,
        "ttft_ms": p.ttft_ms.get("mean", float("nan")),
        "tpot_ms": p.tpot_ms.get("mean", float("nan")),
        "concurrency": p.concurrency,
        "simulated_requests": p.simulated_requests,  # 0: steady-state figures only
        "screened_tok_s": r.screened_tok_s or p.total_tok_s,  # the steady-state screen's figure
        "reason": r.reason,
    }
    for metric in ("ttft", "tpot"):  # percentiles where the prediction carries them (p50, p95, p99, ...)
        values = getattr(p, f"{metric}_ms")
        row.update({f"{metric}_{k}_ms": v for k, v in sorted(values.items()) if k != "mean"})
    row.update({f"param.{k}": v for k, v in sorted(r.params.items())})
    return row


def trials_frame(result: SearchResult) -> pd.DataFrame:
    """One row per trial, and one per plan the ranking adopted after the search (`after_search`: a
    single-setting move of the best that simulated higher, search/ranking.py `climb`); `rank`: the plan's place
    among the candidates on the best's scale (1 = the best plan), empty for plans not ranked."""
    labels = {r.plan.describe() for r in result.records if r.plan is not None}
    moved = [r for r in result.ranked if r.plan.describe() not in labels]  # adopted after the simulation
    rows = [{**_row(r), "after_search": False} for r in result.records]
    rows += [{**_row(r), "after_search": True} for r in moved]  # numbered after the trial they moved from
    frame = pd.DataFrame(rows).sort_values(["trial", "after_search"]).reset_index(drop=True)
    ranks = {r.plan.describe(): i + 1 for i, r in enumerate(result.ranked)}
    frame["rank"] = [ranks.get(plan, float("nan")) for plan in frame["plan"]]
    return frame


def latency_column(trials: pd.DataFrame, metric: str) -> str:
    """The column a latency axis uses: P95 when every feasible trial's prediction carries it (all simulated, as
    in a Pareto search), the mean otherwise (a front over the few simulated trials alone would mislead)."""
    p95 = f"{metric}_p95_ms"
    feasible = trials[trials["feasible"]] if "feasible" in trials else trials
    return p95 if p95 in trials and len(feasible) and feasible[p95].notna().all() else f"{metric}_ms"


def pareto_frame(trials: pd.DataFrame, latency: str = "tpot_ms") -> pd.DataFrame:
    """Feasible plans not beaten on both throughput per GPU (higher) and `latency` (lower), one row per plan."""
    ok = (
        trials[trials["feasible"] & trials[latency].notna()]
        .drop_duplicates("plan")
        .sort_values([latency, "total_tok_s_per_gpu"], ascending=[True, False])
    )
    front, best = [], -1.0
    for idx, row in ok.iterrows():
        if row["total_tok_s_per_gpu"] > best:
            front.append(idx)
            best = row["total_tok_s_per_gpu"]
    return ok.loc[front].reset_index(drop=True)


def best_so_far(trials: pd.DataFrame) -> pd.Series:
    """The best objective reached by each trial number (0 until a feasible trial meets the SLO)."""
    ordered = trials.sort_values("trial")
    return pd.Series(ordered["objective"].clip(lower=0).cummax().to_numpy(), index=ordered["trial"].to_numpy())


def top_plans(trials: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The k best distinct plans on the scale the best was chosen by: the search's ranking (`rank`, simulated
    plans) when the run recorded one, else (older run directories) the objective."""
    if "rank" in trials and trials["rank"].notna().any():
        ok = trials[trials["rank"].notna() & (trials["objective"] > 0)].sort_values(["rank", "trial"])
    else:
        ok = trials[trials["objective"] > 0].sort_values(["objective", "trial"], ascending=[False, True])
    return ok.drop_duplicates("plan").head(k).reset_index(drop=True)


def infeasible_reasons(trials: pd.DataFrame, k: int = 8) -> pd.Series:
    reasons = trials.loc[trials["reason"] != "", "reason"]
    return reasons.value_counts().head(k)


def alternatives_frame(rows: tuple[Alternative, ...]) -> pd.DataFrame:
    """The best plan against each admitted single-dimension change: tokens/s, the change in % against the chosen
    row's figure (the headline's, simulated, when the search passed it), whether the row is simulated or screened,
    TPOT and the communication of the step that sets the pace (decode or mixed), so a reader sees why a value won."""
    chosen = {(a.phase, a.dimension): a.total_tok_s for a in rows if a.chosen}
    spread: dict[tuple, set] = {}
    for a in rows:
        spread.setdefault((a.phase, a.dimension), set()).add(round(a.total_tok_s, 6))
    out = []
    for a in rows:
        if len(spread[(a.phase, a.dimension)]) < 2:
            continue  # no admitted alternative, or none that changes anything in this plan: it explains nothing
        p, base = a.prediction, chosen.get((a.phase, a.dimension), 0.0)
        missed = p.feasible and not p.slo_met
        figure = 0.0 if missed else a.total_tok_s  # the objective: nothing where the SLO is missed
        step = p.steps[-1] if p.feasible and p.steps else None
        out.append(
            {
                "phase": a.phase,
                "dimension": a.dimension,
                "value": "(unset)" if a.value is None else str(a.value),
                "chosen": "yes" if a.chosen else "",
                "total tok/s": figure,
                "vs chosen": f"{figure / base - 1:+.1%}" if base else "-",
                "scale": ("simulated" if a.simulated else "screened") + (", SLO missed" if missed else ""),
                "TPOT mean (ms)": p.tpot_ms.get("mean", float("nan")) if p.feasible else float("nan"),
                "comm per step": ", ".join(f"{k} {v:.2f} ms" for k, v in step.comm_ms.items()) if step else p.reason,
            }
        )
    return pd.DataFrame(out)


def _decimals(values: pd.Series) -> int:
    """One precision per column, so its numbers line up: none above 100, one above 10, else two."""
    finite = values.dropna().abs()
    top = finite.max() if len(finite) else 0.0
    return 0 if top >= 100 else 1 if top >= 10 else 2


def _cell(value, decimals: int) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else ("yes" if value else "no")
    if isinstance(value, float):
        return "-" if pd.isna(value) else f"{value:,.{decimals}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


NUMBER_TEXT = re.compile(r"[+-]?[\d,.]+%?|-|")  # a text column of numbers (a change in %, say) aligns right too


def _right_aligned(column: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_numeric_dtype(column):
        return True
    return all(isinstance(v, str) and NUMBER_TEXT.fullmatch(v) for v in column) and column.ne("").any()


def markdown_table(frame: pd.DataFrame, headers: dict[str, str] | None = None) -> str:
    """A markdown table: numeric columns right-aligned at one precision each, `headers` renames columns
    (units in the header, not in every cell)."""
    if frame.empty:
        return "_none_\n"
    right = {c: _right_aligned(frame[c]) for c in frame}
    decimals = {c: _decimals(frame[c].astype(float)) if pd.api.types.is_float_dtype(frame[c]) else 0 for c in frame}
    names = [(headers or {}).get(c, str(c)) for c in frame.columns]
    lines = ["| " + " | ".join(names) + " |", "|" + "".join("---:|" if right[c] else "---|" for c in frame)]
    for row in frame.itertuples(index=False):
        cells = [
            _cell(v.item() if hasattr(v, "item") else v, decimals[c]) for c, v in zip(frame.columns, row, strict=True)
        ]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def scale_of(percentile: float, has_slo: bool) -> str:
    """The scale the best plan was chosen by, in words (search/objectives.py, search/ranking.py)."""
    slo = f" where the SLO holds at P{percentile:g}" if has_slo else ""
    return f"simulated total tokens/s{slo}"


def candidate_rows(trials: pd.DataFrame, percentile: float, k: int = 5) -> list[dict]:
    """The top plans as plain rows on the best's scale: the simulated figure (the ranking), the screen's
    steady-state figure beside it, latencies at the SLO percentile, and, for a row the screen scored above the
    best, why the best still won."""
    from autotune.search.ranking import why_below

    top = top_plans(trials, k)
    q = f"p{percentile:g}"
    rows = []
    for rec in top.to_dict("records"):
        row = {
            "plan": rec["plan"],
            "total_tok_s": float(rec["total_tok_s"]),
            "screened_tok_s": float(rec.get("screened_tok_s", rec["total_tok_s"])),
            "scale": "simulated" if rec.get("simulated_requests", 0) > 0 else "screened",
            f"ttft_{q}_ms": _finite(rec.get(f"ttft_{q}_ms")),
            f"tpot_{q}_ms": _finite(rec.get(f"tpot_{q}_ms")),
            "ttft_ms": _finite(rec.get("ttft_ms")),
            "tpot_ms": _finite(rec.get("tpot_ms")),
            "concurrency": int(rec["concurrency"]),
            "trial": int(rec["trial"]),
        }
        rows.append(row)
    for row in rows[1:]:
        row["note"] = why_below(row, rows[0], percentile)
    if rows:
        rows[0]["note"] = "best"
    return rows


def missed_in_simulation(trials: pd.DataFrame, best_screened: float) -> pd.DataFrame:
    """Distinct plans the screen scored above the best that missed the SLO once simulated."""
    if "screened_tok_s" not in trials:
        return trials.iloc[0:0]
    missed = trials[
        (trials["simulated_requests"] > 0) & (trials["objective"] <= 0) & (trials["screened_tok_s"] > best_screened)
    ]
    return missed.sort_values("screened_tok_s", ascending=False).drop_duplicates("plan")


def _finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if pd.isna(value) else value
