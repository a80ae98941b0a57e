"""The measure loop's options and results (frozen records)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autotune.specs import Plan, Prediction

READY_TIMEOUT_S = 1800.0  # engines load large checkpoints for many minutes


@dataclass(frozen=True)
class MeasureOptions:
    top: int = 2
    host: str = "127.0.0.1"
    port: int = 8000
    stand_in: str | None = None  # timing JSON: launch the stand-in engine instead of vLLM/SGLang (tests, CI)
    ready_timeout_s: float = READY_TIMEOUT_S
    num_requests: int = 0  # 0 = 4 rounds of the concurrency (at least 16) / the workload's burst
    grace_s: float = 15.0  # SIGTERM -> SIGKILL
    apply: bool = False  # replace best.yaml with the best measured plan (the search's kept as best-predicted.yaml)


@dataclass(frozen=True)
class Candidate:
    label: str
    plan: Plan
    trial: int
    stored: Prediction | None = None  # the prediction the search stored for it (best.yaml's, or the trial's)


@dataclass(frozen=True)
class Fit:
    corrections: dict[str, float]  # op class -> multiplier on its time
    rows: int  # measured figures the fit used
    error_before: float  # mean |ln(predicted / measured)| over the measured plans' TTFT, TPOT and total tok/s
    error_after: float  # the same with the corrections (in-sample: the plans the fit saw)
    acceptance: dict[str, float] = field(default_factory=dict)  # speculative method -> measured per-draft acceptance
    expert_load_cv: float = 0.0  # the experts' popularity CV the engine reported (judge.measured_expert_cv; 0: none)


@dataclass(frozen=True)
class MeasureOutcome:
    run_dir: Path
    rows: list[dict]  # the last row of every plan measured (this call or before)
    fit: Fit | None
    best_label: str  # the best measured plan ('' when none ran)
    reranked: list[dict]  # plan, predicted (prior) and corrected total tok/s, measured where there is one
    files: dict[str, Path]
    notes: tuple[str, ...]
