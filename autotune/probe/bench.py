"""`mi-tune probe --bench`: micro-benchmarks that replace datasheet figures in the profile's `measured`.

Needs torch with a CUDA device (the `gpu` extra); torch is imported here only. Never changes clocks or
device settings: it allocates, times with CUDA events and frees.
"""

from __future__ import annotations

import dataclasses

from autotune.specs import Measured, MiTuneError

GEMM_SIZE = 8192  # M = N = K: large enough to reach steady-state tensor-core throughput
COPY_BYTES = 1 << 30
P2P_BYTES = 256 << 20
REPEATS = 20


def _torch():
    try:
        import torch
    except ImportError:
        raise MiTuneError("probe --bench needs torch: pip install 'mi-tune[gpu]'") from None
    if not torch.cuda.is_available():
        raise MiTuneError("probe --bench needs a CUDA device; none found")
    return torch


def _time_ms(torch, fn, device: int) -> float:
    """Median time of `fn` over REPEATS runs after a warm-up, CUDA events on `device`."""
    with torch.cuda.device(device):
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(REPEATS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def gemm_tflops(torch, device: int, dtype: str) -> float:
    n = GEMM_SIZE
    a = torch.randn(n, n, device=f"cuda:{device}", dtype=torch.bfloat16)
    b = torch.randn(n, n, device=f"cuda:{device}", dtype=torch.bfloat16)
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().t().to(torch.float8_e4m3fn)
        one = torch.ones((), device=a.device)
        ms = _time_ms(
            torch, lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), device
        )
    else:
        ms = _time_ms(torch, lambda: a @ b, device)
    return 2 * n**3 / (ms * 1e-3) / 1e12


def mem_bw_gbs(torch, device: int) -> float:
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=f"cuda:{device}")
    dst = torch.empty_like(src)
    ms = _time_ms(torch, lambda: dst.copy_(src), device)
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9  # a copy reads and writes every byte


def p2p_gbs(torch, src: int, dst: int) -> float:
    a = torch.empty(P2P_BYTES, dtype=torch.uint8, device=f"cuda:{src}")
    b = torch.empty(P2P_BYTES, dtype=torch.uint8, device=f"cuda:{dst}")
    ms = _time_ms(torch, lambda: b.copy_(a, non_blocking=True), src)
    return P2P_BYTES / (ms * 1e-3) / 1e9


def calibrate(result):
    """The probe result with `measured` filled from GEMM, memory and P2P copy benchmarks."""
    if result.profile is None:
        raise MiTuneError("probe --bench: no accelerators found to benchmark")
    torch = _torch()
    hw = result.profile
    dtypes = ["bf16"] + (["fp8"] if hw.gpu.features.fp8 and hasattr(torch, "_scaled_mm") else [])
    gemm = {dtype: round(gemm_tflops(torch, 0, dtype), 1) for dtype in dtypes}
    n = min(hw.num_gpus, torch.cuda.device_count())
    p2p = tuple(tuple(0.0 if i == j else round(p2p_gbs(torch, i, j), 1) for j in range(n)) for i in range(n))
    measured = Measured(gemm_tflops=gemm, mem_bw_gbs=round(mem_bw_gbs(torch, 0), 1), p2p_gbs=p2p if n > 1 else ())
    profile = dataclasses.replace(hw, measured=measured, sources=(*hw.sources, "probe --bench micro-benchmarks"))
    return dataclasses.replace(result, profile=profile)
