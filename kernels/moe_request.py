"""The shapes to tune: a `TuneRequest` from the command line's values or from a best.yaml's plan (model, layout,
dtype, GPU name and arch), and the files each engine looks up for it (`plan_files`)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.capability.facts import compute_capability
from autotune.kernels import moe_configs as mc
from autotune.kernels.moe_sweep import kernel_source
from autotune.specs import rundir
from autotune.specs.errors import MiTuneError
from autotune.specs.ranges import check_name


@dataclass
class TuneRequest:
    model: Any  # ModelSpec
    tp: int
    ep: int
    dtype: str
    engines: tuple[str, ...]
    batch_sizes: tuple[int, ...] = mc.DEFAULT_BATCH_SIZES
    trials: int = 40
    seed: int = 0
    out_dir: Path = Path(rundir.MOE_CONFIGS)
    block_shape: tuple[int, int] | None = None
    device: str = "cuda"
    device_name: str = ""  # as torch.cuda.get_device_name() prints it; "" = the device's
    arch: str = ""  # sm_XY; "" = the device's
    triton_version: str = ""  # "" = the installed triton's
    use_engine: bool = True


def plan_files(req: TuneRequest) -> list[dict]:
    """One row per engine: the shape, the files it looks up and where `tune-moe` writes them (no GPU needed)."""
    rows = []
    for engine in req.engines:
        shape = shape_for(req, engine)
        up = mc.config_path(req.out_dir, shape, req.device_name, req.triton_version)
        row = {
            "engine": engine,
            "shape": shape,
            "file": up,
            "env": f"{mc.CONFIG_DIR_ENV[engine]}={mc.engine_config_dir(req.out_dir, engine)}",
            "kernel": kernel_source(engine, req.use_engine),
        }
        if mc.files_rule(engine).down_file:
            row["down_file"] = mc.config_path(req.out_dir, shape, req.device_name, req.triton_version, down=True)
        rows.append(row)
    return rows


def shape_for(req: TuneRequest, engine: str) -> mc.MoeShape:
    return mc.moe_shape(
        req.model,
        engine=engine,
        tp=req.tp,
        ep=req.ep,
        dtype=req.dtype,
        block_shape=req.block_shape,
        compute_capability=compute_capability(req.arch),
    )


def build_request(
    model: str,
    tp: int,
    ep: int = 1,
    dtype: str = "bf16",
    engine: str = "both",
    batch_sizes: tuple[int, ...] = (),
    trials: int = 40,
    seed: int = 0,
    out_dir: str | Path = rundir.MOE_CONFIGS,
    block_shape: str | None = None,
    hardware: str | None = None,
    preset: str | None = None,
    device_name: str | None = None,
    triton_version: str | None = None,
    device: str = "cuda",
    own_kernel: bool = False,
    profile=None,
) -> tuple[TuneRequest, list[str]]:
    """A TuneRequest from the CLI's values, and notes to print (where the GPU name came from). The GPU is this
    machine's CUDA device when there is one (its name and arch are what the engines will see), else --device-name,
    else the --hardware / --preset profile (or this machine's probe, or the default preset)."""
    from autotune.catalog.devices import find_device
    from autotune.catalog.models import load_model
    from autotune.inputs import resolve_hardware

    spec = load_model(model)
    engines = mc.ENGINES if engine == "both" else (engine,)
    if engine != "both" and engine not in mc.ENGINES:
        raise MiTuneError(f"--engine: expected {', '.join(mc.ENGINES)} or both, got {engine!r}")
    if device not in ("cuda", "cpu"):
        raise MiTuneError(f"--device: expected cuda or cpu (Triton's interpreter, for tests), got {device!r}")
    if any(b < 1 for b in batch_sizes):
        raise MiTuneError(f"--batch-sizes: expected positive integers, got {','.join(map(str, batch_sizes))}")
    if trials < 1:
        raise MiTuneError(f"--trials: expected a positive integer, got {trials}")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise MiTuneError(f"--out {out_dir}: expected a directory, but it is an existing file")
    notes = []
    name, arch = _cuda_device()
    if device_name:
        check_name(device_name, "--device-name")  # it becomes part of the config file's name
        name, found = device_name, find_device(device_name)
        arch = found.arch if found else ""
    if not name and profile is not None and not (hardware or preset):
        name, arch = profile.gpu.name, profile.gpu.arch
        notes.append(f"GPU from the plan's hardware profile '{profile.name}'")
    if not name:
        hw, note = resolve_hardware(hardware, preset)
        name, arch = hw.gpu.name, hw.gpu.arch
        notes.append(note or f"GPU from the hardware profile '{hw.name}'")
    if not arch:
        raise MiTuneError(f"--device-name {name!r}: not in the device catalog, so its shared-memory limit is unknown")
    mc.smem_limit(arch)  # names an unknown arch now, not after the first batch
    blocks = _parse_block_shape(block_shape) if block_shape is not None else mc.default_block_shape(spec, dtype)
    req = TuneRequest(
        model=spec,
        tp=tp,
        ep=ep,
        dtype=dtype,
        engines=engines,
        batch_sizes=tuple(batch_sizes) or mc.DEFAULT_BATCH_SIZES,
        trials=trials,
        seed=seed,
        out_dir=Path(out_dir),
        block_shape=blocks,
        device=device,
        device_name=name,
        arch=arch,
        triton_version=triton_version or _triton_version(),
        use_engine=not own_kernel,
    )
    for e in engines:
        shape_for(req, e)  # shape errors (divisibility, dtype) before anything runs
    return req, notes


def requests_from_best(best_path: str | Path, out_dir: str | Path | None = None, **options) -> tuple[list, list[str]]:
    """One TuneRequest per distinct fused-MoE shape the phases of a best.yaml run on the Triton path (engine, layout,
    dtype and GPU from the plan and its recorded hardware); files go to <run dir>/moe_configs, where serve looks."""
    from autotune.inputs import recorded_hardware, resolve_model
    from autotune.kernels.moe_plans import phase_moe_kernel, triton_moe_shapes
    from autotune.specs import load_best

    best = load_best(str(best_path))
    model_ref = best.model.path or best.model.name
    spec, _ = resolve_model(model_ref)
    hw = recorded_hardware(best, best_path)
    shapes = triton_moe_shapes(best.plan, spec, hw)
    if not shapes:
        kernels = ", ".join(f"{name}: {phase_moe_kernel(best.plan, name, spec, hw)}" for name in best.plan.phases)
        raise MiTuneError(f"{best_path}: no phase runs the Triton fused-MoE kernel ({kernels}); nothing to tune")
    out_dir = Path(out_dir) if out_dir else Path(best_path).parent / rundir.MOE_CONFIGS
    requests, notes, seen = [], [], set()
    for name, shape in shapes.items():
        if shape in seen:
            continue
        seen.add(shape)
        phase = best.plan.phases[name]
        block = ",".join(map(str, shape.block_shape)) if shape.block_shape else "none"
        req, req_notes = build_request(
            model_ref,
            phase.stage_ranks,
            phase.ep,
            shape.dtype,
            best.plan.engine,
            out_dir=out_dir,
            block_shape=block,
            profile=hw,
            **options,
        )
        requests.append(req)
        notes += [n for n in req_notes if n not in notes]
    return requests, notes


def _parse_block_shape(text: str) -> tuple[int, int] | None:
    if text.strip().lower() in ("", "none"):
        return None
    try:
        parts = tuple(int(p) for p in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 2 or min(parts) < 1:
        raise MiTuneError(f"--block-shape: expected N,K (e.g. 128,128) or none, got {text!r}")
    return parts


def _cuda_device() -> tuple[str, str]:
    """(torch's name of CUDA device 0, sm_XY), or ("", "") without torch or a GPU."""
    if importlib.util.find_spec("torch") is None:
        return "", ""
    import torch

    if not torch.cuda.is_available():
        return "", ""
    major, minor = torch.cuda.get_device_capability(0)
    return torch.cuda.get_device_name(0), f"sm_{major}{minor}"


def _triton_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton")
    except PackageNotFoundError:
        raise MiTuneError("--triton-version: triton is not installed here; give the version the engine runs") from None
