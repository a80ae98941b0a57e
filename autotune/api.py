"""The library API behind the CLI: each command is one call here (resolve inputs, run, write outputs)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autotune import __version__
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
    load_hardware,
    plan_from_document,
    read_document,
    save,
)

DEFAULT_PRESET = "rtx-pro-6000-x8"
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


@dataclass(frozen=True)
class SearchOutcome:
    out: Path
    best: BestConfig
    top: list[dict]
    notes: tuple[str, ...]
    files: dict[str, Path]
    elapsed_s: float
    trials: int


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
    if opts.out:
        return Path(opts.out)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return RESULTS_DIR / f"{model.name}-{hw.name}-{stamp}"


def _request(opts: SearchOptions, model: ModelSpec, hw: HardwareProfile, out: Path):
    from autotune.search import SearchRequest, load_space

    space = load_space(opts.space)
    storage = opts.storage or f"sqlite:///{(out / 'study.db').resolve()}"
    return SearchRequest(
        model=model,
        hardware=hw,
        workload=opts.workload,
        space=space,
        num_gpus=hw.num_gpus,
        trials=opts.trials,
        seed=opts.seed,
        storage=storage,
        study_name=opts.study or "mi-tune",
        engine=opts.engine,
        mode=opts.mode,
        timeout_s=opts.timeout_s,
        workers=opts.workers,
        progress=opts.progress,
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
    return BestConfig(
        engine=plan.engine,
        mode=plan.mode,
        phases=plan.phases,
        model=model_ref,
        hardware=HardwareRef(
            name=hw.name, fingerprint=hw.fingerprint, summary=hardware_summary(hw), num_gpus=hw.num_gpus
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
    )


def search(opts: SearchOptions) -> SearchOutcome:
    from autotune.engines import format_launch
    from autotune.report import top_plans, trials_frame, write_report
    from autotune.search import run_study

    model, model_ref = resolve_model(opts.model)
    hw, note = resolve_hardware(opts.hardware, opts.preset, opts.gpus)
    out = _run_dir(opts, model, hw)
    out.mkdir(parents=True, exist_ok=True)
    save(hw, out / "hardware.yaml")
    started = time.perf_counter()
    result = run_study(_request(opts, model, hw, out))
    elapsed = time.perf_counter() - started
    best = best_config(result, model_ref, hw)
    files = {"best": save(best, out / "best.yaml")}
    files.update(write_report(out, best, result, format_launch(best.launch), elapsed))
    top = top_plans(trials_frame(result)).to_dict("records")
    return SearchOutcome(out, best, top, (note,) if note else (), files, elapsed, len(result.records))


# ------------------------------------------------------------------ other commands
def estimate(
    plan_path: str, hardware: str | None, preset: str | None, workload: Workload, model: str | None = None
) -> tuple[Plan, Prediction]:
    from autotune.perf import predict

    doc = read_document(plan_path)
    plan = plan_from_document(doc, plan_path)
    model_name = model or (doc.get("model") or {}).get("path") or (doc.get("model") or {}).get("name")
    if not model_name:
        raise MiTuneError(f"{plan_path}: a plan file names no model; pass --model")
    spec, _ = resolve_model(model_name)
    hw, _ = resolve_hardware(hardware, preset)
    return plan, predict(plan, spec, hw, workload)


def launch_of(best_path: str, host: str | None = None, port: int | None = None):
    """The launch recorded in best.yaml, rebuilt for another host/port when asked."""
    best = load_best(best_path)
    if host is None and port is None:
        return best.launch
    from autotune.engines import build_launch

    ref = best.model
    spec, _ = resolve_model(ref.path or ref.name)
    hw, _ = resolve_hardware(str(Path(best_path).parent / "hardware.yaml"), None)
    return build_launch(best.plan, spec, hw, host=host or "127.0.0.1", port=port or 8000)


def rebuild_report(run_dir: str) -> dict[str, Path]:
    """Re-read a run directory (best.yaml, hardware.yaml, study storage) and write its report again."""
    from autotune.engines import format_launch
    from autotune.report import write_report
    from autotune.search import SearchRequest, load_space, run_study

    out = Path(run_dir)
    best = load_best(out / "best.yaml")
    model, _ = resolve_model(best.model.path or best.model.name)
    hw = load_hardware(out / "hardware.yaml")
    req = SearchRequest(
        model=model,
        hardware=hw,
        workload=best.workload,
        space=load_space(_space_path(best)),
        num_gpus=hw.num_gpus,
        trials=0,
        seed=best.provenance.seed,
        storage=best.provenance.storage,
        study_name=best.provenance.study,
    )
    result = run_study(req)
    return write_report(out, best, result, format_launch(best.launch), 0.0)


def _space_path(best: BestConfig) -> str | None:
    return None if best.provenance.space == "default" else best.provenance.space


__all__ = ["SearchOptions", "SearchOutcome", "estimate", "launch_of", "rebuild_report", "resolve_hardware", "search"]
