"""The report's figures (matplotlib, Agg backend: no display needed). Each takes plain data and writes one PNG.

Figures are plain `matplotlib.figure.Figure`s on an Agg canvas, not pyplot's: pyplot's import (its backend
machinery and figure manager) was a quarter of a search's report time, and nothing here needs a window."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from autotune.report.tables import best_so_far, latency_column, pareto_frame
from autotune.specs import Prediction

DPI = 110
# zlib level 1 instead of Pillow's 6: the PNG encoder was 0.13 s of a 2.1 s report (cProfile of build_report on the
# DeepSeek-V3 question's run directory); the pixels are the same, the files about a tenth larger
PNG_OPTIONS = {"compress_level": 1}
MAX_LABELLED_DECADES = 2.5  # wider log axes label powers of ten only (1, 2, 5 per decade would overlap)
BEST_COLOR, BASELINE_COLOR = "crimson", "black"
MEMORY_PARTS = (  # MemoryFit field, legend label, colour
    ("weights_gb", "weights", "#4c72b0"),
    ("kv_gb", "KV cache pool", "#55a868"),
    ("state_gb", "linear-attention state", "#c44e52"),
    ("activations_gb", "activations", "#dd8452"),
    ("reserve_gb", "reserve", "#8c8c8c"),
)


def subplots(*grid: int, figsize: tuple[float, float], **kwargs):
    """pyplot.subplots without pyplot: a Figure on an Agg canvas and its axes."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(*grid, **kwargs)


def _save(fig, path: Path) -> Path:
    """Lay the figure out once and write it. `tight_layout` leaves a placeholder layout engine on the figure, and
    savefig draws a figure with any engine twice (a layout pass, then the picture); dropping the engine after
    the one layout keeps the picture the same (pixel-identical) and saves that second draw."""
    fig.tight_layout()
    fig.set_layout_engine(None)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, pil_kwargs=PNG_OPTIONS)
    return path


def _plain_axes(ax, log_x: bool = False, base: int = 10) -> None:
    """Numbers as numbers (1,000 not 1e3 or 2^10) on the y axis and, when logarithmic, the x axis."""
    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    if log_x:
        ax.set_xscale("log", base=base)
        if base == 10:
            lo, hi = ax.get_xlim()
            wide = hi > lo > 0 and math.log10(hi / lo) > MAX_LABELLED_DECADES
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())


def _latency(prediction: Prediction, column: str) -> float:
    metric, stat = column.split("_")[0], "p95" if "_p95_" in column else "mean"
    return getattr(prediction, f"{metric}_ms").get(stat, float("nan"))


def pareto_plot(
    trials: pd.DataFrame, best: Prediction, baseline: Prediction, path: Path, searched_front: set[str] = frozenset()
) -> Path:
    """Throughput per GPU against TTFT and against TPOT over the feasible trials, each panel with its
    non-dominated front; `searched_front` rings the plans of a multi-objective search's own front."""
    fig, axes = subplots(1, 2, figsize=(13, 4.8), sharey=True)
    ok = trials[trials["feasible"]]
    for ax, metric in zip(axes, ("ttft", "tpot"), strict=True):
        column = latency_column(trials, metric)
        for (engine, mode), group in ok.groupby(["engine", "mode"]):
            ax.scatter(group[column], group["total_tok_s_per_gpu"], s=12, alpha=0.45, label=f"{engine} {mode}")
        front = pareto_frame(trials, column)
        if len(front):
            x, y = front[column], front["total_tok_s_per_gpu"]
            ax.step(x, y, "k--", where="post", lw=1, marker="s", ms=3, label="Pareto front (non-dominated)")
        ringed = ok[ok["plan"].isin(searched_front)]
        if len(ringed):
            ax.scatter(
                ringed[column],
                ringed["total_tok_s_per_gpu"],
                s=60,
                facecolors="none",
                edgecolors="k",
                label="front of the search (pareto.csv)",
            )
        ax.scatter(
            [_latency(best, column)],
            [best.total_tok_s_per_gpu],
            marker="*",
            s=220,
            c=BEST_COLOR,
            label="best plan",
            zorder=3,
        )
        if baseline.feasible:
            ax.scatter(
                [_latency(baseline, column)],
                [baseline.total_tok_s_per_gpu],
                marker="X",
                s=110,
                c=BASELINE_COLOR,
                label="engine default",
            )
        stat = "P95" if "_p95_" in column else "mean, steady state"
        _plain_axes(ax, log_x=True)
        ax.set_xlabel(f"{metric.upper()} (ms, {stat}; log scale)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("total tokens/s per GPU")
    axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle("Feasible trials: throughput per GPU against latency (stored predictions)")
    return _save(fig, path)


def breakdown_plot(labelled: dict[str, Prediction], path: Path) -> Path:
    """Stacked step-time components of each phase of each prediction: where the time goes."""
    rows = []
    for label, prediction in labelled.items():
        for step in prediction.steps:
            parts = {"compute": step.compute_ms, "memory": step.memory_ms, "launch": step.launch_ms}
            parts.update({f"comm: {k}": v for k, v in step.comm_ms.items()})
            parts["pipeline bubble"] = step.bubble_ms
            parts["overlap saved"] = -step.overlap_saved_ms
            same = sum(1 for s in prediction.steps if s.phase == step.phase)
            stage = (
                f" {sum(1 for r in rows if r['label'] == label and r['phase'] == step.phase) + 1}" if same > 1 else ""
            )
            bar = f"{label}: {step.phase}{stage}\n{step.batch_tokens:,} tokens/step"
            rows.append({"bar": bar, "label": label, "phase": step.phase, **parts})
    fig, ax = subplots(figsize=(9, 1.2 + 0.75 * max(1, len(rows))))
    if rows:
        frame = pd.DataFrame(rows).drop(columns=["label", "phase"]).set_index("bar").fillna(0.0)
        frame = frame.loc[:, (frame != 0).any()]
        frame.iloc[::-1].plot.barh(stacked=True, ax=ax, width=0.6)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_xlabel("ms per step")
    ax.set_ylabel("")
    ax.set_title("Step time per phase: best plan against the engine default")
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)


