"""Search a kernel's launch parameters with Optuna (seeded TPE), scored by measured time on a CUDA device."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.kernels.bench import L2_FLUSH_BYTES, time_us
from autotune.kernels.registry import Shape, get_entry
from autotune.kernels.runtime import require_cuda

SCHEMA = "mi-tune/kernel-tune/v1"


def tune(
    name: str,
    *,
    shapes: list[Shape] | None = None,
    dtype: str = "bf16",
    trials: int = 30,
    seed: int = 0,
    device: str = "cuda",
    out_path: str | Path | None = None,
    num_iters: int = 50,
) -> dict[str, Any]:
    """Best launch config per shape (default: the kernel's bench shapes); written as JSON when out_path is set."""
    torch = require_cuda("tune", device)
    entry = get_entry(name, interpret=False)
    flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)
    configs = {}
    for shape in shapes or entry.bench_shapes:
        inputs = entry.make_inputs(tuple(shape), dtype, device)

        def measure_us(params: dict[str, Any], inputs: tuple = inputs) -> float:
            return time_us(lambda: entry.triton_fn(*inputs, **params), flush_buffer, num_iters)

        best_params, best_us = search_params(entry.tunable_params, _prune_failures(measure_us), trials, seed)
        default_us = measure_us({})
        configs[shape_key(shape)] = {
            "params": best_params,
            "time_us": best_us,
            "default_time_us": default_us,
            "speedup_vs_default": default_us / best_us,
        }
    result = {
        "schema": SCHEMA,
        "kernel": name,
        "dtype": dtype,
        "device_name": torch.cuda.get_device_name(device),
        "trials": trials,
        "seed": seed,
        "configs": configs,
    }
    if out_path is not None:
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        Path(out_path).write_text(json.dumps(result, indent=2) + "\n")
    return result


def search_params(
    tunable_params: dict[str, tuple], measure_us: Callable[[dict[str, Any]], float], trials: int, seed: int
) -> tuple[dict[str, Any], float]:
    """Minimise measure_us over the categorical choices; a config is measured once however often TPE picks it."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    measured_us: dict[tuple, float] = {}

    def objective(trial: optuna.Trial) -> float:
        params = {name: trial.suggest_categorical(name, choices) for name, choices in tunable_params.items()}
        key = tuple(sorted(params.items()))
        if key not in measured_us:
            measured_us[key] = measure_us(params)
        return measured_us[key]

    study.optimize(objective, n_trials=trials)
    return study.best_params, study.best_value


def _prune_failures(measure_us: Callable[[dict[str, Any]], float]) -> Callable[[dict[str, Any]], float]:
    """A config the GPU cannot run (out of registers or shared memory) is pruned, not fatal."""
    import optuna
    from triton.runtime.errors import OutOfResources

    def measure_or_prune(params: dict[str, Any]) -> float:
        try:
            return measure_us(params)
        except OutOfResources as exc:
            raise optuna.TrialPruned(str(exc)) from exc

    return measure_or_prune


def shape_key(shape: Shape) -> str:
    return "x".join(str(size) for size in shape)
