"""The library API behind the CLI: each command is one call here (resolve inputs, run, write outputs)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autotune import __version__, validate
from autotune.engines.serve import ServeLaunch, serve_launch
from autotune.inputs import (
    hardware_summary,
    recorded_hardware,
    resolve_hardware,
    resolve_model,
)
from autotune.specs import (
    Baseline,
    BestConfig,
    HardwareProfile,
    HardwareRef,
    MiTuneError,
    ModelRef,
    ModelSpec,
    Plan,
    Prediction,
    Provenance,
    Workload,
    load_best,
    plan_from_document,
    read_document,
    rundir,
    save,
)
from autotune.specs.best import finite_or_none as _finite
from autotune.specs.ranges import path_component

RESULTS_DIR = Path("results")


@dataclass(frozen=True)
class SearchOptions:
    model: str
    hardware: str | None = None
    preset: str | None = None
    gpus: int = 0
    engine: str = "auto"
    mode: str = "auto"
    workload: Workload = Workload()
    trials: int = 200
    timeout_s: float | None = None
    seed: int = 0
    space: str | None = None
    storage: str | None = None
    study: str | None = None
    workers: int = 1
    out: str | None = None
    progress: bool = False
    keep_precision: bool = False
    measure: object | None = None  # measure.MeasureOptions: then launch, bench and fit the top plans
    command: tuple[str, ...] = ()  # the argv that ran this search: the manifest's resume command derives from it


@dataclass(frozen=True)
class SearchOutcome:
    out: Path
    best: BestConfig
    top: list[dict]
    notes: tuple[str, ...]
    files: dict[str, Path]
    elapsed_s: float
    trials: int
    measured: object | None = None  # measure.MeasureOutcome when --measure ran
    new_trials: int = 0  # trials this call ran (0: the run had already done its --trials)
    interrupted: bool = False  # Ctrl-C: the outputs hold the trials done; `resume` continues the run
    timed_out: bool = False  # --timeout ended the search
    strategy: str = ""  # the samplers that ran (search/runner.py)
    resume: tuple[str, ...] = ()  # the command that resumes this run (its run directory and storage)
    total_elapsed_s: float = 0.0  # search time over every session of this run directory
    scale: str = ""  # the scale the best and the top plans are ranked on (report/tables.py scale_of)
    missed: tuple[dict, ...] = ()  # plans the screen scored above the best that missed the SLO in simulation
    interactive: dict | None = None  # search/interactive.py: the best plan meeting an interactive SLO
    timings_s: dict | None = None  # seconds per part of the search


# ------------------------------------------------------------------ search
def _run_dir(opts: SearchOptions, model: ModelSpec, hw: HardwareProfile) -> Path:
    """--out, or a new directory under results/ (suffixed when another search took the same second)."""
    if opts.out:
        out = Path(opts.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # e.g. under /sys or /proc: a directory root may not create anything in
            raise MiTuneError(f"--out {out}: cannot be created ({exc.strerror})") from None
        return out
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    # names from files become one path component each (specs/ranges.py): never a '..' or a '/' out of results/
    label = f"{path_component(model.name, 'model')}-{path_component(hw.name, 'box')}-{stamp}"
    for n in range(1, 1000):
        out = RESULTS_DIR / (label + (f"-{n}" if n > 1 else ""))
        if out.resolve().parent != RESULTS_DIR.resolve():
            raise MiTuneError(f"run directory {out}: outside {RESULTS_DIR}/; pass --out DIR")
        try:
            out.mkdir()
            return out
        except FileExistsError:
            continue
    raise MiTuneError(f"--out: no free run directory name under {RESULTS_DIR}; pass --out DIR")


def _resume_command(command: tuple[str, ...], out: Path) -> tuple[str, ...]:
    """The search's argv with --out naming its run directory (added, or replacing the one given) and the
    --storage URL without its password (storage.without_password: export PGPASSWORD to resume)."""
    from autotune.search.storage import without_password

    argv = list(command) or ["mi-tune", "search"]
    for i, arg in enumerate(argv):
        if arg == "--storage" and i + 1 < len(argv):
            argv[i + 1] = without_password(argv[i + 1])
        elif arg.startswith("--storage="):
            argv[i] = "--storage=" + without_password(arg.removeprefix("--storage="))
    for i, arg in enumerate(argv):
        if arg == "--out" and i + 1 < len(argv):
            argv[i + 1] = str(out)
            return tuple(argv)
        if arg.startswith("--out="):
            argv[i] = f"--out={out}"
            return tuple(argv)
    return (*argv, "--out", str(out))


def _request(opts: SearchOptions, model: ModelSpec, hw: HardwareProfile, out: Path, manifest=None):
    """The study request of a search. A run directory's manifest (a resumed run) supplies its run id, and its
    storage and study name unless --storage/--study say otherwise."""
    from autotune.search import SearchRequest, load_space
    from autotune.search import storage as stores

    space = load_space(opts.space)
    if opts.storage:
        storage = stores.normalize(opts.storage)
    elif manifest is not None:
        storage = manifest.storage_url(out)
    else:
        storage = f"journal:{(out / stores.DEFAULT_STORAGE).resolve()}"
    study = opts.study or (manifest.study if manifest is not None else "mi-tune")
    run_id = manifest.run_id if manifest is not None else stores.new_run_id()
    shared = stores.relative_storage(storage, out) != stores.DEFAULT_STORAGE  # another run may use it
    return SearchRequest(
        model=model,
        hardware=hw,
        workload=opts.workload,
        space=space,
        num_gpus=hw.num_gpus,
        trials=opts.trials,
        seed=opts.seed,
        storage=storage,
        study_name=study,
        engine=opts.engine,
        mode=opts.mode,
        timeout_s=opts.timeout_s,
        workers=opts.workers,
        progress=opts.progress,
        keep_precision=opts.keep_precision,
        run_id=run_id,
        stream=run_id if shared else "",
    )


def best_config(result, model_ref: ModelRef, hw: HardwareProfile) -> BestConfig:
    from autotune.capability import with_engine_defaults
    from autotune.engines import build_launch

    req, best = result.request, result.best
    plan = with_engine_defaults(best.plan, req.model, hw)  # what the engine runs: its default fusion shows on
    baseline = Baseline(
        label=result.baseline_plan.describe(),
        plan=with_engine_defaults(result.baseline_plan, req.model, hw),
        prediction=result.baseline,
        speedup=round(result.speedup, 4),
    )
    same = result.best_same_numerics
    base_tok_s = result.baseline.total_tok_s
    same_numerics = (
        Baseline(
            label=same.plan.describe(),
            plan=same.plan,
            prediction=same.prediction,
            speedup=round(same.prediction.total_tok_s / base_tok_s, 4) if base_tok_s else float("inf"),
        )
        if same
        else None
    )
    return BestConfig(
        engine=plan.engine,
        mode=plan.mode,
        phases=plan.phases,
        model=model_ref,
        hardware=HardwareRef(
            name=hw.name,
            fingerprint=hw.fingerprint,
            summary=hardware_summary(hw),
            num_gpus=hw.num_gpus,
            profile=hw,
        ),
        workload=req.workload,
        prediction=best.prediction,
        baseline=baseline,
        launch=build_launch(plan, req.model, hw),
        provenance=Provenance(
            mi_tune_version=__version__,
            study=req.study_name,
            storage=req.storage,
            trial=best.number,
            seed=req.seed,
            space=req.space.name,
        ),
        numerics=result.numerics(best),
        same_numerics=same_numerics,
    )


def search(opts: SearchOptions) -> SearchOutcome:
    entered = time.perf_counter()
    from autotune.report import worker
    from autotune.search import storage as stores

    imported = time.perf_counter()
    model, model_ref = resolve_model(opts.model)
    validate.context(model, opts.workload)
    hw, note = resolve_hardware(opts.hardware, opts.preset, opts.gpus)
    _check_space(opts.space, hw)  # a bad space file says so before the run directory exists
    out = _run_dir(opts, model, hw)
    manifest, req = _start_run(opts, model, hw, out)
    save(hw, out / rundir.HARDWARE)
    # the report side (pandas, matplotlib, the report's modules) imports in a process of its own on another core
    # while this one searches, then writes the report from the results it is sent (here with one core)
    report_side = worker.Worker.start(REPORT_WARM_UP)
    try:
        started = time.perf_counter()
        result, manifest, elapsed = _run(req, out, manifest)
        best = best_config(result, model_ref, hw)
        best = dataclasses.replace(best, provenance=dataclasses.replace(best.provenance, storage=manifest.storage))
        files = {"best": save(best, out / rundir.BEST)}
        reported = time.perf_counter()
        written = worker.run(report_side, REPORT_JOB, out, best, result, manifest.elapsed_s)
    finally:
        if report_side is not None:
            report_side.close()
    files.update(written["files"])
    files["manifest"] = out / stores.MANIFEST
    done = time.perf_counter()
    timings = {
        **({"startup_s": startup} if (startup := _startup_s(entered)) is not None else {}),
        "imports_s": imported - entered,  # the search and Optuna modules (the report's: in report_side)
        "setup_s": started - imported,  # model, box and space read, run directory, the report side started
        **result.timings_s,
        "write_s": reported - started - elapsed,  # best.yaml
        "report_s": done - reported,
        "total_s": done - entered + (startup or 0.0),
    }
    if report_side is not None and report_side.used:  # beside the search, on another core: not in total_s
        timings["report_warmup_s"] = report_side.warm_s
    measured = measure_run(out, opts.measure) if opts.measure and not result.interrupted else None
    return SearchOutcome(
        out,
        best,
        written["top"],
        (note,) if note else (),
        files,
        elapsed,
        len(result.records),
        measured,
        new_trials=result.new_trials,
        interrupted=result.interrupted,
        timed_out=result.timed_out,
        strategy=result.strategy,
        resume=manifest.resume,
        total_elapsed_s=manifest.elapsed_s,
        scale=written["scale"],
        missed=written["missed"],
        interactive=result.interactive.as_dict() if result.interactive is not None else None,
        timings_s={k: round(v, 3) for k, v in timings.items()},
    )


REPORT_WARM_UP = "autotune.report.writer:warm_up"  # the report side's imports
REPORT_JOB = "autotune.report.writer:write_search_report"


def _run(req, out: Path, manifest):
    """(the study's result, the manifest with this session's search time added, that time in seconds)."""
    from autotune.search import run_study
    from autotune.search import storage as stores

    started = time.perf_counter()
    try:
        result = run_study(req)
    finally:  # the run's search time, also when it stops on an error
        elapsed = time.perf_counter() - started
        manifest = dataclasses.replace(manifest, elapsed_s=manifest.elapsed_s + elapsed)
        stores.write_manifest(out, manifest)
    return result, manifest, elapsed


def _startup_s(entered: float) -> float | None:
    """Seconds from this process's start to `entered` (a perf_counter time): the interpreter and the CLI's
    imports. Linux only (/proc); None elsewhere."""
    import os

    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    since_start = uptime_s - ticks / os.sysconf("SC_CLK_TCK")  # both 10 ms resolution
    return max(0.0, since_start - (time.perf_counter() - entered))


def _check_space(path: str | None, hw: HardwareProfile) -> None:
    """The space file parses, and some layout of its choices fits the box (the study checks again once the
    engines' rules have narrowed the choices)."""
    from autotune.search import load_space
    from autotune.search.sampler import layout_misfit

    space = load_space(path)
    misfit = layout_misfit(space, {d.name: d.choices for d in space.dimensions}, hw.num_gpus)
    if misfit:
        raise MiTuneError(f"{space.source}: {misfit}")


def search_summary(outcome: SearchOutcome) -> dict:
    """`mi-tune search --json`: the run's outcome as plain data."""
    best, p = outcome.best, outcome.best.prediction
    return {
        "run_dir": str(outcome.out),
        "best_plan": best.plan.describe(),
        "best_trial": best.provenance.trial,
        "total_tok_s": p.total_tok_s,
        "input_tok_s": p.input_tok_s,
        "output_tok_s": p.output_tok_s,
        "ttft_ms": p.ttft_ms.get("mean"),
        "tpot_ms": p.tpot_ms.get("mean"),
        "baseline": {"plan": best.baseline.label, "total_tok_s": best.baseline.prediction.total_tok_s},
        "speedup": _finite(best.baseline.speedup),
        "ttft_p95_ms": p.ttft_ms.get("p95"),
        "capacity_note": p.note or None,  # e.g. an offered --rate above the plan's capacity
        "scale": outcome.scale,  # every plan below is ranked on it, the best first
        "top_plans": outcome.top,
        "missed_slo_in_simulation": list(outcome.missed),
        "interactive": outcome.interactive,
        "numerics": list(best.numerics),
        "same_numerics": None  # the best plan keeping the checkpoint's numerics, when the best changes them
        if best.same_numerics is None
        else {
            "plan": best.same_numerics.label,
            "total_tok_s": best.same_numerics.prediction.total_tok_s,
            "speedup": _finite(best.same_numerics.speedup),
            "is_engine_default": best.same_numerics.label == best.baseline.label,
        },
        "new_trials": outcome.new_trials,
        "study_trials": outcome.trials,
        "strategy": outcome.strategy,
        "elapsed_s": round(outcome.elapsed_s, 3),
        "timings_s": outcome.timings_s,
        "total_elapsed_s": round(outcome.total_elapsed_s, 3),
        "interrupted": outcome.interrupted,
        "timed_out": outcome.timed_out,
        "resume": list(outcome.resume),
        "files": {name: str(path) for name, path in outcome.files.items()},
    }


def _start_run(opts: SearchOptions, model: ModelSpec, hw: HardwareProfile, out: Path):
    """(manifest, request) of a run directory: a new run, or the one its manifest.yaml describes (resumed)."""
    from autotune.search import storage as stores

    previous = stores.read_manifest(out)
    req = _request(opts, model, hw, out, previous)
    manifest = stores.Manifest(
        run_id=req.run_id,
        study=req.study_name,
        storage=stores.relative_storage(req.storage, out),
        trials=opts.trials,
        resume=_resume_command(opts.command, out),
        elapsed_s=previous.elapsed_s if previous is not None else 0.0,
        inputs={
            "model": opts.model,
            "hardware": opts.hardware,
            "preset": opts.preset,
            "gpus": opts.gpus,
            "space": opts.space,
            "seed": opts.seed,
        },
    )
    stores.write_manifest(out, manifest)
    return manifest, req


# ------------------------------------------------------------------ other commands
def measure_run(run_dir: str | Path, opts):
    """Launch, bench and fit the top plans of a run directory (autotune/measure/); a MeasureOutcome."""
    from autotune.measure import measure

    return measure(run_dir, opts)


def estimate(
    plan_path: str, hardware: str | None, preset: str | None, workload: Workload, model: str | None = None
) -> tuple[Plan, Prediction]:
    from autotune.search import evaluate
    from autotune.sim.serve import simulate_prediction

    plan, spec, hw = _plan_inputs(plan_path, hardware, preset, model)
    validate.context(spec, workload)
    steady = evaluate(plan, spec, hw, workload)  # a plan the engine refuses says which rule it breaks
    if steady.feasible:  # and one its engine has no flag for (a kernel name it does not know) says that
        from autotune.engines import build_launch

        try:
            build_launch(plan, spec, hw)
        except MiTuneError as exc:
            raise MiTuneError(f"{plan_path}: cannot run: {exc}") from None
    return plan, simulate_prediction(plan, spec, hw, workload, steady)  # percentiles over the workload's trace


def explain(
    plan_path: str,
    hardware: str | None,
    preset: str | None,
    workload: Workload,
    model: str | None = None,
    headline: Prediction | None = None,
):
    """The plan against each single-setting change the default space and the engine's rules admit on this box:
    the alternatives table of a search report, for any plan. `headline`: the plan's simulated prediction (what
    `estimate` prints); the rows compare against it, and a change whose screen reaches it is simulated too."""
    from autotune.search import SearchRequest, load_space
    from autotune.search.explain import alternatives
    from autotune.search.study import study_choices
    from autotune.sim.serve import simulate_prediction

    plan, spec, hw = _plan_inputs(plan_path, hardware, preset, model)
    space = load_space()
    choices = study_choices(SearchRequest(spec, hw, workload, space, hw.num_gpus, engine=plan.engine))
    return alternatives(
        space, plan, choices, spec, hw, workload, headline,
        lambda other, steady: simulate_prediction(other, spec, hw, workload, steady),
    )  # fmt: skip


def _plan_inputs(plan_path: str, hardware: str | None, preset: str | None, model: str | None):
    doc = read_document(plan_path)
    plan = plan_from_document(doc, plan_path)
    model_name = model or (doc.get("model") or {}).get("path") or (doc.get("model") or {}).get("name")
    if not model_name:
        raise MiTuneError(f"{plan_path}: a plan file names no model; pass --model")
    spec, _ = resolve_model(model_name)
    if not hardware and not preset and doc.get("schema") == "mi-tune/best/v1":  # the box it was searched for
        hw = recorded_hardware(load_best(plan_path), plan_path)
    else:
        hw, _ = resolve_hardware(hardware, preset)
    # fused-MoE kernel times `kernels tune-moe` measured into <plan's directory>/moe_configs (provenance probe)
    from autotune.kernels.moe_tune import hardware_with_tuned_moe

    return plan, spec, hardware_with_tuned_moe(hw, Path(plan_path).parent)


def rebuild_report(run_dir: str, repredict: bool = False) -> dict[str, Path]:
    """Write a run directory's report again from its own files (best.yaml, trials.csv, summary.json, ...): the
    predictions stored by the search, its recorded elapsed time; `repredict` adds this mi-tune's re-prediction."""
    from autotune.report import build_report

    if Path(run_dir).is_dir():  # a file where the report writes its plots folder: say so before any work
        validate.run_dir("", run_dir)
    return build_report(Path(run_dir), repredict=repredict)


__all__ = [
    "SearchOptions",
    "SearchOutcome",
    "ServeLaunch",
    "search_summary",
    "estimate",
    "measure_run",
    "rebuild_report",
    "recorded_hardware",
    "resolve_hardware",
    "search",
    "serve_launch",
]
