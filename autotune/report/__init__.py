"""Report: tables (pandas), plots (matplotlib Agg), markdown and a self-contained HTML page."""

from __future__ import annotations

import json
from pathlib import Path

from autotune.report.html import markdown_to_html
from autotune.report.markdown import render
from autotune.report.plots import breakdown_plot, pareto_plot
from autotune.report.tables import alternatives_frame, infeasible_reasons, pareto_frame, top_plans, trials_frame
from autotune.search import SearchResult
from autotune.specs import BestConfig, to_dict


def summary(best: BestConfig, result: SearchResult, elapsed_s: float) -> dict:
    p = best.prediction
    return {
        "model": best.model.name,
        "hardware": best.hardware.name,
        "workload": to_dict(best.workload),
        "best_plan": best.plan.describe(),
        "best_trial": best.provenance.trial,
        "predicted": {
            "total_tok_s": p.total_tok_s,
            "input_tok_s": p.input_tok_s,
            "output_tok_s": p.output_tok_s,
            "total_tok_s_per_gpu": p.total_tok_s_per_gpu,
            "ttft_ms": p.ttft_ms,
            "tpot_ms": p.tpot_ms,
            "concurrency": p.concurrency,
            "slo_met": p.slo_met,
        },
        "baseline": {"plan": best.baseline.label, "total_tok_s": best.baseline.prediction.total_tok_s},
        "speedup": best.baseline.speedup,
        "trials": len(result.records),
        "feasible_trials": sum(r.prediction.feasible for r in result.records),
        "elapsed_s": elapsed_s,
        "seed": best.provenance.seed,
    }


def write_report(out: Path, best: BestConfig, result: SearchResult, launch_text: str, elapsed_s: float) -> dict:
    """Write trials.csv, pareto.csv, summary.json, plots/*.png, report.md, report.html; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    trials = trials_frame(result)
    front = pareto_frame(trials)
    files = {
        "trials": out / "trials.csv",
        "pareto": out / "pareto.csv",
        "summary": out / "summary.json",
        "report": out / "report.md",
        "html": out / "report.html",
    }
    trials.to_csv(files["trials"], index=False)
    front.to_csv(files["pareto"], index=False)
    files["summary"].write_text(json.dumps(summary(best, result, elapsed_s), indent=2) + "\n")
    files["pareto_png"] = pareto_plot(
        trials, front, best.baseline.prediction, best.plan.describe(), out / "plots" / "pareto.png"
    )
    files["breakdown_png"] = breakdown_plot(
        {"best": best.prediction, "default": best.baseline.prediction}, out / "plots" / "breakdown.png"
    )
    text = render(
        best,
        trials,
        top_plans(trials),
        front,
        infeasible_reasons(trials),
        result.choices,
        launch_text,
        elapsed_s,
        alternatives_frame(result.alternatives),
    )
    files["report"].write_text(text)
    files["html"].write_text(markdown_to_html(text, out, f"mi-tune: {best.model.name} on {best.hardware.name}"))
    return files


__all__ = ["summary", "top_plans", "trials_frame", "write_report"]
