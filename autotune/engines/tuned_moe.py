"""Serve with the fused-MoE configs `mi-tune kernels tune-moe` wrote into the run directory.

`<run dir>/moe_configs/vllm/<name>` is read by vLLM through VLLM_TUNED_CONFIG_FOLDER and
`<run dir>/moe_configs/sglang/configs/triton_X_Y_Z/<name>` by SGLang through SGLANG_MOE_CONFIG_DIR (layout and
lookup: kernels/moe_configs.py). The variable is set on an engine's server processes only when a file that the
plan's phase looks up is there (the phase runs the Triton MoE path: autotune.kernels.moe_plans); a directory of
configs for other shapes or another GPU changes nothing.
"""

from __future__ import annotations

import dataclasses
import glob
from pathlib import Path

from autotune.kernels import moe_configs as mc
from autotune.specs import rundir
from autotune.specs.best import Launch
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import Plan

RUN_DIR_FOLDER = rundir.MOE_CONFIGS  # tune-moe --out <run dir>/moe_configs
PHASE_OF_ROLE = {"server": "both", "prefill": "prefill", "decode": "decode"}


def tuned_config_files(plan: Plan, model: ModelSpec, hw: HardwareProfile, run_dir: str | Path) -> dict[str, Path]:
    """phase -> the tuned config file its engine will read from run_dir/moe_configs (phases without one absent)."""
    from autotune.kernels.moe_plans import triton_moe_shapes

    root = Path(run_dir) / RUN_DIR_FOLDER
    if not root.is_dir():
        return {}
    found = {}
    for phase, shape in triton_moe_shapes(plan, model, hw).items():
        name = mc.config_file_name(shape, hw.gpu.name)
        folder = mc.engine_config_dir(root, plan.engine)
        if not mc.files_rule(plan.engine).triton_version_folder:
            candidates = [folder / name]
        else:  # SGLang reads its triton version's folder, else the newest other one (fused_moe_triton_config.py)
            candidates = sorted((folder / "configs").glob(f"triton_*/{glob.escape(name)}"), reverse=True)
        hit = next((path for path in candidates if path.is_file()), None)
        if hit is not None:
            found[phase] = hit
    return found


def with_tuned_moe_configs(
    launch: Launch, plan: Plan, model: ModelSpec, hw: HardwareProfile, run_dir: str | Path
) -> Launch:
    """The launch with VLLM_TUNED_CONFIG_FOLDER / SGLANG_MOE_CONFIG_DIR (absolute) on the servers of each phase
    whose tuned file is in the run directory; unchanged when there is none."""
    files = tuned_config_files(plan, model, hw, run_dir)
    if not files:
        return launch
    env = {
        mc.CONFIG_DIR_ENV[plan.engine]: str(mc.engine_config_dir(Path(run_dir).resolve() / RUN_DIR_FOLDER, plan.engine))
    }
    processes = tuple(
        dataclasses.replace(p, env={**p.env, **env}) if PHASE_OF_ROLE.get(p.role) in files else p
        for p in launch.processes
    )
    return dataclasses.replace(launch, processes=processes)
