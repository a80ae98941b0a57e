"""The library API behind the CLI: each command is one call here (resolve inputs, run, write outputs)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autotune import __version__, validate
from autotune.specs import (
    Baseline,
    BestConfig,
    HardwareProfile,
    HardwareRef,
    Launch,
    MiTuneError,
    ModelRef,
    ModelSpec,
    Plan,
    Prediction,
    Provenance,
    Workload,
    load_best,
    load_hardware,
    plan_from_document,
    read_document,
    save,
)
from autotune.specs.best import finite_or_none as _finite

DEFAULT_PRESET = "rtx-pro-6000-x8"
RESULTS_DIR = Path("results")
DEFAULT_HOST = "127.0.0.1"  # servers are reachable from this machine only unless --host says otherwise
DEFAULT_PORT = 8000


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


# ------------------------------------------------------------------ inputs
def resolve_model(name_or_path: str) -> tuple[ModelSpec, ModelRef]:
    from autotune.catalog.models import CATALOG, load_model, model_meta

    model = load_model(name_or_path)
    if name_or_path.strip().lower() in CATALOG:
        meta = model_meta(name_or_path)
        return model, ModelRef(name=model.name, hf_id=model.hf_id, revision=meta.get("revision", "main"))
    return model, ModelRef(name=model.name, hf_id=model.hf_id, path=str(Path(name_or_path).resolve()))


def resolve_hardware(hardware: str | None, preset: str | None, gpus: int = 0) -> tuple[HardwareProfile, str]:
    """The box to plan for: a profile file, a preset, or this machine (the default preset if it has no GPU)."""
    from autotune.catalog.presets import load_preset

    if hardware and preset:
        raise MiTuneError("--hardware and --preset: give one of them, not both")
    note = ""
    if hardware:
        hw = load_hardware(hardware)
    elif preset:
        hw = load_preset(preset)
    else:
        from autotune.probe import probe

        hw = probe().profile
        if hw is None:
            note = f"no accelerators found on this machine: planning for preset '{DEFAULT_PRESET}'"
            hw = load_preset(DEFAULT_PRESET)
    return restrict_gpus(hw, gpus), note


def restrict_gpus(hw: HardwareProfile, gpus: int) -> HardwareProfile:
    """The first `gpus` accelerators of a profile (0 = all)."""
    if not gpus or gpus == hw.num_gpus:
        return hw
    if not 1 <= gpus <= hw.num_gpus:
        raise MiTuneError(f"--gpus: expected 1..{hw.num_gpus} for '{hw.name}', got {gpus}")
    return dataclasses.replace(
        hw,
        name=f"{hw.name}[{gpus}]",
        accelerators=hw.accelerators[:gpus],
        links=tuple(row[:gpus] for row in hw.links[:gpus]),
        p2p=tuple(row[:gpus] for row in hw.p2p[:gpus]),
        measured=None,
    )


def hardware_summary(hw: HardwareProfile) -> str:
    gpu = hw.gpu
    p2p = all(hw.p2p[i][j] for i in range(hw.num_gpus) for j in range(hw.num_gpus))
    link = "NVLink" if hw.interconnect == "nvlink" else f"PCIe Gen{gpu.pcie_gen} x{gpu.pcie_width}"
    return (
        f"{hw.num_gpus}x {gpu.name} ({gpu.memory_gb:g} GB, {gpu.mem_bw_gbs:g} GB/s), {link}, "
        f"{hw.interconnect}, P2P {'on' if p2p else 'off'}, {hw.host.sockets} socket(s)"
    )


# ------------------------------------------------------------------ search
def _run_dir(opts: SearchOptions, model: ModelSpec, hw: HardwareProfile) -> Path:
    """--out, or a new directory under results/ (suffixed when another search took the same second)."""
    if opts.out:
        out = Path(opts.out)
        out.mkdir(parents=True, exist_ok=True)
        return out
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        out = RESULTS_DIR / (f"{model.name}-{hw.name}-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            out.mkdir()
            return out
        except FileExistsError:
            continue
    raise MiTuneError(f"--out: no free run directory name under {RESULTS_DIR}; pass --out DIR")


def _resume_command(command: tuple[str, ...], out: Path) -> tuple[str, ...]:
    """The search's argv with --out naming its run directory (added, or replacing the one given)."""
    argv = list(command) or ["mi-tune", "search"]
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
        run_id=manifest.run_id if manifest is not None else stores.new_run_id(),
    )


