"""`mi-tune kernels tune-moe`, the orchestration: time the fused-MoE Triton kernel over launch configs with Optuna, per
batch size, and write each engine's config file (plus a benchmark sidecar) where the engine looks it up.

Which kernel is timed: the engine's own (vLLM `fused_experts` / SGLang `fused_moe` under its `override_config`,
imported from the installed engine), else mi-tune's kernels/fused_moe.py (the engine is not installed; the output
says so).

The jobs live apart: the shapes to tune (`moe_request`), the sweep and its timing (`moe_sweep`), writing the config
files (`moe_output`) and reading them back into the hardware profile (`moe_readback`); this module runs them in order
and writes the --dry-run text. Their public names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autotune.kernels import moe_configs as mc
from autotune.kernels.moe_output import write_files
from autotune.kernels.moe_readback import hardware_with_tuned_moe, tuned_op_points
from autotune.kernels.moe_request import TuneRequest, build_request, plan_files, requests_from_best, shape_for
from autotune.kernels.moe_sweep import (
    PRUNE_FACTOR,
    QUICK_ITERS,
    BatchResult,
    _first_call,
    _installed,
    kernel_source,
    make_measure,
    tune_batch,
)
from autotune.specs.errors import MiTuneError

__all__ = [
    "BatchResult",
    "TuneRequest",
    "build_request",
    "check_device",
    "describe",
    "hardware_with_tuned_moe",
    "make_measure",
    "plan_files",
    "requests_from_best",
    "shape_for",
    "tune_batch",
    "tune_moe",
    "tuned_op_points",
    "write_files",
]


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
