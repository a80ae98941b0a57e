"""Tables of a search: every trial, the Pareto front, the distinct top plans."""

from __future__ import annotations

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
        "reason": r.reason,
    }
    row.update({f"param.{k}": v for k, v in sorted(r.params.items())})
    return row


def trials_frame(result: SearchResult) -> pd.DataFrame:
    return pd.DataFrame([_row(r) for r in result.records]).sort_values("trial").reset_index(drop=True)


def pareto_frame(trials: pd.DataFrame) -> pd.DataFrame:
    """Feasible plans not beaten on both throughput per GPU (higher) and TPOT (lower), one row per plan."""
    ok = (
        trials[trials["feasible"]]
        .drop_duplicates("plan")
        .sort_values(["tpot_ms", "total_tok_s_per_gpu"], ascending=[True, False])
    )
    front, best = [], -1.0
    for idx, row in ok.iterrows():
        if row["total_tok_s_per_gpu"] > best:
            front.append(idx)
            best = row["total_tok_s_per_gpu"]
    return ok.loc[front].reset_index(drop=True)


def top_plans(trials: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    ok = trials[trials["objective"] > 0].sort_values(["objective", "trial"], ascending=[False, True])
    return ok.drop_duplicates("plan").head(k).reset_index(drop=True)


def infeasible_reasons(trials: pd.DataFrame, k: int = 8) -> pd.Series:
    reasons = trials.loc[trials["reason"] != "", "reason"]
    return reasons.value_counts().head(k)


def alternatives_frame(rows: tuple[Alternative, ...]) -> pd.DataFrame:
    """The best plan against each admitted single-dimension change: tokens/s, the change in %, TPOT and the
    communication of the step that sets the pace (decode or mixed), so a reader sees why a value won."""
    chosen = {(a.phase, a.dimension): a.total_tok_s for a in rows if a.chosen}
    spread: dict[tuple, set] = {}
    for a in rows:
        spread.setdefault((a.phase, a.dimension), set()).add(round(a.total_tok_s, 6))
    out = []
    for a in rows:
        if len(spread[(a.phase, a.dimension)]) < 2:
            continue  # no admitted alternative, or none that changes anything in this plan: it explains nothing
        p, base = a.prediction, chosen.get((a.phase, a.dimension), 0.0)
        step = p.steps[-1] if p.feasible and p.steps else None
        out.append(
            {
                "phase": a.phase,
                "dimension": a.dimension,
                "value": "(unset)" if a.value is None else str(a.value),
                "chosen": "yes" if a.chosen else "",
                "total tok/s": a.total_tok_s,
                "vs chosen": f"{a.total_tok_s / base - 1:+.1%}" if base else "-",
                "tpot ms": p.tpot_ms.get("mean", float("nan")) if p.feasible else float("nan"),
                "comm per step": ", ".join(f"{k} {v:.2f} ms" for k, v in step.comm_ms.items()) if step else p.reason,
            }
        )
    return pd.DataFrame(out)
