"""`mi-tune kernels tune-moe`: time the fused-MoE Triton kernel over launch configs with Optuna, per batch size, and
write each engine's config file (plus a benchmark sidecar) where the engine looks it up.

Which kernel is timed: the engine's own (vLLM `fused_experts` / SGLang `fused_moe` under its `override_config`,
imported from the installed engine), else mi-tune's kernels/fused_moe.py (the engine is not installed; the output
says so). An engine call times the whole routed-expert layer (token sort, both GEMMs, activation, top-k sum) under
one config, as the engines' own tuning scripts do; mi-tune's kernel times the two GEMM launches apart, which also
gives SGLang its `_down` file.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.capability.facts import compute_capability
from autotune.kernels import moe_configs as mc
from autotune.specs.errors import MiTuneError
from autotune.specs.ranges import check_name

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


# ---- the whole command -----------------------------------------------------------------------------------------


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
    out_dir: Path = Path("moe_configs")
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


def tune_moe(req: TuneRequest, log: Callable[[str], None] = print) -> list[Path]:
    """Tune every engine's shape at every batch size, write the config files and sidecars; returns the paths."""
    if req.dtype not in mc.TUNABLE_DTYPES:
        raise MiTuneError(f"--dtype {req.dtype}: tune-moe benchmarks {', '.join(mc.TUNABLE_DTYPES)} only")
    check_device(req)
    written: list[Path] = []
    results_by_shape: dict[tuple, tuple[list[BatchResult], str]] = {}
    for row in plan_files(req):
        shape: mc.MoeShape = row["shape"]
        # an installed engine times its own kernel; mi-tune's kernel serves both engines when their shapes match
        engine_timed = req.use_engine and req.device != "cpu" and _installed(shape.engine)
        key = (shape.num_experts, shape.shard_n, shape.topk, shape.engine if engine_timed else "mi-tune")
        if key not in results_by_shape:
            measure, default_of, source = make_measure(shape, req.device, use_engine=req.use_engine)
            if engine_timed:
                _first_call(measure, default_of, req.batch_sizes[0], source)
            log(
                f"{shape.engine}: E={shape.num_experts} N={shape.shard_n} K={shape.hidden} top-k={shape.topk} "
                f"{shape.dtype}: timing {source}"
            )
            results = []
            for batch in req.batch_sizes:
                r = tune_batch(shape, req.arch, batch, measure, default_of(batch), trials=req.trials, seed=req.seed)
                log(
                    f"  batch {batch:>5}: default {r.default_timing['total_us']:9.1f} us -> tuned "
                    f"{r.timing['total_us']:9.1f} us ({r.measured} timed, {r.pruned} pruned)"
                )
                results.append(r)
            results_by_shape[key] = (results, source)
        results, source = results_by_shape[key]
        if not engine_timed and req.device == "cuda":  # mi-tune's kernel timed once for both engines' files
            source = kernel_source(shape.engine, req.use_engine)
        written += write_files(req, shape, results, source)
    return written


def check_device(req: TuneRequest) -> None:
    """A GPU run needs torch, triton and a CUDA device; the interpreter run (--device cpu) only torch and triton."""
    from autotune.kernels.runtime import import_torch, require_cuda

    import_torch()
    if req.device == "cuda":
        require_cuda("tune-moe", "cuda")


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


def write_files(req: TuneRequest, shape: mc.MoeShape, results: list[BatchResult], source: str) -> list[Path]:
    """The engine's config file (and SGLang's `_down` file when the down GEMM was timed apart) plus the sidecar."""
    best = {r.batch: r.config for r in results}
    up = mc.config_path(req.out_dir, shape, req.device_name, req.triton_version)
    mc.write_json(up, mc.config_document(best, shape.engine, req.triton_version))
    paths = [up]
    if mc.files_rule(shape.engine).down_file and all(r.down_config for r in results):
        down = mc.config_path(req.out_dir, shape, req.device_name, req.triton_version, down=True)
        mc.write_json(down, mc.config_document({r.batch: r.down_config for r in results}, shape.engine, ""))
        paths.append(down)
    sidecar = {
        "schema": mc.SIDECAR_SCHEMA,
        "engine": shape.engine,
        "kernel": source,
        "device_name": req.device_name,
        "device": req.device,
        "arch": req.arch,
        "triton_version": req.triton_version,
        "shape": {
            "E": shape.num_experts,
            "N": shape.shard_n,
            "K": shape.hidden,
            "topk": shape.topk,
            "dtype": shape.dtype,
            "block_shape": list(shape.block_shape) if shape.block_shape else None,
            "fused_shared_experts": shape.fused_shared_experts,
        },
        "timing": "median of CUDA-event times, L2 flushed before each call"
        if req.device != "cpu"
        else "wall clock under Triton's CPU interpreter (not a GPU time)",
        "trials": req.trials,
        "seed": req.seed,
        "batches": {
            str(r.batch): {
                "config": r.config,
                "time_us": r.timing["total_us"],
                **({"up_us": r.timing["up_us"], "down_us": r.timing["down_us"]} if "up_us" in r.timing else {}),
                "default_config": r.default_config,
                "default_time_us": r.default_timing["total_us"],
                "speedup_vs_default": r.default_timing["total_us"] / r.timing["total_us"],
                "measured": r.measured,
                "pruned": r.pruned,
                **({"down_config": r.down_config, "down_time_us": r.down_us} if r.down_config else {}),
            }
            for r in results
        },
    }
    side = mc.sidecar_path(up)
    mc.write_json(side, sidecar)
    return paths + [side]


