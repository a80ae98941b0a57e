"""Where a command's inputs come from: a model (catalog name or config.json), the box (a profile file, a preset, or
this machine's probe) and the box a best.yaml was planned for. Every command resolves its inputs here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autotune.specs import BestConfig, HardwareProfile, MiTuneError, ModelRef, ModelSpec, load_hardware, rundir

DEFAULT_PRESET = "rtx-pro-6000-x8"


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
    fabric = "HCCS" if any(label == "HCCS" for row in hw.links for label in row) else "NVLink"  # Ascend's fabric
    link = fabric if hw.interconnect == "nvlink" else f"PCIe Gen{gpu.pcie_gen} x{gpu.pcie_width}"
    return (
        f"{hw.num_gpus}x {gpu.name} ({gpu.memory_gib:g} GiB, {gpu.mem_bw_gbs:g} GB/s), {link}, "
        f"{hw.interconnect}, P2P {'on' if p2p else 'off'}, {hw.host.sockets} socket(s)"
    )


def recorded_hardware(best: BestConfig, best_path: str | Path) -> HardwareProfile:
    """The hardware profile a best.yaml was planned for: embedded in it, or (older files) hardware.yaml beside it."""
    if best.hardware.profile is not None:
        return best.hardware.profile
    beside = Path(best_path).parent / rundir.HARDWARE
    if not beside.is_file():
        raise MiTuneError(
            f"{best_path}: records no hardware profile (written before mi-tune embedded it) and no hardware.yaml "
            "sits beside it; copy the run's hardware.yaml next to it or run `mi-tune search` again"
        )
    return load_hardware(beside)
