"""After the benches: fit the corrections, re-predict the study's best plans with them, re-rank, and write the
best measured plan as best-measured.yaml (best.yaml too with `--apply`, the search's kept as best-predicted.yaml)
beside the corrected profile."""

from __future__ import annotations

import dataclasses

from autotune.measure.fit import (
    _helps_held_back,
    _means,
    _pairs,
    fit_corrections,
    log_error,
    row_requests,
    used_classes,
)
from autotune.measure.judge import Judge, benched_of, judge_of, measured_acceptance, measured_expert_cv, with_measured
from autotune.measure.records import Candidate, Fit, MeasureOutcome
from autotune.measure.rows import write_reranked
from autotune.measure.study import candidates
from autotune.specs import BestConfig, HardwareProfile, HardwareRef, Workload, rundir, save

RERANK_PLANS = 20  # distinct plans of the study re-predicted with the corrections


def _conclude(out, best, source, model, hw, study, cands, rows, notes, apply: bool = False) -> MeasureOutcome:
    """Fit, re-predict, re-rank; best-measured.yaml from the best measured plan (best.yaml too with `apply`), the
    corrected profile beside it. Every prediction is made the way the search judged plans (judge.py)."""
    files = {"measured": out / rundir.MEASURED_CSV}
    ok = [(c, r) for c in cands for r in rows if r["plan"] == c.label and r["status"] == "ok"]
    if not ok:
        notes.append("no plan was measured: nothing to fit; best.yaml unchanged")
        return MeasureOutcome(out, rows, None, "", [], files, tuple(notes))
    judge = judge_of(best, model)
    per_plan = [(cand, row, benched_of(best.workload, row)) for cand, row in ok]
    fit, fitted = _fit(per_plan, judge, hw, notes)
    fit = dataclasses.replace(
        fit,
        acceptance=measured_acceptance([r for _, r in ok], [c.plan for c, _ in ok]),
        expert_load_cv=measured_expert_cv([r for _, r in ok]),
    )
    files["hardware"] = save(fitted, out / rundir.HARDWARE_MEASURED)
    column = "measured_goodput_tok_s" if best.workload.objective == "goodput" else "measured_total_tok_s"
    measured_value = {r["plan"]: float(r[column]) for _, r in ok}
    winner = max(ok, key=lambda cr: measured_value[cr[0].label])[0]
    reranked = _rerank(study, best, cands, judge, hw, fitted, measured_value, fit)
    files["reranked"] = write_reranked(out / rundir.RERANKED_CSV, reranked)
    if reranked and reranked[0]["measured_tok_s"] == "":
        notes.append(
            f"with the corrections the top plan is one not measured ({reranked[0]['plan']}); "
            f"`mi-tune measure {out} --top {len(cands) + 1}` or more measures further down the ranking"
        )
    measured_best = _best_from(best, winner, judge, fitted, fit)
    files["best_measured"] = save(measured_best, out / rundir.BEST_MEASURED)
    if apply:
        if not (out / rundir.BEST_PREDICTED).is_file() and source.name == rundir.BEST:
            (out / rundir.BEST_PREDICTED).write_text(source.read_text())
        files["best"] = save(measured_best, out / rundir.BEST)
    else:
        notes.append(
            f"best.yaml unchanged (the search's answer); the best measured plan is {rundir.BEST_MEASURED}: "
            f"`mi-tune serve {out / rundir.BEST_MEASURED}`, or `mi-tune measure {out} --apply` to make it best.yaml"
        )
    return MeasureOutcome(out, rows, fit, winner.label, reranked, files, tuple(notes))


