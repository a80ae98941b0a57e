"""The correction fit: one time multiplier per op class the measured plans use, fitted to the measured mean TTFT
and TPOT (Prediction.steps[*].rates_ms: gemm, grouped_moe, attention, norm, elementwise, quant, sampling,
collective; perf/rates.py applies them).

The fit is the MAP estimate under a log-normal prior centred on 1.0: minimise sum_rows (ln measured - ln
predicted(m))^2 + LAMBDA * sum_classes (ln m)^2, by Gauss-Newton, with each row's sensitivity to each class taken
from the model itself (re-predicting with the class 5% slower). K plans give 2K rows for up to 8 multipliers: with
K=2 the problem is underdetermined and the prior decides how the error is shared, in proportion to how much each
class moves each figure; classes the measured plans barely use stay near 1. Corrections are kept only when,
fitted leave-one-plan-out, they lower the error on the plan held back (`_helps_held_back`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from autotune.specs import Prediction

# Prior on the log multipliers: N(0, SIGMA_PRIOR^2), i.e. the rates table is trusted to within about x/÷1.65 per op
# class before any run; a measured mean TTFT or TPOT is trusted to SIGMA_ROW in log terms (bench noise and what
# the serving model leaves out). LAMBDA = (SIGMA_ROW / SIGMA_PRIOR)^2.
SIGMA_PRIOR = 0.5
SIGMA_ROW = 0.1
LAMBDA = (SIGMA_ROW / SIGMA_PRIOR) ** 2
MULTIPLIER_RANGE = (0.2, 5.0)
FIT_ITERATIONS = 4  # Gauss-Newton steps (the model is close to linear in the log multipliers)
FD_STEP = math.log(1.05)  # finite-difference step of a log multiplier
OP_CLASSES = ("gemm", "grouped_moe", "attention", "norm", "elementwise", "quant", "sampling", "collective")


def used_classes(predictions: list[Prediction], share: float = 0.01) -> tuple[str, ...]:
    """Op classes carrying more than `share` of some predicted step (StepBreakdown.rates_ms keys are
    'class/dtype/bucket'): the multipliers a fit may move."""
    found = set()
    for p in predictions:
        for step in p.steps:
            for key, ms in step.rates_ms.items():
                if step.step_ms > 0 and ms > share * step.step_ms:
                    found.add(key.split("/", 1)[0])
    return tuple(c for c in OP_CLASSES if c in found)


def fit_corrections(
    predict: Callable[[dict[str, float]], list[float]],
    measured: list[float],
    classes: tuple[str, ...],
    lam: float = LAMBDA,
    iterations: int = FIT_ITERATIONS,
) -> dict[str, float]:
    """MAP multipliers m = exp(x): minimise sum_r (ln measured_r - ln predicted_r(m))^2 + lam * sum_c x_c^2, by
    Gauss-Newton from m = 1. `predict(corrections)` re-predicts every measured figure (a TTFT or TPOT of a plan);
    its sensitivity to each class is a finite difference of the model itself, so TPOT's mix of decode-only and
    mixed steps and the queueing in TTFT are weighed as the model weighs them."""
    import numpy as np

    targets = np.log(np.asarray(measured, dtype=float))
    x = np.zeros(len(classes))
    if not classes or not len(targets):
        return {}

    def logs(xs) -> np.ndarray:
        return np.log(np.asarray(predict({c: float(math.exp(v)) for c, v in zip(classes, xs, strict=True)})))

    for _ in range(iterations):
        base = logs(x)
        jac = np.empty((len(targets), len(classes)))
        for k in range(len(classes)):
            step = x.copy()
            step[k] += FD_STEP
            jac[:, k] = (logs(step) - base) / FD_STEP
        dx = np.linalg.solve(jac.T @ jac + lam * np.eye(len(classes)), jac.T @ (targets - base) - lam * x)
        x = np.clip(x + dx, *np.log(MULTIPLIER_RANGE))
        if np.max(np.abs(dx)) < 1e-4:
            break
    return {c: round(float(math.exp(v)), 4) for c, v in zip(classes, x, strict=True)}


def _helps_held_back(per_plan, priors, judge, hw, classes) -> bool:
    """Leave-one-plan-out: for each measured plan, corrections fitted on the others lower its TTFT/TPOT error
    on the whole (mean |ln(predicted / measured)| over the held-back plans). False with one plan. `per_plan`:
    (candidate, measured.csv row, benched workload); `judge` predicts the way the search did (judge.py)."""
    if len(per_plan) < 2:
        return False
    before, after = [], []
    for i, (cand, row, w) in enumerate(per_plan):
        rest = [x for j, x in enumerate(per_plan) if j != i]

        def predict(corrections: dict[str, float], rest=rest) -> list[float]:
            corrected = dataclasses.replace(hw, corrections=corrections)
            return [v for c, r, wr in rest for v in _means(judge(c.plan, corrected, wr, row_requests(r)))]

        measured = [float(r[k]) for _, r, _ in rest for k in ("measured_ttft_ms", "measured_tpot_ms")]
        held = fit_corrections(predict, measured, classes)
        truth = [float(row["measured_ttft_ms"]), float(row["measured_tpot_ms"])]
        before += list(zip(_means(priors[i]), truth, strict=True))
        fitted = judge(cand.plan, dataclasses.replace(hw, corrections=held), w, row_requests(row))
        after += list(zip(_means(fitted), truth, strict=True))
    return log_error(after) < log_error(before)


def row_requests(row: dict) -> int | None:
    """The request count a row was benched with (None: the search's count)."""
    return int(row.get("requests") or 0) or None


def _means(p: Prediction) -> list[float]:
    return [p.ttft_ms.get("mean", 0.0), p.tpot_ms.get("mean", 0.0)]


def log_error(pairs: list[tuple[float, float]]) -> float:
    """Mean |ln(predicted / measured)| over (predicted, measured) pairs with both positive."""
    logs = [abs(math.log(p / m)) for p, m in pairs if p > 0 and m > 0]
    return sum(logs) / len(logs) if logs else 0.0


def _pairs(prediction: Prediction, row: dict) -> list[tuple[float, float]]:
    return [
        (prediction.ttft_ms.get("mean", 0.0), float(row["measured_ttft_ms"] or 0)),
        (prediction.tpot_ms.get("mean", 0.0), float(row["measured_tpot_ms"] or 0)),
        (prediction.total_tok_s, float(row["measured_total_tok_s"] or 0)),
    ]
