"""Lazy torch/triton imports, device choice, and Triton's CPU interpreter for checks without a GPU.

Interpreter choice: in-process, by setting TRITON_INTERPRET=1 before triton is first imported. Triton reads the
variable when `@triton.jit` decorates a function, and triton.language decorates its own helpers (tl.zeros,
tl.sum ...) on import, so the mode is fixed for the whole process by its first `import triton`. This module is
the only place that imports triton, and only when a kernel is loaded: `kernels check` on a machine without CUDA
enables the interpreter then. A process that has already imported triton the other way gets a one-line
MiTuneError (run in a fresh process) rather than a silent wrong mode. No subprocess: a check costs one torch
import, and results come back as objects, not serialised text.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from types import ModuleType

from autotune.specs.errors import MiTuneError

GPU_EXTRA_MESSAGE = "kernels need the gpu extra: pip install 'mi-tune[gpu]'"


def import_torch() -> ModuleType:
    """torch, after checking that triton is installed too (without importing it: see the module docstring)."""
    try:
        import torch
    except ImportError as exc:
        raise MiTuneError(GPU_EXTRA_MESSAGE) from exc
    if importlib.util.find_spec("triton") is None:
        raise MiTuneError(GPU_EXTRA_MESSAGE)
    return torch


def torch_dtype(name: str):
    """The torch dtype for one of mi-tune's dtype names (bf16, fp16, fp32, fp8)."""
    torch = import_torch()
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.float8_e4m3fn}[name]


def resolve_device(device: str | None) -> str:
    """None picks "cuda" when a GPU is visible, else "cpu" (where kernels run under the interpreter)."""
    torch = import_torch()
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if not device.startswith("cuda"):
        raise MiTuneError(f"unknown device {device!r}; use 'cpu' or 'cuda[:N]'")
    if not torch.cuda.is_available():
        raise MiTuneError(f"device {device!r} requested but no CUDA device found")
    return device


def require_cuda(command: str, device: str) -> ModuleType:
    torch = import_torch()
    if not torch.cuda.is_available():
        raise MiTuneError(f"kernels {command} needs a CUDA device; none found")
    if not device.startswith("cuda"):
        raise MiTuneError(f"kernels {command} needs a CUDA device; got {device!r}")
    return torch


def load_kernel_module(module_name: str, *, interpret: bool | None = None) -> ModuleType:
    """Import a module holding @triton.jit kernels, compiled for the GPU or run by the CPU interpreter.

    interpret=None keeps the process's mode, or, before triton is imported, interprets when there is no CUDA.
    """
    set_triton_mode(interpret=interpret)
    return importlib.import_module(module_name)


def set_triton_mode(*, interpret: bool | None = None) -> None:
    torch = import_torch()
    if "triton" not in sys.modules:
        if interpret is None:
            interpret = not torch.cuda.is_available()
        if interpret:
            os.environ["TRITON_INTERPRET"] = "1"
    is_interpreting = is_triton_interpreting()
    if interpret is not None and interpret != is_interpreting:
        wanted = "Triton's CPU interpreter" if interpret else "compiled Triton kernels"
        raise MiTuneError(f"{wanted} needed, but this process set up triton the other way; rerun in a fresh process")
    if is_interpreting:
        patch_interpreter_downcasts()


def is_triton_interpreting() -> bool:
    import triton.language.standard
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(triton.language.standard.zeros, InterpretedFunction)


def patch_interpreter_downcasts() -> None:
    """Make the interpreter round fp32/fp16 -> bf16/fp8 to nearest even, as the GPU's cvt.rn does.

    triton 3.9's interpreter truncates fp32 -> bf16 and drops the mantissa carry in fp32 -> fp8
    (127.0 -> 64.0 in e4m3): triton-lang/triton#8322, fix proposed in #11897. Unpatched, a check would test
    the emulator rather than the kernel. Conversions it does not cover go to Triton's own code.
    """
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = getattr(interpreter, "_convert_float", None)
    rounding_modes = getattr(getattr(interpreter, "_ir", None), "ROUNDING_MODE", None)
    if original is None or rounding_modes is None or getattr(original, "is_mi_tune_patch", False):
        return
    torch = import_torch()
    targets = {
        tl.bfloat16: (torch.bfloat16, torch.int16, np.uint16),
        tl.float8e4nv: (torch.float8_e4m3fn, torch.uint8, np.uint8),
        tl.float8e5: (torch.float8_e5m2, torch.uint8, np.uint8),
    }

    def convert_float(values, input_dtype, output_dtype, rounding_mode):
        target = targets.get(output_dtype)
        is_nearest_even = rounding_mode is None or rounding_mode == rounding_modes.RTNE
        if target is None or input_dtype not in (tl.float32, tl.float16) or not is_nearest_even:
            return original(values, input_dtype, output_dtype, rounding_mode)
        torch_dtype, torch_bits, numpy_bits = target
        rounded = torch.tensor(values).to(torch_dtype).view(torch_bits)
        return rounded.numpy().view(numpy_bits).reshape(values.shape)

    convert_float.is_mi_tune_patch = True
    interpreter._convert_float = convert_float
