"""The engine's default deployment: what a user gets from `vllm serve` / `sglang` with tensor parallel
over every GPU and no other flags. Speed-ups are reported against it."""

from __future__ import annotations

import dataclasses

from autotune.perf.memory import sglang_default_max_running
from autotune.specs import Batching, Comm, HardwareProfile, ModelSpec, PhasePlan, Plan

GIB_PER_GB = 1e9 / 2**30


def engine_default_batching(engine: str, hw: HardwareProfile) -> Batching:
    """Batch limits each engine picks when the user sets none (engines.md 1d, 2c)."""
    mem_gib = hw.gpu.memory_gb * GIB_PER_GB
    name = hw.gpu.name.upper()
    if engine == "vllm":
        # vllm/engine/arg_utils.py (0.34): max_num_seqs 1024 for >= 70 GiB (not A100), else 256;
        # max_num_batched_tokens 16384 for >= 160 GiB, 8192 for H100/H200 class, else 2048.
        big = mem_gib >= 160 or (mem_gib >= 70 and "A100" not in name)
        hopper = any(tag in name for tag in ("H100", "H200", "H20", "H800"))
        tokens = 16384 if mem_gib >= 160 else 8192 if hopper else 2048
        return Batching(max_running=1024 if big else 256, chunked_prefill_tokens=tokens)
    # SGLang 0.5.23 sizes the chunk from GPU memory when --chunked-prefill-size is unset (server_args.py):
    # 8192 on >= 60 GiB cards, 4096 below; max running requests follow the KV pool (capped here at 1024).
    return Batching(max_running=1024, chunked_prefill_tokens=8192 if mem_gib >= 60 else 4096)


def baseline_plan(engine: str, hw: HardwareProfile, num_gpus: int, model: ModelSpec | None = None) -> Plan:
    phase = PhasePlan(
        gpus=tuple(range(num_gpus)),
        tp=num_gpus,
        comm=Comm(allreduce="custom"),
        batching=engine_default_batching(engine, hw),
    )
    if engine == "sglang" and model is not None and model.is_hybrid:  # running requests follow the state pool
        running = sglang_default_max_running(model, phase, hw)
        phase = dataclasses.replace(phase, batching=dataclasses.replace(phase.batching, max_running=running))
    return Plan(engine=engine, mode="aggregated", phases={"both": phase})
