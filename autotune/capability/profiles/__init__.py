"""The engine profiles, one per engine version (capability/engine_profile.py): the list of engines mi-tune knows.

Add an engine version: copy a profile module, change what the new version changed (re-check every citation), and
list it in PROFILES.
"""

from __future__ import annotations

from autotune.capability.engine_profile import EngineProfile
from autotune.capability.profiles import sglang_0_5_23, vllm_0_34_0, vllm_ascend_0_23_0
from autotune.specs.errors import MiTuneError

PROFILES: dict[str, EngineProfile] = {
    p.engine: p for p in (vllm_0_34_0.PROFILE, sglang_0_5_23.PROFILE, vllm_ascend_0_23_0.PROFILE)
}
ENGINES: tuple[str, ...] = tuple(PROFILES)


def profile(engine: str) -> EngineProfile:
    """The profile of `engine`; MiTuneError naming the engines there are. (One dict lookup: the performance model
    asks ~70 times a prediction.)"""
    found = PROFILES.get(engine)
    if found is None:
        raise MiTuneError(f"engine {engine!r}: no engine profile (have {', '.join(PROFILES)})")
    return found


def moe_config_engines() -> tuple[str, ...]:
    """Engines that read tuned fused-MoE Triton config files."""
    return tuple(e for e, p in PROFILES.items() if p.moe_configs is not None)
