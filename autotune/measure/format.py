"""`mi-tune measure`'s text: measured against predicted per plan, the fitted corrections, the re-ranking and the
files written."""

from __future__ import annotations

from autotune.measure.fit import LAMBDA
from autotune.measure.records import MeasureOutcome


def format_outcome(outcome: MeasureOutcome) -> str:
    """Measured against predicted per plan, the fitted corrections, the re-ranking and the files written."""
    lines = [f"measured {len(outcome.rows)} plan(s) in {outcome.run_dir}:"]
    cols = ("plan", "status", "prediction_source", "predicted_total_tok_s", "measured_total_tok_s",
            "predicted_ttft_ms", "measured_ttft_ms", "predicted_tpot_ms", "measured_tpot_ms")  # fmt: skip
    table = [cols] + [tuple(str(r.get(c, "")) for c in cols) for r in outcome.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in table]
    for r in outcome.rows:
        if r.get("status") != "ok" and r.get("error"):
            lines.append(f"{r['plan']}: {r['error']}")
    fit = outcome.fit
    if fit:
        shown = ", ".join(f"{k} x{v:.3f}" for k, v in fit.corrections.items()) or "none"
        lines.append(f"fitted corrections ({fit.rows} measured figures, prior lambda {LAMBDA:g}): {shown}")
        lines.append(
            f"prediction error on the measured plans, mean |ln(predicted/measured)| over TTFT, TPOT, tok/s: "
            f"{fit.error_before:.3f} -> {fit.error_after:.3f} (in-sample)"
        )
        if fit.acceptance:
            shown = ", ".join(f"{method} {a:.3f}" for method, a in fit.acceptance.items())
            lines.append(f"speculative acceptance measured by the engine (per draft token, used from here on): {shown}")
        if fit.expert_load_cv:
            lines.append(f"expert popularity CV reported by the engine (used from here on): {fit.expert_load_cv:.3f}")
        lines.append("re-ranked with the corrections (objective, tok/s):")
        for r in outcome.reranked[:5]:
            measured = f", measured {r['measured_tok_s']:,.0f}" if r["measured_tok_s"] != "" else ""
            lines.append(f"  {r['plan']}: {r['corrected_tok_s']:,.0f} (was {r['predicted_tok_s']:,.0f}{measured})")
        lines.append(f"best measured: {outcome.best_label}")
    lines += [f"note: {n}" for n in outcome.notes]
    lines += [f"wrote {path}" for path in outcome.files.values()]
    return "\n".join(lines)
