"""The kernel table: name -> Triton launcher, torch reference, input factory, tunable parameters.

Each kernel module declares its `ENTRY` next to its kernel; this table maps names to those modules, so the
names are listed without importing torch or triton.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.kernels.runtime import load_kernel_module
from autotune.specs.errors import MiTuneError

# Launch parameters every row-wise kernel here exposes to `tune`, and the configs `check` exercises: the launcher
# defaults, and a small block that forces the loop over the hidden size and its masked tail.
ROW_LAUNCH_PARAMS = {"block_size": (256, 512, 1024, 2048, 4096, 8192), "num_warps": (1, 2, 4, 8, 16)}
ROW_CHECK_PARAMS = ({}, {"block_size": 256, "num_warps": 2})

KERNEL_MODULES = {
    "fused_add_rmsnorm": "autotune.kernels.rmsnorm",
    "per_token_quant_fp8": "autotune.kernels.quant",
}
KERNEL_NAMES = tuple(KERNEL_MODULES)
DTYPE_NAMES = ("bf16", "fp16", "fp32")

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Comparison:
    max_error: float
    tolerance: str  # what max_error is measured in and what it must stay under
    passed: bool


@dataclass(frozen=True)
class KernelEntry:
    name: str
    triton_fn: Callable[..., Any]  # (*inputs, **tunable params) -> outputs
    reference_fn: Callable[..., Any]  # (*inputs) -> outputs
    make_inputs: Callable[[Shape, str, str], tuple]  # (shape, dtype name, device) -> inputs
    tunable_params: dict[str, tuple]  # launcher keyword -> choices; omitted keywords take launcher defaults
    compare: Callable[[Any, Any, str], Comparison]  # (outputs, reference outputs, dtype name)
    bytes_moved: Callable[[Shape, str], int]  # minimum HBM traffic of one call
    check_shapes: tuple[Shape, ...]  # small: they run under the CPU interpreter in CI
    bench_shapes: tuple[Shape, ...]  # decode-sized
    check_params: tuple[dict[str, Any], ...] = ({},)  # launcher defaults, plus configs that exercise other paths
    dtypes: tuple[str, ...] = DTYPE_NAMES


def get_entry(name: str, *, interpret: bool | None = None) -> KernelEntry:
    """The entry for `name`; interpret: True = Triton's CPU interpreter, False = compiled, None = see runtime."""
    if name not in KERNEL_MODULES:
        raise MiTuneError(f"unknown kernel {name!r}; choose from {', '.join(KERNEL_NAMES)}")
    return load_kernel_module(KERNEL_MODULES[name], interpret=interpret).ENTRY


def get_entries(names: list[str] | None = None, *, interpret: bool | None = None) -> list[KernelEntry]:
    return [get_entry(name, interpret=interpret) for name in names or KERNEL_NAMES]
