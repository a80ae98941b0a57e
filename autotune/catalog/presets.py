"""Hardware presets: full HardwareProfile documents shipped as `autotune/catalog/presets/<name>.yaml`.

Read through importlib.resources so they load from a wheel as well as from a checkout.
"""

from __future__ import annotations

import functools
from importlib import resources

import yaml

from autotune.specs.errors import MiTuneError, SpecError
from autotune.specs.hardware import HardwareProfile
from autotune.specs.io import check_schema, from_dict, safe_load_yaml

SUFFIX = ".yaml"


def _directory():
    return resources.files("autotune.catalog").joinpath("presets")


@functools.cache
def preset_names() -> tuple[str, ...]:
    return tuple(sorted(p.name[: -len(SUFFIX)] for p in _directory().iterdir() if p.name.endswith(SUFFIX)))


@functools.cache
def load_preset(name: str) -> HardwareProfile:
    if name not in preset_names():
        raise MiTuneError(f"unknown preset '{name}' (known: {', '.join(preset_names())})")
    where = f"preset '{name}'"
    try:
        data = safe_load_yaml(_directory().joinpath(name + SUFFIX).read_text())
    except yaml.YAMLError:
        raise SpecError(f"{where}: malformed YAML") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping at the top level")
    check_schema(data, "hardware", where)
    return from_dict(HardwareProfile, data, where)


def list_presets() -> list[HardwareProfile]:
    return [load_preset(name) for name in preset_names()]


def preset_rows() -> list[dict]:
    """One row per preset for `mi-tune presets`."""
    return [_row(name, load_preset(name)) for name in preset_names()]


def _row(name: str, hw: HardwareProfile) -> dict:
    return {
        "name": name,
        "gpus": hw.num_gpus,
        "gpu": hw.gpu.name,
        "memory_gib": hw.gpu.memory_gib,
        "interconnect": hw.interconnect,
        "pcie_gen": hw.gpu.pcie_gen,
        "p2p": p2p_summary(hw.p2p),
    }


def p2p_summary(p2p: tuple[tuple[bool, ...], ...]) -> str:
    """yes: every pair can peer; no: none can; partial otherwise."""
    pairs = [ok for i, row in enumerate(p2p) for j, ok in enumerate(row) if i != j]
    return "yes" if pairs and all(pairs) else "no" if not any(pairs) else "partial"


__all__ = ["list_presets", "load_preset", "p2p_summary", "preset_names", "preset_rows"]