def memory_plot(labelled: dict[str, Prediction], path: Path) -> Path:
    """Memory per GPU of each phase: weights, KV cache pool, activations and reserve against the budget."""
    bars = [
        (f"{label} ({phase})\n{fit.kv_tokens:,} KV tokens", fit)
        for label, p in labelled.items()
        for phase, fit in p.memory.items()
    ]
    fig, ax = subplots(figsize=(9, 1.6 + 0.7 * max(1, len(bars))))
    for y, (_, fit) in enumerate(reversed(bars)):
        left = 0.0
        for field, label, color in MEMORY_PARTS:
            width = getattr(fit, field)
            ax.barh(y, width, left=left, color=color, height=0.55, label=label if y == 0 else None)
            left += width
        ax.plot([fit.capacity_gb] * 2, [y - 0.38, y + 0.38], color="k", lw=2, label="budget" if y == 0 else None)
    ax.set_yticks(range(len(bars)), [name for name, _ in reversed(bars)])
    ax.set_xlabel("GB per GPU (budget: the engine's share of the GPU's memory)")
    ax.set_title("Memory per GPU")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=len(MEMORY_PARTS) + 1)
    return _save(fig, path)


def concurrency_plot(curves: dict[str, pd.DataFrame], stored: dict[str, Prediction], version: str, path: Path) -> Path:
    """Total tokens/s against requests in flight, re-predicted now; the stored operating points marked."""
    fig, ax = subplots(figsize=(8, 4.8))
    colors = {"best plan": BEST_COLOR, "engine default": BASELINE_COLOR}
    for label, curve in curves.items():
        color = colors.get(label)
        ax.plot(curve["in_flight"], curve["total_tok_s"], "o-", ms=4, color=color, label=f"{label} (steady state)")
        p = stored.get(label)
        if p is not None and p.feasible:
            how = "stored, simulated" if p.simulated_requests else "stored"
            ax.scatter(
                [max(p.concurrency, 1)],
                [p.total_tok_s],
                marker="D",
                s=70,
                facecolors="none",
                edgecolors=color,
                label=f"{label}: operating point ({how})",
            )
    _plain_axes(ax, log_x=True, base=2)
    ax.set_xlabel("requests in flight (log scale)")
    ax.set_ylabel("total tokens/s")
    ax.set_title(f"Throughput against concurrency (computed at report time by mi-tune {version})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def history_plot(trials: pd.DataFrame, path: Path) -> Path:
    """Each trial's objective in order, infeasible ones along the bottom, and the best so far."""
    fig, ax = subplots(figsize=(9, 4.5))
    scored = trials[trials["objective"] > 0]
    rejected = trials[trials["objective"] <= 0]
    ax.scatter(scored["trial"], scored["objective"], s=10, alpha=0.6, label=f"feasible, SLO met ({len(scored)})")
    ax.scatter(
        rejected["trial"],
        [0.0] * len(rejected),
        marker="|",
        s=40,
        c="grey",
        label=f"infeasible or SLO missed ({len(rejected)})",
    )
    if len(trials):
        curve = best_so_far(trials)
        ax.step(curve.index, curve.to_numpy(), where="post", color=BEST_COLOR, lw=1.5, label="best so far")
    _plain_axes(ax)
    ax.set_xlabel("trial number")
    ax.set_ylabel("objective: total tokens/s")
    ax.set_title("Search history")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path)
