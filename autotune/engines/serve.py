"""The launch of a best.yaml: rebuilt from its plan, model and hardware, never argv or env read from the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.engines import build_launch
from autotune.engines.compare import first_difference
from autotune.engines.tuned_moe import with_tuned_moe_configs
from autotune.inputs import recorded_hardware, resolve_model
from autotune.specs import Launch, load_best

DEFAULT_HOST = "127.0.0.1"  # servers are reachable from this machine only unless --host says otherwise
DEFAULT_PORT = 8000


@dataclass(frozen=True)
class ServeLaunch:
    launch: Launch  # rebuilt from the plan, model and hardware of best.yaml: the one to run
    warnings: tuple[str, ...]  # e.g. the recorded launch differs from the rebuilt one


def serve_launch(best_path: str, host: str | None = None, port: int | None = None) -> ServeLaunch:
    """The launch of a best.yaml, rebuilt from its plan, model and hardware (never argv or env read from the file),
    with a warning when the launch recorded in the file differs from the rebuilt one."""
    best = load_best(best_path)
    spec, _ = resolve_model(best.model.path or best.model.name)
    hw = recorded_hardware(best, best_path)
    warnings = []
    if hw.fingerprint != best.hardware.fingerprint:
        warnings.append(
            f"{best_path}: the hardware profile's fingerprint {hw.fingerprint} differs from the recorded "
            f"{best.hardware.fingerprint}"
        )
    as_recorded = build_launch(best.plan, spec, hw, host=DEFAULT_HOST, port=DEFAULT_PORT)  # how search wrote it
    if where := first_difference(best.launch, as_recorded):
        warnings.append(f"{best_path}: {where} differs from the launch rebuilt from the plan; running the rebuilt one")
    host = DEFAULT_HOST if host is None else host
    port = DEFAULT_PORT if port is None else port
    launch = build_launch(best.plan, spec, hw, host=host, port=port)
    # fused-MoE configs tuned into <run dir>/moe_configs by `kernels tune-moe`: the engine's variable points there
    launch = with_tuned_moe_configs(launch, best.plan, spec, hw, Path(best_path).parent)
    return ServeLaunch(launch, tuple(warnings))
