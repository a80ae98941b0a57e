"""Performance model: pure functions, no I/O, no torch/optuna (DESIGN.md "The performance model")."""

from autotune.perf.predict import check_plan, predict

__all__ = ["check_plan", "predict"]
