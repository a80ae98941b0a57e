"""A run directory's report: the search's data files (rundata.py lists them), then report.md, report.html and
plots/*.png built from those files alone (`build_report`, also `mi-tune report RUN_DIR`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from autotune.report.drawing import draw_all
from autotune.report.html import markdown_to_html
from autotune.report.markdown import render
from autotune.report.plots import breakdown_plot, concurrency_plot, history_plot, memory_plot, pareto_plot
from autotune.report.rundata import RunData, load_run, save_model, top_plan_specs, write_summary
from autotune.report.tables import (
    alternatives_frame,
    candidate_rows,
    latency_column,
    missed_in_simulation,
    pareto_frame,
    scale_of,
    top_plans,
    trials_frame,
)
from autotune.report.topology import topology_plot
from autotune.search import SearchResult
from autotune.specs import BestConfig, MiTuneError, Prediction, rundir, to_dict
from autotune.specs.best import finite_or_none as _finite


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
        "speedup": _finite(best.baseline.speedup),
        "capacity_note": p.note or None,
        "scale": scale_of(best.workload.slo_percentile, best.workload.has_slo),
        "same_numerics": None
        if best.same_numerics is None
        else {
            "plan": best.same_numerics.label,
            "total_tok_s": best.same_numerics.prediction.total_tok_s,
            "speedup": _finite(best.same_numerics.speedup),
            "simulated": best.same_numerics.prediction.simulated_requests > 0,
            "is_engine_default": best.same_numerics.label == best.baseline.label,
        },
        "interactive": result.interactive.as_dict() if result.interactive is not None else None,
        "timings_s": {k: round(v, 3) for k, v in result.timings_s.items()},
        "trials": len(result.records),
        "feasible_trials": sum(r.prediction.feasible for r in result.records),
        "elapsed_s": elapsed_s,
        "strategy": result.strategy,
        "seed": best.provenance.seed,
    }


def write_report(
    out: Path,
    best: BestConfig,
    result: SearchResult,
    launch_text: str,
    elapsed_s: float,
    front: pd.DataFrame | None = None,
    trials: pd.DataFrame | None = None,
) -> dict:
    """Write the run's data files (trials.csv, pareto.csv, alternatives.csv, summary.json, model.json), then
    build report.md, report.html and plots/*.png from them; returns the paths. `front`: the front of a
    multi-objective search, rows of trials_frame (default: the trials not beaten on throughput per GPU and
    TPOT, P95 where predicted). `trials`: trials_frame(result), when the caller has it."""
    out.mkdir(parents=True, exist_ok=True)
    trials = trials_frame(result) if trials is None else trials
    files = {"trials": out / rundir.TRIALS, "pareto": out / rundir.PARETO, "alternatives": out / rundir.ALTERNATIVES}
    trials.to_csv(files["trials"], index=False)
    if front is None:
        front = pareto_frame(trials, latency_column(trials, "tpot"))
    front.to_csv(files["pareto"], index=False)
    alternatives_frame(result.alternatives).to_csv(files["alternatives"], index=False)
    data = summary(best, result, elapsed_s)
    data["choices"] = {k: list(v) for k, v in result.choices.items()}
    rows = {r["plan"]: r for r in candidate_rows(trials, best.workload.slo_percentile)}
    specs = top_plan_specs((*result.records, *result.ranked), list(rows))  # ranked: moves adopted after the search
    data["top_plans"] = [{**rows[t["plan"]], **t} for t in specs]
    files["summary"] = write_summary(out / rundir.SUMMARY, data)
    files["model"] = save_model(result.request.model, out)
    files.update(build_report(out, launch_text, model=result.request.model))
    return files


def write_search_report(out: Path, best: BestConfig, result: SearchResult, elapsed_s: float) -> dict:
    """A search's report (`write_report`) and what the CLI prints beside it, as plain data: `files` (name: path),
    `top` (the top plans, rows of candidate_rows), `missed` (plans the screen scored above the best that missed
    the SLO in simulation), `scale` (the scale they are ranked on). Runs in the process `worker.py` starts when the
    search starts, or in the search's own process."""
    w = best.workload
    trials = trials_frame(result)
    front = None
    if w.objective == "pareto":  # the multi-objective study's front: pareto.csv, drawn by the report
        from autotune.search.objectives import front as pareto_front

        front = trials[trials["trial"].isin({r.number for r in pareto_front(result.records)})]
        front = front.drop_duplicates("plan").reset_index(drop=True)
    from autotune.engines import format_launch

    files = write_report(out, best, result, format_launch(best.launch), elapsed_s, front=front, trials=trials)
    best_screened = result.best.screened_tok_s or result.best.prediction.total_tok_s
    q = f"p{w.slo_percentile:g}"
    missed = missed_in_simulation(trials, best_screened).reindex(columns=["plan", "screened_tok_s", f"ttft_{q}_ms"])
    return {
        "files": files,
        "top": candidate_rows(trials, w.slo_percentile),
        "missed": tuple(missed.to_dict("records")),
        "scale": scale_of(w.slo_percentile, w.has_slo),
    }


def warm_up() -> None:
    """What a report imports beyond this module's imports, imported ahead (by the process `worker.py` starts while
    the search runs): pandas' matplotlib plotting backend and pyplot (the breakdown figure's bars), Pillow's
    image plugins, pandas' CSV writer and records conversion, the concurrency curve and the console lines."""
    import matplotlib.pyplot  # noqa: F401  (pandas' DataFrame.plot imports it on every call)
    import pandas.core.methods.to_dict  # noqa: F401
    import pandas.io.formats.csvs  # noqa: F401
    import pandas.plotting._matplotlib  # noqa: F401
    from PIL import Image

    import autotune.report.console  # noqa: F401
    import autotune.report.curves  # noqa: F401

    Image.preinit()
    pd.plotting._core._get_plot_backend("matplotlib")  # pandas loads it on the first DataFrame.plot


def build_report(out: Path, launch_text: str | None = None, *, model=None, repredict: bool = False) -> dict:
    """report.md, report.html and the figures of a run directory, from its own files only. The stored
    predictions are shown as stored; `repredict` adds the same plans predicted again by this mi-tune."""
    run = load_run(out, model)
    best = run.best
    if launch_text is None:
        from autotune.engines import format_launch

        launch_text = format_launch(best.launch)
    plots = out / rundir.PLOTS
    jobs = {  # the costliest first: the cores take them in this order (draw_all)
        "pareto_png": (
            plots / "pareto.png",
            lambda path: pareto_plot(run.trials, best.prediction, best.baseline.prediction, path, _searched_front(run)),
        ),
        "concurrency_png": (plots / "concurrency.png", lambda path: _concurrency(run, path)),
        "topology_png": (plots / "topology.png", lambda path: topology_plot(run.hardware, best.plan, path)),
        "history_png": (plots / "history.png", lambda path: history_plot(run.trials, path)),
        "breakdown_png": (plots / "breakdown.png", lambda path: breakdown_plot(_labelled(best), path)),
        "memory_png": (plots / "memory.png", lambda path: memory_plot(_labelled(best), path)),
    }
    curve_note = ""
    if run.model is None:
        del jobs["concurrency_png"]
        name = best.model.path or best.model.name
        curve_note = f"Not drawn: model '{name}' cannot be found and the run has no model.json."
    text = []  # report.md, rendered here while forked children draw the last figures
    figures = {k.removesuffix("_png"): str(jobs[k][0].relative_to(out)) for k in FIGURE_ORDER if k in jobs}

    def write_text():
        repredicted = _repredict(run) if repredict else None
        text.append(render(run, figures, launch_text, _stored(best), repredicted, curve_note))

    drawn = draw_all(jobs, beside=write_text)
    files = {key: drawn[key] for key in FIGURE_ORDER if key in drawn}
    files["report"] = out / rundir.REPORT_MD
    files["html"] = out / rundir.REPORT_HTML
    files["report"].write_text(text[0])
    files["html"].write_text(markdown_to_html(text[0], out, f"mi-tune: {best.model.name} on {best.hardware.name}"))
    return files


# the figures in the order the report's files list them (report.md places each figure itself)
FIGURE_ORDER = ("pareto_png", "breakdown_png", "memory_png", "history_png", "topology_png", "concurrency_png")


def _labelled(best: BestConfig) -> dict[str, Prediction]:
    return {"best": best.prediction, "engine default": best.baseline.prediction}


def _searched_front(run: RunData) -> set[str]:
    """The plans of a multi-objective search's front (pareto.csv as the search wrote it)."""
    if run.best.workload.objective != "pareto" or "plan" not in run.front:
        return set()
    return set(run.front["plan"])


def _stored(best: BestConfig) -> dict[str, Prediction]:
    stored = {best.plan.describe(): best.prediction, best.baseline.label: best.baseline.prediction}
    if best.same_numerics is not None:
        stored[best.same_numerics.label] = best.same_numerics.prediction
    return stored


def _concurrency(run: RunData, path: Path) -> Path:
    from autotune import __version__
    from autotune.report.curves import concurrency_curve, concurrency_levels

    best, hw = run.best, run.hardware
    levels = concurrency_levels(max(best.prediction.concurrency, best.baseline.prediction.concurrency))
    plans = {
        "best plan": (best.plan, best.prediction),
        "engine default": (best.baseline.plan, best.baseline.prediction),
    }
    curves = {k: concurrency_curve(plan, run.model, hw, best.workload, levels) for k, (plan, _) in plans.items()}
    return concurrency_plot(curves, {k: p for k, (_, p) in plans.items()}, __version__, path)


def _repredict(run: RunData) -> dict[str, Prediction]:
    from autotune.report.curves import repredict

    if run.model is None:
        raise MiTuneError(f"--repredict: model '{run.best.model.name}' cannot be found and the run has no model.json")
    best = run.best
    simulated = {label: p.simulated_requests > 0 for label, p in _stored(best).items()}
    if "simulated_requests" in run.trials:
        rows = run.trials[run.trials["plan"].isin(run.top_specs)]
        simulated.update({plan: bool(n > 0) for plan, n in zip(rows["plan"], rows["simulated_requests"], strict=True)})
    plans = {best.plan.describe(): best.plan, best.baseline.label: best.baseline.plan}
    if best.same_numerics is not None:
        plans[best.same_numerics.label] = best.same_numerics.plan
    plans.update(run.top_specs)
    return {
        label: repredict(
            plan, run.model, run.hardware, best.workload, simulated.get(label, False), best.provenance.seed
        )
        for label, plan in plans.items()
    }


__all__ = [
    "build_report",
    "load_run",
    "summary",
    "top_plans",
    "trials_frame",
    "warm_up",
    "write_report",
    "write_search_report",
]
