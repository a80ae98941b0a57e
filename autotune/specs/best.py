"""best.yaml: a Plan plus everything needed to launch it and to know why it was chosen."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autotune.specs.hardware import HardwareProfile
from autotune.specs.plan import PhasePlan, Plan
from autotune.specs.prediction import Prediction
from autotune.specs.workload import Workload

SCHEMA = "mi-tune/best/v1"


@dataclass(frozen=True)
class ModelRef:
    name: str
    hf_id: str
    revision: str = "main"
    path: str = ""  # local config.json (or its directory) when the model was given as a path


@dataclass(frozen=True)
class HardwareRef:
    name: str
    fingerprint: str
    summary: str
    num_gpus: int
    # Contract (best/v1, since serve rebuilds launches): best.yaml embeds the full profile it was planned for, so
    # the file alone is enough to serve; files written before carry none and need hardware.yaml beside them.
    profile: HardwareProfile | None = None


def finite_or_none(value: float) -> float | None:
    """A ratio for JSON: None where it is infinite (strict JSON has no Infinity), e.g. a speed-up over an engine
    default that cannot run on the box."""
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Baseline:
    label: str
    plan: Plan
    prediction: Prediction
    speedup: float  # best total tok/s / baseline total tok/s (inf when the default cannot run)

    def versus(self, speedup: float | None = None, bold: bool = False) -> str:
        """'6.15x the engine default (LABEL: N tok/s)', or why the default cannot run on this box (a model too big
        for its bf16 TP layout): then there is no ratio to print."""
        p = self.prediction
        if not p.feasible or p.total_tok_s <= 0:
            return f"the engine default ({self.label}) cannot run here: {p.reason or 'no throughput'}"
        ratio = f"{self.speedup if speedup is None else speedup:.2f}x"
        return f"{f'**{ratio}**' if bold else ratio} the engine default ({self.label}: {p.total_tok_s:,.0f} tok/s)"


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a launch: argv list (never a shell string), extra environment, GPUs it owns."""

    name: str
    role: str  # server | prefill | decode | router
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    gpus: tuple[int, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    numa_node: int = -1


@dataclass(frozen=True)
class Launch:
    engine: str
    engine_version: str
    endpoint: str  # URL clients send requests to
    processes: tuple[ProcessSpec, ...]


@dataclass(frozen=True)
class Provenance:
    mi_tune_version: str
    study: str
    storage: str
    trial: int
    seed: int
    space: str


@dataclass(frozen=True)
class BestConfig:
    engine: str
    mode: str
    phases: dict[str, PhasePlan]
    model: ModelRef
    hardware: HardwareRef
    workload: Workload
    prediction: Prediction
    baseline: Baseline
    launch: Launch
    provenance: Provenance
    # Numerics the plan changes against the checkpoint (online FP8 weights, FP8 KV), and the best plan found
    # that keeps the checkpoint's numerics with its speed-up over the engine default (None when none was
    # feasible, or when the best plan already keeps them): speed-ups are shown both ways.
    numerics: tuple[str, ...] = ()
    same_numerics: Baseline | None = None
    schema: str = SCHEMA

    @property
    def plan(self) -> Plan:
        return Plan(engine=self.engine, mode=self.mode, phases=self.phases)