def best_config(result, model_ref: ModelRef, hw: HardwareProfile) -> BestConfig:
    from autotune.engines import build_launch

    req, best = result.request, result.best
    plan = best.plan
    baseline = Baseline(
        label=result.baseline_plan.describe(),
        plan=result.baseline_plan,
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
    from autotune.engines import format_launch
    from autotune.report import trials_frame, write_report
    from autotune.report.tables import candidate_rows, missed_in_simulation, scale_of
    from autotune.search import run_study
    from autotune.search import storage as stores

    model, model_ref = resolve_model(opts.model)
    validate.context(model, opts.workload)
    hw, note = resolve_hardware(opts.hardware, opts.preset, opts.gpus)
    out = _run_dir(opts, model, hw)
    manifest, req = _start_run(opts, model, hw, out)
    save(hw, out / "hardware.yaml")
    started = time.perf_counter()
    try:
        result = run_study(req)
    finally:  # the run's search time, also when it stops on an error
        elapsed = time.perf_counter() - started
        manifest = dataclasses.replace(manifest, elapsed_s=manifest.elapsed_s + elapsed)
        stores.write_manifest(out, manifest)
    best = best_config(result, model_ref, hw)
    best = dataclasses.replace(best, provenance=dataclasses.replace(best.provenance, storage=manifest.storage))
    files = {"best": save(best, out / "best.yaml")}
    front = None
    if opts.workload.objective == "pareto":  # the multi-objective study's front: pareto.csv, drawn by the report
        from autotune.search.objectives import front as pareto_front

        trials = trials_frame(result)
        front = trials[trials["trial"].isin({r.number for r in pareto_front(result.records)})]
        front = front.drop_duplicates("plan").reset_index(drop=True)
    reported = time.perf_counter()
    files.update(write_report(out, best, result, format_launch(best.launch), manifest.elapsed_s, front=front))
    files["manifest"] = out / stores.MANIFEST
    w = opts.workload
    trials = trials_frame(result)
    top = candidate_rows(trials, w.slo_percentile)
    best_screened = result.best.screened_tok_s or result.best.prediction.total_tok_s
    q = f"p{w.slo_percentile:g}"
    missed = missed_in_simulation(trials, best_screened).reindex(columns=["plan", "screened_tok_s", f"ttft_{q}_ms"])
    timings = {**result.timings_s, "report_s": time.perf_counter() - reported}
    measured = measure_run(out, opts.measure) if opts.measure and not result.interrupted else None
    return SearchOutcome(
        out,
        best,
        top,
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
        scale=scale_of(w.slo_percentile, w.has_slo),
        missed=tuple(missed.to_dict("records")),
        interactive=result.interactive.as_dict() if result.interactive is not None else None,
        timings_s={k: round(v, 3) for k, v in timings.items()},
    )


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
    """Launch, bench and fit the top plans of a run directory (autotune/measure.py); a MeasureOutcome."""
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


@dataclass(frozen=True)
class ServeLaunch:
    launch: Launch  # rebuilt from the plan, model and hardware of best.yaml: the one to run
    warnings: tuple[str, ...]  # e.g. the recorded launch differs from the rebuilt one


def serve_launch(best_path: str, host: str | None = None, port: int | None = None) -> ServeLaunch:
    """The launch of a best.yaml, rebuilt from its plan, model and hardware (never argv or env read from the file),
    with a warning when the launch recorded in the file differs from the rebuilt one."""
    from autotune.engines import build_launch
    from autotune.engines.compare import first_difference
    from autotune.engines.tuned_moe import with_tuned_moe_configs

    best = load_best(best_path)
    spec, _ = resolve_model(best.model.path or best.model.name)
    hw = recorded_hardware(best, best_path)
    warnings = []
    if hw.fingerprint != best.hardware.fingerprint:
        warnings.append(
            f"{best_path}: the hardware profile's fingerprint {hw.fingerprint} differs from the recorded "
            f"{best.hardware.fingerprint}"
        )
    as_recorded = build_launch(best.plan, spec, hw, host=DEFAULT_HOST, port=DEFAULT_PORT)  # how search wrote it
    if where := first_difference(best.launch, as_recorded):
        warnings.append(f"{best_path}: {where} differs from the launch rebuilt from the plan; running the rebuilt one")
    host = DEFAULT_HOST if host is None else host
    port = DEFAULT_PORT if port is None else port
    launch = build_launch(best.plan, spec, hw, host=host, port=port)
    # fused-MoE configs tuned into <run dir>/moe_configs by `kernels tune-moe`: the engine's variable points there
    launch = with_tuned_moe_configs(launch, best.plan, spec, hw, Path(best_path).parent)
    return ServeLaunch(launch, tuple(warnings))


def recorded_hardware(best: BestConfig, best_path: str | Path) -> HardwareProfile:
    """The hardware profile a best.yaml was planned for: embedded in it, or (older files) hardware.yaml beside it."""
    if best.hardware.profile is not None:
        return best.hardware.profile
    beside = Path(best_path).parent / "hardware.yaml"
    if not beside.is_file():
        raise MiTuneError(
            f"{best_path}: records no hardware profile (written before mi-tune embedded it) and no hardware.yaml "
            "sits beside it; copy the run's hardware.yaml next to it or run `mi-tune search` again"
        )
    return load_hardware(beside)


def rebuild_report(run_dir: str, repredict: bool = False) -> dict[str, Path]:
    """Write a run directory's report again from its own files (best.yaml, trials.csv, summary.json, ...): the
    predictions stored by the search, its recorded elapsed time; `repredict` adds this mi-tune's re-prediction."""
    from autotune.report import build_report

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
