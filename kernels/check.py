"""Compare each Triton kernel with its torch reference over small shapes, dtypes and launch configs.

Without a CUDA device the kernels run under Triton's CPU interpreter (see runtime.py), so CI checks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.kernels.registry import KernelEntry, Shape, get_entries
from autotune.kernels.runtime import resolve_device


@dataclass(frozen=True)
class CheckResult:
    kernel: str
    shape: Shape
    dtype: str
    device: str
    is_interpreted: bool
    max_error: float
    tolerance: str
    passed: bool
    params: dict[str, Any] = field(default_factory=dict)  # launch config; {} = launcher defaults


def check(names: list[str] | None = None, device: str | None = None) -> list[CheckResult]:
    """One result per (kernel, shape, dtype, launch config); device None = CUDA if present, else CPU."""
    device = resolve_device(device)
    is_interpreted = device == "cpu"
    return [
        check_case(entry, shape, dtype, params, device)
        for entry in get_entries(names, interpret=is_interpreted)
        for shape in entry.check_shapes
        for dtype in entry.dtypes
        for params in entry.check_params
    ]


def check_case(entry: KernelEntry, shape: Shape, dtype: str, params: dict[str, Any], device: str) -> CheckResult:
    inputs = entry.make_inputs(shape, dtype, device)
    comparison = entry.compare(entry.triton_fn(*inputs, **params), entry.reference_fn(*inputs), dtype)
    return CheckResult(
        kernel=entry.name,
        shape=tuple(shape),
        dtype=dtype,
        device=device,
        is_interpreted=device == "cpu",
        max_error=comparison.max_error,
        tolerance=comparison.tolerance,
        passed=comparison.passed,
        params=dict(params),
    )
