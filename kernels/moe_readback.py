"""Reading the tuned configs back: the tune-moe benchmarks under a run directory as measured grouped-MoE points of
the hardware profile (the I/O edge of perf/tuned_moe.py)."""

from __future__ import annotations

from pathlib import Path

from autotune.kernels import moe_configs as mc
from autotune.specs import rundir


def tuned_op_points(sidecars: list[Path]) -> tuple:
    """The grouped_moe OpPoints of these tune-moe benchmarks (GPU-timed ones only)."""
    from autotune.perf.tuned_moe import moe_tuning_points

    return tuple(point for path in sidecars for point in moe_tuning_points(mc.read_sidecar(path)))


def hardware_with_tuned_moe(hw, run_dir: str | Path):
    """`hw` with the tune-moe benchmarks of its GPU under run_dir/moe_configs added to measured.ops (each shape once:
    vLLM's and SGLang's benchmark of the same shape are the same kernel time when mi-tune's kernel ran both)."""
    import dataclasses

    from autotune.specs.hardware import Measured

    root = Path(run_dir) / rundir.MOE_CONFIGS
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
