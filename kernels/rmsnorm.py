"""Fused residual add + RMSNorm, the op between every attention/MoE block and the next in decode.

new_residual = x + residual (rounded to the input dtype, as the residual stream is stored);
out = new_residual * rsqrt(mean(new_residual^2) + eps) * weight, accumulated in fp32, rounded once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from autotune.kernels.registry import ROW_CHECK_PARAMS, ROW_LAUNCH_PARAMS, Comparison, KernelEntry, Shape
from autotune.kernels.runtime import torch_dtype
from autotune.specs.model import DTYPE_BYTES

MAX_BLOCK_SIZE = 8192
# (atol, rtol) on `out`; bf16 is torch.testing's default, fp16 two ulps, fp32 allows a different sum order.
OUT_TOLERANCES = {"bf16": (1e-5, 1.6e-2), "fp16": (1e-5, 2e-3), "fp32": (1e-5, 1e-5)}


@triton.jit
def _fused_add_rmsnorm_kernel(
    x_ptr, residual_ptr, weight_ptr, out_ptr, new_residual_ptr, hidden_size, eps, BLOCK_SIZE: tl.constexpr
):
    row_start = tl.program_id(0).to(tl.int64) * hidden_size
    sum_squares = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for col_start in range(0, hidden_size, BLOCK_SIZE):
        cols = col_start + tl.arange(0, BLOCK_SIZE)
        mask = cols < hidden_size
        x = tl.load(x_ptr + row_start + cols, mask=mask, other=0.0).to(tl.float32)
        residual = tl.load(residual_ptr + row_start + cols, mask=mask, other=0.0).to(tl.float32)
        new_residual = (x + residual).to(new_residual_ptr.dtype.element_ty)
        tl.store(new_residual_ptr + row_start + cols, new_residual, mask=mask)
        new_residual = new_residual.to(tl.float32)
        sum_squares += new_residual * new_residual
    rstd = tl.rsqrt(tl.sum(sum_squares, axis=0) / hidden_size + eps)
    # Second pass recomputes the sum instead of re-reading new_residual: no reliance on store->load ordering.
    for col_start in range(0, hidden_size, BLOCK_SIZE):
        cols = col_start + tl.arange(0, BLOCK_SIZE)
        mask = cols < hidden_size
        x = tl.load(x_ptr + row_start + cols, mask=mask, other=0.0).to(tl.float32)
        residual = tl.load(residual_ptr + row_start + cols, mask=mask, other=0.0).to(tl.float32)
        new_residual = (x + residual).to(new_residual_ptr.dtype.element_ty).to(tl.float32)
        weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        out = new_residual * rstd * weight
        tl.store(out_ptr + row_start + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def fused_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    block_size: int | None = None,
    num_warps: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [num_tokens, hidden_size]; weight: [hidden_size]. Returns (out, new_residual)."""
    assert x.ndim == 2 and x.shape == residual.shape and weight.shape == (x.shape[1],)
    assert x.is_contiguous() and residual.is_contiguous() and weight.is_contiguous()
    assert x.dtype == residual.dtype == weight.dtype and x.dtype in (torch.bfloat16, torch.float16, torch.float32)
    assert x.device == residual.device == weight.device
    num_tokens, hidden_size = x.shape
    block_size = block_size or min(triton.next_power_of_2(hidden_size), MAX_BLOCK_SIZE)
    assert block_size & (block_size - 1) == 0, "block_size must be a power of two"
    num_warps = num_warps or min(max(block_size // 256, 1), 16)
    out = torch.empty_like(x)
    new_residual = torch.empty_like(x)
    _fused_add_rmsnorm_kernel[(num_tokens,)](
        x, residual, weight, out, new_residual, hidden_size, eps, BLOCK_SIZE=block_size, num_warps=num_warps
    )
    return out, new_residual


def fused_add_rmsnorm_ref(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    new_residual = x + residual
    hidden = new_residual.float()
    out = hidden * torch.rsqrt(hidden.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return out.to(x.dtype), new_residual


def make_inputs(shape: Shape, dtype: str, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    num_tokens, hidden_size = shape
    generator = torch.Generator().manual_seed(0)
    x, residual = torch.randn(2, num_tokens, hidden_size, generator=generator)
    weight = 1.0 + 0.1 * torch.randn(hidden_size, generator=generator)
    dtype_torch = torch_dtype(dtype)
    return tuple(t.to(device=device, dtype=dtype_torch).contiguous() for t in (x, residual, weight)) + (1e-6,)


def compare(outputs, reference_outputs, dtype: str) -> Comparison:
    (out, new_residual), (out_ref, new_residual_ref) = outputs, reference_outputs
    atol, rtol = OUT_TOLERANCES[dtype]
    out_error = (out.float() - out_ref.float()).abs().max().item()
    residual_error = (new_residual.float() - new_residual_ref.float()).abs().max().item()
    passed = torch.allclose(out.float(), out_ref.float(), atol=atol, rtol=rtol) and residual_error == 0.0
    tolerance = f"max |out - ref| (abs); out atol={atol:g} rtol={rtol:g}, new_residual exact"
    return Comparison(max_error=max(out_error, residual_error), tolerance=tolerance, passed=passed)


def bytes_moved(shape: Shape, dtype: str) -> int:
    num_tokens, hidden_size = shape
    element_bytes = int(DTYPE_BYTES[dtype])
    return (4 * num_tokens * hidden_size + hidden_size) * element_bytes  # read x, residual, weight; write 2


ENTRY = KernelEntry(
    name="fused_add_rmsnorm",
    triton_fn=fused_add_rmsnorm,
    reference_fn=fused_add_rmsnorm_ref,
    make_inputs=make_inputs,
    tunable_params=ROW_LAUNCH_PARAMS,
    compare=compare,
    bytes_moved=bytes_moved,
    check_shapes=((1, 128), (5, 1000), (3, 4096)),
    bench_shapes=((1, 4096), (32, 4096), (128, 7168), (512, 8192)),
    check_params=ROW_CHECK_PARAMS,
)
