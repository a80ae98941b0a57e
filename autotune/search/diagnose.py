"""Why a search cannot succeed, said directly: a model too large for the box before any trial runs, and SLOs no
plan meets with what the plans do reach."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from autotune.perf.memory import GB, GPU_MEMORY_UTILIZATION, RESERVE_GB, utilization_share_bytes, weights_per_gpu_bytes
from autotune.search.evaluate import evaluate
from autotune.specs import Kernels, MiTuneError, PhasePlan, Plan, Prediction, Workload

PRECISION_DIMENSIONS = {"kernels.gemm_dtype": "auto", "kernels.kv_cache_dtype": "auto"}
SLO_CANDIDATES = 20  # SLO-missing plans re-predicted at concurrency 1 to find the lowest latencies on offer


def _offered(req, choices: dict, field: str) -> tuple[str, ...]:
    """The values of the plan field `field` this search may sample (the plan default when no dimension sets it)."""
    values = [v for d in req.space.dimensions if d.field == field for v in choices.get(d.name, ())]
    return tuple(dict.fromkeys(values)) or (PRECISION_DIMENSIONS[field],)


def check_fits(req, choices: dict) -> None:
    """Raise when no plan can hold the model on the box: every weight (and one request's KV) is stored on at least
    one GPU, so the box's GPUs together must hold the whole checkpoint, at the smallest weight and KV dtypes the
    search may pick, inside what the engine leaves for them (perf/memory.py: its memory share less the reserve)."""
    model, hw, n = req.model, req.hardware, req.num_gpus
    gpu = hw.gpu
    unknown = [k for k, v in (("memory_gib", gpu.memory_gib), ("mem_bw_gbs", gpu.mem_bw_gbs)) if not v]
    unknown += [] if gpu.peak_tflops.get("bf16") else ["peak_tflops.bf16"]
    if unknown:
        raise MiTuneError(
            f"hardware '{hw.name}': {', '.join(unknown)} of '{gpu.name}' unknown (0); the performance model needs "
            "them: add the datasheet figures to the profile"
        )
    tokens = req.workload.isl + req.workload.osl
    weights = min(
        weights_per_gpu_bytes(model, PhasePlan(gpus=(0,), kernels=Kernels(gemm_dtype=d)))
        for d in _offered(req, choices, "kernels.gemm_dtype")
    )
    kv = min(model.kv_bytes_per_token(d) for d in _offered(req, choices, "kernels.kv_cache_dtype")) * tokens
    per_gpu = utilization_share_bytes(hw) - RESERVE_GB * GB
    if weights + kv <= n * per_gpu:
        return
    dtypes = "/".join(dict.fromkeys((model.dense_dtype, model.expert_dtype)))
    smaller = " (with FP8 weights where the search may quantise)" if weights < _checkpoint_weights(model) else ""
    gpus = f"{n} x {hw.gpu.memory_gib:g} GiB GPU{'s hold' if n > 1 else ' holds'}"
    raise MiTuneError(
        f"{model.name} ({dtypes}) needs {weights / GB:,.1f} GB of weights{smaller} and {_gb(kv)} GB of KV for "
        f"one {tokens:,}-token request; {gpus} at most {n} x {per_gpu / GB:,.1f} = {n * per_gpu / GB:,.1f} GB "
        f"({GPU_MEMORY_UTILIZATION:.0%} engine share less a {RESERVE_GB:g} GB reserve each): no plan fits"
    )


def _gb(nbytes: float) -> str:
    return f"{nbytes / GB:,.1f}" if nbytes >= 0.1 * GB else f"{nbytes / GB:.3f}"


def _checkpoint_weights(model) -> float:
    return weights_per_gpu_bytes(model, PhasePlan(gpus=(0,)))


def slo_message(req, missed: Sequence[tuple[Plan, Prediction]]) -> str:
    """What the plans that run but miss the SLO do reach: each SLO flag with the lowest latency found, at
    concurrency 1 (the least a request waits), among the plans with the lowest latencies at their operating
    points. '' when there are none."""
    w = req.workload
    if not missed or not w.has_slo:
        return ""
    alone = _no_burst(dataclasses.replace(w, concurrency=1, rate_rps=0.0, ttft_ms=0.0, tpot_ms=0.0))
    plans = []
    for key in ("ttft_ms", "tpot_ms"):
        ranked = sorted(missed, key=lambda pr: _ms(getattr(pr[1], key)))
        plans += [p for p, _ in ranked[: SLO_CANDIDATES // 2] if p not in plans]
    predictions = [(p, evaluate(p, req.model, req.hardware, alone)) for p in plans]
    predictions = [(p, r) for p, r in predictions if r.feasible]
    if not predictions:
        return ""
    parts = []
    for flag, target, key in (("--ttft-ms", w.ttft_ms, "ttft_ms"), ("--tpot-ms", w.tpot_ms, "tpot_ms")):
        if not target:
            continue
        plan, best = min(predictions, key=lambda pr: _ms(getattr(pr[1], key)))
        parts.append(
            f"{flag} {target:g}: the lowest {key[:4].upper()} found is {_ms(getattr(best, key)):,.1f} ms at "
            f"concurrency 1 ({plan.describe()})"
        )
    return "; ".join(parts)


def _no_burst(w: Workload) -> Workload:
    return dataclasses.replace(w, burst=0) if getattr(w, "burst", 0) else w


def _ms(latency: dict[str, float]) -> float:
    """The mean when the prediction gives it, else its first percentile."""
    return latency.get("mean", next(iter(latency.values()), 0.0))


__all__ = ["check_fits", "slo_message"]