def _fit(per_plan, judge: Judge, hw: HardwareProfile, notes: list[str]) -> tuple[Fit, HardwareProfile]:
    """The corrections fitted to the measured mean TTFT and TPOT (kept only when they help a held-back plan), and
    the profile carrying them. Each plan is predicted at the workload and request count its bench ran."""
    measured = [float(row[c]) for _, row, _ in per_plan for c in ("measured_ttft_ms", "measured_tpot_ms")]

    def at(cand, row, w, profile: HardwareProfile):
        return judge(cand.plan, profile, w, row_requests(row))

    def predict(corrections: dict[str, float]) -> list[float]:
        corrected = dataclasses.replace(hw, corrections=corrections)
        return [v for cand, row, w in per_plan for v in _means(at(cand, row, w, corrected))]

    priors = [at(cand, row, w, hw) for cand, row, w in per_plan]
    usable = all(v > 0 for v in measured) and all(v > 0 for p in priors for v in _means(p))
    classes = used_classes(priors)
    corrections = fit_corrections(predict, measured, classes) if usable else {}
    if not usable:
        notes.append("a measured or predicted TTFT/TPOT is zero: no corrections fitted")
    elif corrections and not _helps_held_back(per_plan, priors, judge, hw, classes):
        corrections = {}
        notes.append(
            "corrections fitted on the other measured plans do not lower the error on the plan held back "
            "(leave-one-plan-out, or a single plan measured): none kept, the prior profile stands"
        )
    fitted = dataclasses.replace(
        hw,
        corrections=corrections,
        sources=(*hw.sources, f"measured-run: {rundir.MEASURED_CSV} ({len(per_plan)} plans)"),
    )
    before = [p for (_, row, _), prior in zip(per_plan, priors, strict=True) for p in _pairs(prior, row)]
    after = [p for cand, row, w in per_plan for p in _pairs(at(cand, row, w, fitted), row)]
    return Fit(corrections, len(measured), log_error(before), log_error(after)), fitted


def _measured(best: BestConfig, plan, fit: Fit) -> Workload:
    """The searched workload at what the engines measured for `plan`: its method's speculative acceptance and the
    experts' popularity CV (judge.with_measured)."""
    return with_measured(best.workload, plan, fit.acceptance, fit.expert_load_cv)


def _rerank(study, best, cands, judge: Judge, hw, fitted, measured_value, fit: Fit) -> list[dict]:
    """The study's best plans predicted again at the searched workload the way the search ranked them, without
    and with the corrections (and the speculative acceptance measured for their method, the expert-popularity CV
    measured), in the order of the corrected objective."""
    from autotune.search.trial import objective_value

    pool = candidates(best, study, RERANK_PLANS)
    pool += [c for c in cands if all(c.label != p.label for p in pool)]
    out = []
    for c in pool:
        prior = judge(c.plan, hw, best.workload)
        corrected = judge(c.plan, fitted, _measured(best, c.plan, fit))
        out.append(
            {
                "plan": c.label,
                "trial": c.trial,
                "predicted_tok_s": round(objective_value(prior), 3),
                "corrected_tok_s": round(objective_value(corrected), 3),
                "measured_tok_s": measured_value.get(c.label, ""),
            }
        )
    out.sort(key=lambda r: -r["corrected_tok_s"])
    return out


def _best_from(best: BestConfig, winner: Candidate, judge: Judge, fitted: HardwareProfile, fit: Fit) -> BestConfig:
    """best.yaml for the best measured plan: predicted with the corrections the way the search judged plans (its
    engine default too), the corrected profile embedded; its workload carries the speculative acceptance
    measured for the plan's method and the expert-popularity CV measured."""
    from autotune.engines import build_launch
    from autotune.inputs import hardware_summary
    from autotune.search import baseline_plan
    from autotune.search.study import plan_numerics

    plan, model = winner.plan, judge.model
    workload = _measured(best, plan, fit)
    prediction = judge(plan, fitted, workload)
    base = judge(best.baseline.plan, fitted, _measured(best, best.baseline.plan, fit))
    speedup = round(prediction.total_tok_s / base.total_tok_s, 4) if base.total_tok_s else float("inf")
    baseline = dataclasses.replace(best.baseline, prediction=base, speedup=speedup)
    if best.baseline.plan.engine != plan.engine:  # the engine default of the measured winner's engine
        base_plan = baseline_plan(plan.engine, fitted, fitted.num_gpus)
        base = judge(base_plan, fitted, _measured(best, base_plan, fit))
        speedup = round(prediction.total_tok_s / base.total_tok_s, 4) if base.total_tok_s else float("inf")
        baseline = dataclasses.replace(best.baseline, label=base_plan.describe(), plan=base_plan, prediction=base,
                                       speedup=speedup)  # fmt: skip
    hardware = HardwareRef(fitted.name, fitted.fingerprint, hardware_summary(fitted), fitted.num_gpus, fitted)
    return dataclasses.replace(
        best,
        workload=workload,
        engine=plan.engine,
        mode=plan.mode,
        phases=plan.phases,
        hardware=hardware,
        prediction=prediction,
        baseline=baseline,
        launch=build_launch(plan, model, fitted),
        provenance=dataclasses.replace(best.provenance, trial=winner.trial),
        numerics=plan_numerics(plan, model),
        same_numerics=best.same_numerics if plan == best.plan else None,
    )
