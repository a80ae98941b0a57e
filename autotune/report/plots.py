"""Plots of a search (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from autotune.specs import Prediction  # noqa: E402


def pareto_plot(trials: pd.DataFrame, front: pd.DataFrame, baseline: Prediction, best_plan: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ok = trials[trials["feasible"]]
    for (engine, mode), group in ok.groupby(["engine", "mode"]):
        ax.scatter(group["tpot_ms"], group["total_tok_s_per_gpu"], s=14, alpha=0.55, label=f"{engine} {mode}")
    if len(front):
        ax.plot(front["tpot_ms"], front["total_tok_s_per_gpu"], "k--", lw=1, label="Pareto front")
    best = ok[ok["plan"] == best_plan].head(1)
    if len(best):
        ax.scatter(best["tpot_ms"], best["total_tok_s_per_gpu"], marker="*", s=220, c="crimson", label="best")
    if baseline.feasible:
        ax.scatter(
            [baseline.tpot_ms["mean"]],
            [baseline.total_tok_s_per_gpu],
            marker="X",
            s=120,
            c="black",
            label="engine default (TP over all GPUs)",
        )
    ax.set_xscale("log")
    ax.set_xlabel("TPOT, ms (mean, steady state)")
    ax.set_ylabel("total tokens/s per GPU")
    ax.set_title("Searched plans: throughput per GPU vs time per output token")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def breakdown_plot(labelled: dict[str, Prediction], path: Path) -> Path:
    """Stacked step-time components of each phase of each prediction: where the time goes."""
    rows = []
    for label, prediction in labelled.items():
        for step in prediction.steps:
            parts = {"compute": step.compute_ms, "memory": step.memory_ms, "launch": step.launch_ms}
            parts.update({f"comm:{k}": v for k, v in step.comm_ms.items()})
            parts["overlap saved"] = -step.overlap_saved_ms
            rows.append({"bar": f"{label}\n{step.phase}", **parts})
    frame = pd.DataFrame(rows).set_index("bar").fillna(0.0)
    frame = frame.loc[:, (frame != 0).any()]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    frame.plot.barh(stacked=True, ax=ax, width=0.6)
    ax.set_xlabel("ms per step (one token for every running sequence)")
    ax.set_ylabel("")
    ax.set_title("Where a step's time goes")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
