"""What measure measures: the profile the search planned with, its study, and the top plans of it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autotune.measure.records import Candidate
from autotune.specs import BestConfig, HardwareProfile, MiTuneError, Plan, Prediction, from_dict, load_hardware, rundir


def _prior_hardware(run_dir: Path, best: BestConfig) -> HardwareProfile:
    """The profile the search planned with, without any corrections (a rerun fits from the prior again)."""
    from autotune.inputs import recorded_hardware

    beside = run_dir / rundir.HARDWARE
    hw = load_hardware(beside) if beside.is_file() else recorded_hardware(best, run_dir / rundir.BEST)
    return dataclasses.replace(hw, corrections={}) if hw.corrections else hw


def _open_study(run_dir: Path, best: BestConfig):
    """The run's Optuna study, or (None, why) when its storage cannot be reached."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        try:
            from autotune.search.storage import open_storage, read_manifest
        except ImportError:
            open_storage, read_manifest = None, None
        manifest = read_manifest(run_dir) if read_manifest else None
        if manifest is not None:
            url, name = manifest.storage_url(run_dir), manifest.study
            storage = open_storage(url)
        else:
            url, name = best.provenance.storage, best.provenance.study
            storage = url
        return optuna.load_study(study_name=name, storage=storage), ""
    except Exception as exc:  # unreachable database, moved file: measure the best plan alone
        return None, f"study storage not reachable ({type(exc).__name__}: {exc}); measuring best.yaml's plan only"


def ranked_plans(run_dir: Path) -> tuple[list[tuple[str, Plan, int]], str]:
    """The search's own ranking on the scale the best was chosen by (summary.json `top_plans`, in order: simulated
    where the search simulated), as (label, plan, trial); ([], why) when the run directory has none readable."""
    import json

    path = run_dir / rundir.SUMMARY
    try:
        rows = json.loads(path.read_text()).get("top_plans", [])
        return [(str(r["plan"]), from_dict(Plan, r["spec"], str(path)), int(r.get("trial", -1))) for r in rows], ""
    except FileNotFoundError:
        return [], ""
    except (OSError, ValueError, TypeError, KeyError, AttributeError, MiTuneError) as exc:
        return [], f"{path}: no readable top_plans ({type(exc).__name__}); plans after the best follow the study"


def candidates(best: BestConfig, study, k: int, ranked: list[tuple[str, Plan, int]] = ()) -> list[Candidate]:
    """best.yaml's plan, then the search's ranking (`ranked_plans`: the order the search judged them in, not the
    screen's), then the study's feasible trials by objective: one per distinct plan label and trial. best.yaml
    holds its trial's plan with moot settings dropped (another label), so that trial is not measured again under
    its stored label. Each carries the prediction the search stored for it (none for a plan the ranking adopted
    after the search: it is predicted afresh)."""
    from autotune.search.study import stored_prediction

    out = [Candidate(best.plan.describe(), best.plan, best.provenance.trial, best.prediction)]
    trials = (
        [t for t in study.trials if t.state.is_finished() and t.value and t.user_attrs.get("plan")] if study else []
    )
    by_number = {t.number: t for t in trials}

    def add(label: str, plan: Plan, number: int, stored: Prediction | None, trial_plan: bool = True) -> None:
        """`trial_plan`: the plan is its trial's own (a trial already measured under another label is skipped)."""
        if len(out) < k and all(c.label != label and (c.trial != number or not trial_plan) for c in out):
            out.append(Candidate(label, plan, number, stored))

    for label, plan, number in ranked:
        t = by_number.get(number)
        own = t is not None and from_dict(Plan, t.user_attrs["plan"], f"trial {number}").describe() == label
        add(label, plan, number, stored_prediction(t) if own else None, own)
    for t in sorted(trials, key=lambda t: (-t.value, t.number)):
        plan = from_dict(Plan, t.user_attrs["plan"], f"trial {t.number}")
        add(plan.describe(), plan, t.number, stored_prediction(t))
    return out[:k]