# ---- the measured times for the performance model (the I/O edge of perf/tuned_moe.py) ------------------------


def tuned_op_points(sidecars: list[Path]) -> tuple:
    """The grouped_moe OpPoints of these tune-moe benchmarks (GPU-timed ones only)."""
    from autotune.perf.tuned_moe import moe_tuning_points

    return tuple(point for path in sidecars for point in moe_tuning_points(mc.read_sidecar(path)))


def hardware_with_tuned_moe(hw, run_dir: str | Path):
    """`hw` with the tune-moe benchmarks of its GPU under run_dir/moe_configs added to measured.ops (each shape once:
    vLLM's and SGLang's benchmark of the same shape are the same kernel time when mi-tune's kernel ran both)."""
    import dataclasses

    from autotune.specs.hardware import Measured

    root = Path(run_dir) / "moe_configs"
    if not root.is_dir():
        return hw
    chosen: dict[tuple, Path] = {}
    for path in sorted(root.rglob("*" + mc.SIDECAR_SUFFIX)):
        doc = mc.read_sidecar(path)
        if doc.get("device_name") == hw.gpu.name:
            s = doc["shape"]
            chosen.setdefault((s["E"], s["N"], s["K"], s["topk"], s["dtype"], doc["kernel"]), path)
    points = tuned_op_points(list(chosen.values()))
    if not points:
        return hw
    measured = hw.measured or Measured()
    return dataclasses.replace(hw, measured=dataclasses.replace(measured, ops=tuple(measured.ops) + points))


# ---- from command-line values to a request, and the --dry-run text ----------------------------------------------


def build_request(
    model: str,
    tp: int,
    ep: int = 1,
    dtype: str = "bf16",
    engine: str = "both",
    batch_sizes: tuple[int, ...] = (),
    trials: int = 40,
    seed: int = 0,
    out_dir: str | Path = "moe_configs",
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
    out_dir = Path(out_dir) if out_dir else Path(best_path).parent / "moe_configs"
    requests, notes, seen = [], [], set()
    for name, shape in shapes.items():
        if shape in seen:
            continue
        seen.add(shape)
        phase = best.plan.phases[name]
        block = ",".join(map(str, shape.block_shape)) if shape.block_shape else "none"
        req, req_notes = build_request(
            model_ref,
            phase.tp * phase.dp,
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


def describe(req: TuneRequest) -> str:
    """The --dry-run text: per engine the shape, the file it looks up and where it is written, then the space."""
    from autotune.perf.efficiency import auto_moe_kernel

    lines = [
        f"{req.model.name}: tp={req.tp} ep={req.ep} dtype={req.dtype} on {req.device_name} ({req.arch}), "
        f"triton {req.triton_version}"
    ]
    for row in plan_files(req):
        s: mc.MoeShape = row["shape"]
        fused = f" (incl. {s.fused_shared_experts} fused shared expert)" if s.fused_shared_experts else ""
        lines += [
            f"{row['engine']}: E={s.num_experts}{fused} N={s.shard_n} K={s.hidden} top-k={s.topk}"
            + (f" block_shape={list(s.block_shape)}" if s.block_shape else ""),
            f"  looks up: {row['file'].name}",
            f"  writes:   {row['file']}",
        ]
        if "down_file" in row:
            lines.append(f"  writes:   {row['down_file']} (when the down GEMM is timed apart)")
        lines += [f"  serve:    {row['env']}", f"  times:    {row['kernel']}"]
        auto = auto_moe_kernel(row["engine"], "fp8" if s.dtype == "fp8_w8a8" else "bf16", req.arch, False, req.ep)
        if auto != "triton":
            lines.append(f"  note:     {row['engine']}'s default MoE kernel here is {auto} (perf.efficiency."
                         "auto_moe_kernel); the file is read by plans that set kernels.moe: triton")  # fmt: skip
    limit = mc.smem_limit(req.arch)
    lines.append("search space: " + "  ".join(f"{k} {list(v)}" for k, v in mc.SPACE.items()))
    lines.append(
        f"constraints: shared memory (BLOCK_M + BLOCK_N) x BLOCK_K x stages x bytes <= {limit} B "
        f"({req.arch}); BLOCK_M <= rows an expert can get; BLOCK_N <= 2N"
        + ("; tiles divide the FP8 scale block" if req.block_shape else "")
    )
    shape = shape_for(req, req.engines[0])
    counts = mc.space_summary(shape, req.arch, req.batch_sizes)
    lines.append(
        f"candidates per batch ({req.engines[0]} shape, of {counts[0]['space']}): "
        + ", ".join(f"{c['batch']}:{c['candidates']}" for c in counts)
    )
    lines.append(
        f"trials per batch: {req.trials} timed (Optuna TPE, seed {req.seed}); a candidate whose "
        f"{QUICK_ITERS}-call timing is over {PRUNE_FACTOR}x the best is pruned"
    )
    return "\n".join(lines)
