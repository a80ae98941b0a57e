"""Time each Triton kernel and its torch reference side by side on one CUDA device."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from autotune.kernels.registry import Shape, get_entries
from autotune.kernels.runtime import import_torch, require_cuda

# Written before every timed call so inputs come from HBM, not L2 (as triton.testing.do_bench does).
L2_FLUSH_BYTES = 256 * 1024**2


def bench(
    names: list[str] | None = None, device: str = "cuda", *, num_iters: int = 100, num_warmup: int = 10
) -> list[dict[str, Any]]:
    """One row per (kernel, shape, dtype): triton_us, torch_us (medians), speedup, achieved_gbs of Triton."""
    torch = require_cuda("bench", device)
    flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)
    rows = []
    for entry in get_entries(names, interpret=False):
        for shape in entry.bench_shapes:
            for dtype in entry.dtypes:
                inputs = entry.make_inputs(shape, dtype, device)
                triton_us = time_us(lambda: entry.triton_fn(*inputs), flush_buffer, num_iters, num_warmup)  # noqa: B023
                torch_us = time_us(lambda: entry.reference_fn(*inputs), flush_buffer, num_iters, num_warmup)  # noqa: B023
                rows.append(bench_row(entry.name, shape, dtype, triton_us, torch_us, entry.bytes_moved(shape, dtype)))
    return rows


def time_us(fn: Callable[[], Any], flush_buffer, num_iters: int = 100, num_warmup: int = 10) -> float:
    """Median GPU time of `fn` between CUDA events, in microseconds, with L2 flushed before each call."""
    torch = import_torch()
    for _ in range(num_warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(num_iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(num_iters)]
    for start, end in zip(starts, ends, strict=True):
        flush_buffer.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)) * 1e3


def bench_row(kernel: str, shape: Shape, dtype: str, triton_us: float, torch_us: float, num_bytes: int) -> dict:
    return {
        "kernel": kernel,
        "shape": tuple(shape),
        "dtype": dtype,
        "triton_us": triton_us,
        "torch_us": torch_us,
        "speedup": torch_us / triton_us,
        "achieved_gbs": num_bytes / (triton_us * 1e-6) / 1e9,
    }
