"""Kernel points for the rates table (`probe --bench`): GEMMs, grouped MoE GEMMs and attention at serving shapes.

Device-agnostic: `device="cuda:0"` times with CUDA events, `device="cpu"` with the wall clock (tests run the same
code on tiny shapes). Each point is an `OpPoint` with the op's FLOPs and the bytes it must move divided by its
median time, the same two quantities perf/ops.py divides by a rate. Never changes clocks or device settings.

What each op class measures:
- gemm: `a @ w.T` (bf16), `torch._scaled_mm` (fp8 e4m3, per-tensor scales; cc >= 8.9), `torch._int_mm` (int8),
  `torch._scaled_mm` on float4_e2m1fn_x2 with e4m3 block scales of 16 (nvfp4; cc >= 10.0): m rows x the
  catalog models' projection shapes (n, k), m at the top of each rates-table bucket.
- grouped_moe: `torch.bmm` over the experts one rank holds, the same rows per expert: the grouped GEMM's
  arithmetic without routing, permutation or ragged groups (the model adds those as their own ops / priors).
- attention: `scaled_dot_product_attention` at GQA-like (hq=32, hkv=4, d=128) and MLA-like (absorbed decode:
  hq=16 per rank, one latent head, d=576/512; prefill hq=16, d=192/128) shapes; decode = one query per sequence
  reading its KV (bytes = K+V), prefill = a causal square (FLOPs = 2 x q.k+v width x L^2 / 2 per head).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from autotune.perf.rates import M_BUCKETS
from autotune.specs.hardware import OpPoint

# m at the top of each rates-table bucket (perf/rates.py M_BUCKETS); the open bucket at 4096 rows (a prefill chunk)
BUCKET_M = {name: (int(bound) if bound != float("inf") else 4096) for bound, name in M_BUCKETS}
ELEM_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5}
LAUNCH_SHAPE = (1, 256, 256)  # (m, n, k) of the kernel-floor point: microseconds of launch, no work
FP4_BLOCK = 16  # nvfp4: one e4m3 scale per 16 elements along k
INT8_MIN_ROWS = 17  # torch._int_mm needs more than 16 rows


@dataclass(frozen=True)
class GemmShape:
    n: int
    k: int
    source: str  # "llama-3.1-70b gate_up tp8"


@dataclass(frozen=True)
class AttentionPoint:
    kind: str  # decode | prefill
    label: str  # gqa | mla
    batch: int
    heads: int
    kv_heads: int
    qk_dim: int
    v_dim: int
    ctx: int  # decode: KV tokens per sequence; prefill: the causal square's side


class Timer:
    """Median time of a callable in microseconds: CUDA events on a CUDA device, the wall clock on CPU."""

    def __init__(self, torch, device: str, repeats: int) -> None:
        self.torch, self.device, self.repeats = torch, device, repeats
        self.cuda = device.startswith("cuda")

    def us(self, fn: Callable[[], object]) -> float:
        torch = self.torch
        fn()  # warm-up: kernel selection, allocator
        times = []
        if self.cuda:
            with torch.cuda.device(self.device):  # events and the copy's stream on this device
                torch.cuda.synchronize()
                for _ in range(self.repeats):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn()
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end) * 1e3)
        else:
            for _ in range(self.repeats):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(times)


def _point(op_class: str, dtype: str, bucket: str, shape: str, us: float, flops: float, nbytes: float) -> OpPoint:
    s = us * 1e-6
    return OpPoint(op_class, dtype, bucket, shape, sig(us), sig(flops / s / 1e12), sig(nbytes / s / 1e9))


def sig(x: float) -> float:
    """Four significant digits (CPU test figures are tiny; rounding to decimals would zero them)."""
    return float(f"{x:.4g}")


def gemm_fn(torch, dtype: str, m: int, n: int, k: int, device: str) -> tuple[Callable[[], object], int]:
    """(the GEMM call of `dtype` on (rows x k) @ (k x n), rows) with operands allocated once; rows = m except
    where the kernel needs more (torch._int_mm: m > 16)."""
    fn = _gemm_call(torch, dtype, max(m, INT8_MIN_ROWS) if dtype == "int8" else m, n, k, device)
    return fn, max(m, INT8_MIN_ROWS) if dtype == "int8" else m


def _gemm_call(torch, dtype: str, m: int, n: int, k: int, device: str) -> Callable[[], object]:
    if dtype == "bf16":
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        return lambda: a @ w.t()
    if dtype == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=device).to(torch.float8_e4m3fn)  # row-major (n, k): .t() is column-major
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if dtype == "int8":
        a = torch.randint(-64, 64, (m, k), device=device, dtype=torch.int8)
        w = torch.randint(-64, 64, (n, k), device=device, dtype=torch.int8)
        return lambda: torch._int_mm(a, w.t())
    if dtype == "fp4":
        fp4 = torch.float4_e2m1fn_x2
        a = torch.randint(0, 255, (m, k // 2), device=device, dtype=torch.uint8).view(fp4)
        w = torch.randint(0, 255, (n, k // 2), device=device, dtype=torch.uint8).view(fp4)
        # block scales, padded as cuBLAS wants them (rows to 128, scale columns to 4); all ones: layout-free
        sa = torch.ones(_round_up(m, 128) * _round_up(k // FP4_BLOCK, 4), device=device).to(torch.float8_e4m3fn)
        sb = torch.ones(_round_up(n, 128) * _round_up(k // FP4_BLOCK, 4), device=device).to(torch.float8_e4m3fn)
        return lambda: torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    raise ValueError(f"unknown GEMM dtype {dtype!r}")


def gemm_points(
    torch, timer: Timer, dtypes: Iterable[str], shapes: Iterable[GemmShape], buckets: Iterable[str], notes: list[str]
) -> list[OpPoint]:
    """Every dtype x bucket x shape, plus one kernel-floor point per dtype. A dtype whose kernel fails is skipped
    with a note (an fp4 path the installed torch / cuBLAS does not offer, say)."""
    points: list[OpPoint] = []
    shapes, buckets = list(shapes), list(buckets)
    for dtype in dtypes:
        try:
            for bucket in buckets:
                for s in shapes:
                    fn, m = gemm_fn(torch, dtype, BUCKET_M[bucket], s.n, s.k, timer.device)
                    us = timer.us(fn)
                    nbytes = (m * s.k + s.n * s.k) * ELEM_BYTES[dtype] + m * s.n * 2  # inputs + bf16 output
                    points.append(
                        _point("gemm", dtype, bucket, f"m={m} n={s.n} k={s.k} ({s.source})", us, 2 * m * s.n * s.k,
                               nbytes)
                    )  # fmt: skip
        except Exception as exc:  # a dtype this torch / GPU cannot run: keep the others
            points = [p for p in points if p.dtype != dtype]
            notes.append(f"gemm {dtype} skipped: {reason(exc)}")
            continue
        try:
            m, n, k = LAUNCH_SHAPE
            fn, m = gemm_fn(torch, dtype, m, n, k, timer.device)
            us = timer.us(fn)
            points.append(_point("gemm", dtype, "launch", f"m={m} n={n} k={k}", us, 2 * m * n * k, (n * k) * 2))
        except Exception as exc:  # the floor keeps its prior (perf/rates.py MIN_US)
            notes.append(f"gemm {dtype} kernel floor skipped: {reason(exc)}")
    return points


def grouped_points(
    torch, timer: Timer, experts: Iterable[tuple[int, GemmShape]], buckets: Iterable[str], notes: list[str]
) -> list[OpPoint]:
    """bf16 `torch.bmm` over `e` experts of shape (n, k) with m rows each, per bucket (m = rows per expert)."""
    points: list[OpPoint] = []
    experts, device = list(experts), timer.device
    try:
        for bucket in buckets:
            m = BUCKET_M[bucket]
            for e, s in experts:
                a = torch.randn(e, m, s.k, device=device, dtype=torch.bfloat16)
                w = torch.randn(e, s.k, s.n, device=device, dtype=torch.bfloat16)
                us = timer.us(lambda a=a, w=w: torch.bmm(a, w))
                nbytes = e * (m * s.k + s.k * s.n + m * s.n) * 2
                points.append(
                    _point("grouped_moe", "bf16", bucket, f"e={e} m={m} n={s.n} k={s.k} ({s.source})", us,
                           2 * e * m * s.n * s.k, nbytes)
                )  # fmt: skip
                del a, w
    except Exception as exc:
        notes.append(f"grouped_moe skipped: {reason(exc)}")
        return []
    return points


def attention_points(torch, timer: Timer, specs: Iterable[AttentionPoint], notes: list[str]) -> list[OpPoint]:
    """SDPA points. On a CUDA device only the fused backends (flash, memory-efficient, cuDNN) may run: a shape
    none of them takes is skipped with a note rather than timed on the unfused math path no engine serves with.
    Decode folds each KV head's query heads into its query rows (one token each: the MQA/GQA decode kernels'
    layout, as FlashMLA runs an absorbed-MLA step); prefill repeats K/V per query head outside the timed call."""
    import contextlib

    import torch.nn.functional as F

    fused = contextlib.nullcontext
    if timer.cuda:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
        fused = lambda: sdpa_kernel(backends)  # noqa: E731
    points: list[OpPoint] = []
    device = timer.device
    bf16 = torch.bfloat16
    for p in specs:
        group = p.heads // p.kv_heads
        decode = p.kind == "decode"
        q_len = 1 if decode else p.ctx
        try:
            if decode:  # (batch, kv head, its query heads as rows, dim) against that head's KV
                q = torch.randn(p.batch, p.kv_heads, group, p.qk_dim, device=device, dtype=bf16)
                k = torch.randn(p.batch, p.kv_heads, p.ctx, p.qk_dim, device=device, dtype=bf16)
                v = torch.randn(p.batch, p.kv_heads, p.ctx, p.v_dim, device=device, dtype=bf16)
            else:
                q = torch.randn(p.batch, p.heads, p.ctx, p.qk_dim, device=device, dtype=bf16)
                k = torch.randn(p.batch, p.kv_heads, p.ctx, p.qk_dim, device=device, dtype=bf16)
                v = torch.randn(p.batch, p.kv_heads, p.ctx, p.v_dim, device=device, dtype=bf16)
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            with fused():
                us = timer.us(lambda q=q, k=k, v=v, c=not decode: F.scaled_dot_product_attention(q, k, v, is_causal=c))
        except Exception as exc:
            notes.append(f"attention {p.kind} {p.label} skipped: {reason(exc)}")
            continue
        pairs = p.ctx * q_len / (1 if decode else 2)  # query-key pairs scored per head (a causal square: half)
        flops = 2 * p.batch * p.heads * (p.qk_dim + p.v_dim) * pairs
        kv = p.batch * p.kv_heads * p.ctx * (p.qk_dim + p.v_dim) * 2  # the KV as stored (before any repeat)
        nbytes = kv + 2 * p.batch * p.heads * q_len * (p.qk_dim + p.v_dim)  # + queries in, outputs out
        shape = (
            f"{p.label} b={p.batch} hq={p.heads} hkv={p.kv_heads} d={p.qk_dim}/{p.v_dim} "
            f"{'ctx' if decode else 'len'}={p.ctx}"
        )
        points.append(_point("attention", "bf16", p.kind, shape, us, flops, nbytes))
        del q, k, v
    return points


def copy_gbs(torch, timer: Timer, src, dst) -> float:
    """GB/s of `dst.copy_(src)` counting the bytes once (a P2P or host<->device copy)."""
    us = timer.us(lambda: dst.copy_(src, non_blocking=True))
    return sig(src.numel() * src.element_size() / (us * 1e-6) / 1e9)


def reason(exc: BaseException) -> str:
    """One line naming an exception (the first line of its message, cut at 160 characters)."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0][:160]}" if lines else type(exc).__name__


def _round_up(x: int, to: int) -> int:
    return (x + to - 1) // to * to
