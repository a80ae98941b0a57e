"""Writing the tuned configs: each engine's config file (and SGLang's `_down` file) plus mi-tune's benchmark sidecar,
where the engine looks them up."""

from __future__ import annotations

from pathlib import Path

from autotune.kernels import moe_configs as mc
from autotune.kernels.moe_request import TuneRequest
from autotune.kernels.moe_sweep import BatchResult


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
