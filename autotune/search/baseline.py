"""The engine's default deployment: what a user gets from `vllm serve` / `sglang` with tensor parallel
over every GPU and no other flags. Speed-ups are reported against it."""

from __future__ import annotations

import dataclasses

from autotune.capability.profiles import profile
from autotune.perf.memory import state_pool_max_running
from autotune.specs import Batching, Comm, HardwareProfile, ModelSpec, PhasePlan, Plan


def engine_default_batching(engine: str, hw: HardwareProfile) -> Batching:
    """Batch limits the engine picks when the user sets none: its profile's `default_batching` (engines.md 1d, 2c)."""
    return profile(engine).default_batching(hw.gpu.memory_gib, hw.gpu.name, hw.gpu.arch)


def baseline_plan(engine: str, hw: HardwareProfile, num_gpus: int, model: ModelSpec | None = None) -> Plan:
    phase = PhasePlan(
        gpus=tuple(range(num_gpus)),
        tp=num_gpus,
        comm=Comm(allreduce="custom"),
        batching=engine_default_batching(engine, hw),
    )
    # a separate state pool: running requests follow it on a hybrid model (SGLang)
    if profile(engine).separate_state_pool and model is not None and model.is_hybrid:
        running = state_pool_max_running(model, phase, hw, engine)
        phase = dataclasses.replace(phase, batching=dataclasses.replace(phase.batching, max_running=running))
    return Plan(engine=engine, mode="aggregated", phases={"both": phase})
