"""Plan -> Launch (argv, env, GPU/NUMA placement) per engine, flag tables pinned per engine version, a supervisor."""

from __future__ import annotations

from autotune.engines import sglang, vllm, vllm_ascend
from autotune.engines.flags import ENGINE_VERSIONS, validate_argv
from autotune.engines.supervisor import format_launch, run_launch
from autotune.specs.best import Launch
from autotune.specs.errors import MiTuneError
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import Plan

EMITTERS = {emitter.ENGINE: emitter.build_launch for emitter in (vllm, sglang, vllm_ascend)}


def build_launch(
    plan: Plan, model: ModelSpec, hardware: HardwareProfile, *, host: str = "127.0.0.1", port: int = 8000
) -> Launch:
    """The processes that serve `plan` for `model` on `hardware`; the endpoint listens on host:port."""
    if plan.engine not in EMITTERS:
        raise MiTuneError(f"engine {plan.engine!r}: no emitter (have {', '.join(EMITTERS)})")
    return EMITTERS[plan.engine](plan, model, hardware, host=host, port=port)


__all__ = ["EMITTERS", "ENGINE_VERSIONS", "build_launch", "format_launch", "run_launch", "validate_argv"]
