"""The sweep: time the fused-MoE Triton kernel over launch configs with Optuna, per batch size (`tune_batch`), and
the timed call itself (`make_measure`: the installed engine's kernel, or mi-tune's kernels/fused_moe.py).

An engine call times the whole routed-expert layer (token sort, both GEMMs, activation, top-k sum) under one config,
as the engines' own tuning scripts do; mi-tune's kernel times the two GEMM launches apart, which also gives SGLang its
`_down` file.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from autotune.kernels import moe_configs as mc
from autotune.specs.errors import MiTuneError

# Written before every timed call so weights come from HBM, not L2 (as triton.testing.do_bench does).
L2_FLUSH_BYTES = 256 * 1024**2
# A candidate whose quick timing is this much slower than the best full timing so far is pruned (not re-timed).
PRUNE_FACTOR = 1.5
QUICK_ITERS = 5
OWN_KERNEL = "mi-tune kernels/fused_moe.py"

Timing = dict[str, float]  # total_us, and up_us / down_us when the two GEMMs are timed apart
Measure = Callable[[dict[str, int], int, int], Timing]  # (config, batch, iterations) -> timing


@dataclass
class BatchResult:
    batch: int
    config: dict[str, int]
    timing: Timing
    default_config: dict[str, int]
    default_timing: Timing
    measured: int  # configs timed in full
    pruned: int  # configs dropped: over the constraints, failed to launch, or slow on the quick timing
    down_config: dict[str, int] | None = None
    down_us: float = 0.0
    tried: list[dict] = field(default_factory=list)


def kernel_source(engine: str, use_engine: bool = True) -> str:
    """What `tune-moe` will time for `engine`: the installed engine's kernel, or mi-tune's (said so, and why)."""
    if not use_engine:
        return f"{OWN_KERNEL} (--own-kernel)"
    if importlib.util.find_spec(mc.files_rule(engine).module) is not None:
        return f"{engine} (installed) fused-MoE Triton kernel"
    return f"{OWN_KERNEL} ({engine} not installed: mi-tune's kernel of the same design)"


def tune_batch(
    shape: mc.MoeShape,
    arch: str,
    batch: int,
    measure: Measure,
    default_config: dict[str, int],
    *,
    trials: int,
    seed: int = 0,
    num_iters: int = 50,
    space: dict[str, tuple[int, ...]] | None = None,
) -> BatchResult:
    """Seeded TPE over SPACE for one batch size: configs over the constraints are pruned without a launch, a config
    that fails to launch is pruned, and a quick QUICK_ITERS timing prunes one PRUNE_FACTOR slower than the best.
    `space` narrows SPACE (tests)."""
    import optuna

    space = space or mc.SPACE

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    done: dict[tuple, Timing | None] = {}
    state = {"best": math.inf, "pruned": 0}

    def objective(trial: optuna.Trial) -> float:
        config = {key: trial.suggest_categorical(key, values) for key, values in space.items()}
        key = tuple(config.values())
        if key in done:
            if done[key] is None:
                raise optuna.TrialPruned("seen, pruned")
            return done[key]["total_us"]
        done[key] = None
        why = mc.violations(config, shape, arch, batch)
        if why:
            state["pruned"] += 1
            raise optuna.TrialPruned("; ".join(why))
        try:
            quick = measure(config, batch, QUICK_ITERS)["total_us"]
        except Exception as exc:  # a config the GPU cannot run (out of resources) is pruned, not fatal
            if not _is_launch_failure(exc):
                raise
            state["pruned"] += 1
            raise optuna.TrialPruned(str(exc)) from None
        if quick > PRUNE_FACTOR * state["best"]:
            state["pruned"] += 1
            raise optuna.TrialPruned(f"quick {quick:.1f} us > {PRUNE_FACTOR} x best {state['best']:.1f} us")
        timing = measure(config, batch, num_iters)
        done[key] = timing
        state["best"] = min(state["best"], timing["total_us"])
        return timing["total_us"]

    # stop after `trials` full timings, or when every candidate was drawn; pruned draws cost no launch but are bounded
    num_candidates = len(mc.candidates(shape, arch, batch, space))
    for _ in range(trials * 20):
        drawn = sum(1 for key in done if not mc.violations(dict(zip(space, key, strict=True)), shape, arch, batch))
        if sum(t is not None for t in done.values()) >= trials or drawn >= num_candidates:
            break
        study.optimize(objective, n_trials=1)
    timed = {k: t for k, t in done.items() if t is not None}
    if not timed:
        raise MiTuneError(f"batch {batch}: no config of the space ran for E={shape.num_experts} N={shape.shard_n}")
    best_key = min(timed, key=lambda k: timed[k]["total_us"])
    best = dict(zip(space, best_key, strict=True))
    default_timing = measure(default_config, batch, num_iters)
    result = BatchResult(batch, best, timed[best_key], default_config, default_timing, len(timed), state["pruned"])
    result.tried = [{"config": dict(zip(space, k, strict=True)), **t} for k, t in timed.items()]
    downs = {k: t["down_us"] for k, t in timed.items() if "down_us" in t and k[0] == best_key[0]}
    if downs:  # SGLang's down config must keep the up config's BLOCK_SIZE_M (fused_moe_triton_config.py:318-330)
        down_key = min(downs, key=downs.get)
        result.down_config, result.down_us = dict(zip(space, down_key, strict=True)), downs[down_key]
    return result


def _is_launch_failure(exc: Exception) -> bool:
    name = type(exc).__name__
    return name in ("OutOfResources", "CompilationError") or "out of resource" in str(exc).lower()


# ---- the kernels timed -----------------------------------------------------------------------------------------


def make_measure(shape: mc.MoeShape, device: str, *, use_engine: bool = True) -> tuple[Measure, Callable, str]:
    """(measure, default_config(batch), what is timed) for `shape` on `device` ("cuda" or "cpu": interpreter)."""
    from autotune.kernels.runtime import import_torch, load_kernel_module

    torch = import_torch()
    interpret = device == "cpu"
    fm = load_kernel_module("autotune.kernels.fused_moe", interpret=interpret)
    layer = fm.make_layer(shape.num_experts, shape.shard_n, shape.hidden, shape.dtype, shape.block_shape, device)
    tokens: dict[int, tuple] = {}

    def inputs(batch: int):
        if batch not in tokens:
            tokens[batch] = fm.make_tokens(batch, shape.hidden, shape.num_experts, shape.topk, device)
        return tokens[batch]

    timer = _wall_us if interpret else _cuda_timer(torch, device)
    engine_call = _engine_call(shape, layer, torch) if use_engine and not interpret else None
    if engine_call is not None:
        run, engine_default, source = engine_call

        def measure_engine(config, batch, iters):
            x, w, ids = inputs(batch)
            ids32 = ids.to(torch.int32)  # both engines' top-k returns int32 ids
            return {"total_us": timer(lambda: run(config, x, w, ids32), iters)}

        return measure_engine, engine_default, source

    def measure_own(config, batch, iters):
        x, w, ids = inputs(batch)
        aligned = fm.align_block_size(ids, config["BLOCK_SIZE_M"], shape.num_experts)
        h = fm.silu_and_mul(fm.up_gemm(layer, x, ids, config, aligned))
        up = timer(lambda: fm.up_gemm(layer, x, ids, config, aligned), iters)
        down = timer(lambda: fm.down_gemm(layer, h, ids, w, config, aligned), iters)
        return {"total_us": up + down, "up_us": up, "down_us": down}

    if interpret:
        source = f"{OWN_KERNEL} under Triton's CPU interpreter (timings are not GPU times)"
    else:
        source = kernel_source(shape.engine, use_engine)
    return measure_own, lambda batch: default_config(shape, batch), source


def default_config(shape: mc.MoeShape, batch: int) -> dict[str, int]:
    """The config an engine uses without a tuned file, for mi-tune's kernel: vLLM 0.34.0's fallback
    (fused_moe.py:1388-1508 get_default_config, CUDA branch) restated: block-FP8 16/64-or-block_n/block_k tiles;
    otherwise tiles growing with the batch."""
    if shape.dtype == "fp8_w8a8" and shape.block_shape:
        block_n, block_k = shape.block_shape
        small = batch <= 8 and block_n % 64 == 0
        return {
            "BLOCK_SIZE_M": 16 if batch <= 64 else 64,
            "BLOCK_SIZE_N": 64 if small else block_n,
            "BLOCK_SIZE_K": block_k,
            "GROUP_SIZE_M": 1 if batch <= 16 else 32,
            "num_warps": 4,
            "num_stages": (4 if batch <= 4 else 3) if small else 3,
        }
    block_m = 16 if batch <= 32 else 32 if batch <= 96 else 64 if batch <= 512 else 128
    return {
        "BLOCK_SIZE_M": block_m,
        "BLOCK_SIZE_N": 64 if batch <= 64 else 128,
        "BLOCK_SIZE_K": 128 if shape.dtype == "fp8_w8a8" or batch <= 64 else 64,
        "GROUP_SIZE_M": 16 if batch // max(shape.num_experts, 1) > 128 else 1,
        "num_warps": 4 if batch <= 128 else 8,
        "num_stages": 4 if batch <= 32 else 3,
    }


def _engine_call(shape: mc.MoeShape, layer: dict, torch):
    """(run(config, x, weights, ids), default_config(batch), source) calling the installed engine's fused MoE under
    its override_config, or None when the engine is not installed."""
    if importlib.util.find_spec(mc.files_rule(shape.engine).module) is None:
        return None
    block = list(shape.block_shape) if shape.block_shape else None
    fp8 = shape.dtype == "fp8_w8a8"
    e, n, k = shape.num_experts, shape.shard_n, shape.hidden
    if mc.files_rule(shape.engine).module == "vllm":  # the installed package whose fused MoE is called
        # vllm 0.34.0: fused_moe/__init__.py:54 override_config; fused_moe.py:1720 fused_experts; config.py:623
        from vllm.model_executor.layers.fused_moe import fused_experts, override_config
        from vllm.model_executor.layers.fused_moe.config import fp8_w8a8_moe_quant_config
        from vllm.model_executor.layers.fused_moe.fused_moe import get_default_config as engine_default

        quant = fp8_w8a8_moe_quant_config(layer["w1_scale"], layer["w2_scale"], block_shape=block) if fp8 else None

        def run(config, x, w, ids):
            with override_config(config):
                return fused_experts(x, layer["w1"], layer["w2"], w, ids, quant_config=quant)

        def default(batch):
            return _config_only(engine_default(batch, e, n, k, shape.topk, shape.dtype_selector, block))

        return run, default, "vllm (installed) fused_experts"
    # sglang 0.5.23: moe_runner/triton_utils/__init__.py:17 override_config; fused_moe.py:1195 fused_moe
    from sglang.srt.layers.moe.moe_runner.triton_utils import override_config
    from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe import fused_moe
    from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config import get_default_config as sg_default
    from sglang.srt.layers.moe.topk import StandardTopKOutput

    def run(config, x, w, ids):
        topk = StandardTopKOutput(w, ids, None)
        with override_config(config):
            return fused_moe(
                x,
                layer["w1"],
                layer["w2"],
                topk,
                use_fp8_w8a8=fp8,
                w1_scale=layer.get("w1_scale"),
                w2_scale=layer.get("w2_scale"),
                block_shape=block,
            )

    def default(batch):
        return _config_only(sg_default(batch, e, n, k, shape.topk, shape.dtype_selector, False, block))

    return run, default, "sglang (installed) fused_moe"


def _config_only(config: dict) -> dict[str, int]:
    """The six searched keys; an engine default without num_warps/num_stages gets Triton's launch defaults."""
    return {key: int(config.get(key, {"num_warps": 4, "num_stages": 3}.get(key, 1))) for key in mc.SPACE}


def _wall_us(fn: Callable[[], Any], iters: int) -> float:
    times = []
    for _ in range(1 if iters <= QUICK_ITERS else 2):  # the interpreter is slow; its times only exercise the search
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _cuda_timer(torch, device: str):
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)

    def time_us(fn: Callable[[], Any], iters: int) -> float:
        """Median GPU time between CUDA events, L2 flushed before each call, after 3 warm-up calls."""
        for _ in range(3):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends, strict=True):
            flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3

    return time_us


def _first_call(measure: Measure, default_of: Callable, batch: int, source: str) -> None:
    """Run the engine's kernel once with its default config, so that an engine API this adapter does not fit is one
    clear error naming the way out, not a failure in the middle of a study."""
    try:
        measure(default_of(batch), batch, 1)
    except Exception as exc:
        raise MiTuneError(
            f"{source}: calling the engine's fused MoE failed ({type(exc).__name__}: {exc}); "
            "rerun with --own-kernel to time mi-tune's kernel of the same design"
        ) from None


def _installed(engine: str) -> bool:
    return importlib.util.find_spec(mc.files_rule(engine).module) is not None
