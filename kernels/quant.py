"""Per-token dynamic FP8 (e4m3) quantisation: the activation input of FP8 GEMMs and MoE experts in decode.

scale[t] = max(amax(|x[t, :]|), MIN_AMAX) / FP8_E4M3_MAX (fp32); q[t, :] = clamp(x[t, :] / scale[t]) in e4m3.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from autotune.kernels.registry import ROW_CHECK_PARAMS, ROW_LAUNCH_PARAMS, Comparison, KernelEntry, Shape
from autotune.kernels.runtime import torch_dtype
from autotune.specs.model import DTYPE_BYTES

# OCP 8-bit Floating Point Specification (OFP8) rev. 1.0 (2023): E4M3 max normal S.1111.110 = 1.75 * 2^8 = 448.
FP8_E4M3_MAX = 448.0
MIN_AMAX = 1e-10  # keeps an all-zero token's scale nonzero; the eps of SGLang's/vLLM's per_token_group_quant_fp8
MAX_BLOCK_SIZE = 8192
SCALE_RTOL = 1e-6
# q may sit one e4m3 step off the reference only near rounding ties (Ada's fp32 -> e4m3 path double-rounds there,
# triton-lang/triton#11753), so rarely; a biased kernel moves far more codes, or moves them further.
MAX_CODE_DISTANCE = 1
MAX_MISMATCH_FRACTION = 0.01


@triton.jit
def _per_token_quant_fp8_kernel(
    x_ptr, q_ptr, scale_ptr, hidden_size, MIN_AMAX: tl.constexpr, FP8_MAX: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    token = tl.program_id(0).to(tl.int64)
    row_start = token * hidden_size
    abs_max = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for col_start in range(0, hidden_size, BLOCK_SIZE):
        cols = col_start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row_start + cols, mask=cols < hidden_size, other=0.0).to(tl.float32)
        abs_max = tl.maximum(abs_max, tl.abs(x))
    scale = tl.div_rn(tl.maximum(tl.max(abs_max, axis=0), MIN_AMAX), FP8_MAX)  # IEEE division, as torch
    tl.store(scale_ptr + token, scale)
    for col_start in range(0, hidden_size, BLOCK_SIZE):
        cols = col_start + tl.arange(0, BLOCK_SIZE)
        mask = cols < hidden_size
        x = tl.load(x_ptr + row_start + cols, mask=mask, other=0.0).to(tl.float32)
        q = tl.clamp(tl.div_rn(x, scale), -FP8_MAX, FP8_MAX)
        tl.store(q_ptr + row_start + cols, q.to(q_ptr.dtype.element_ty), mask=mask)


def per_token_quant_fp8(
    x: torch.Tensor, *, block_size: int | None = None, num_warps: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [num_tokens, hidden_size]. Returns (q [num_tokens, hidden_size] e4m3, scale [num_tokens, 1] fp32)."""
    assert x.ndim == 2 and x.is_contiguous()
    assert x.dtype in (torch.bfloat16, torch.float16, torch.float32)
    num_tokens, hidden_size = x.shape
    block_size = block_size or min(triton.next_power_of_2(hidden_size), MAX_BLOCK_SIZE)
    assert block_size & (block_size - 1) == 0, "block_size must be a power of two"
    num_warps = num_warps or min(max(block_size // 256, 1), 16)
    q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((num_tokens, 1), dtype=torch.float32, device=x.device)
    _per_token_quant_fp8_kernel[(num_tokens,)](
        x, q, scale, hidden_size, MIN_AMAX=MIN_AMAX, FP8_MAX=FP8_E4M3_MAX, BLOCK_SIZE=block_size, num_warps=num_warps
    )
    return q, scale


def per_token_quant_fp8_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x_fp32 = x.float()
    scale = x_fp32.abs().amax(dim=-1, keepdim=True).clamp(min=MIN_AMAX) / FP8_E4M3_MAX
    q = (x_fp32 / scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def e4m3_code_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many representable e4m3 values apart; +0 and -0 count as the same value."""
    return (_e4m3_ordinal(a) - _e4m3_ordinal(b)).abs()


def _e4m3_ordinal(q: torch.Tensor) -> torch.Tensor:
    bits = q.view(torch.uint8).to(torch.int32)
    magnitude = bits & 0x7F  # e4m3fn codes are ordered by magnitude within a sign
    return torch.where(bits >= 0x80, -magnitude, magnitude)


def make_inputs(shape: Shape, dtype: str, device: str) -> tuple[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=generator)
    x[0, : shape[1] // 2] = 0.0  # a half-zero token exercises small values; an outlier column, the clamp
    x[:, -1] *= 50.0
    return (x.to(device=device, dtype=torch_dtype(dtype)).contiguous(),)


def compare(outputs, reference_outputs, dtype: str) -> Comparison:
    (q, scale), (q_ref, scale_ref) = outputs, reference_outputs
    code_distance = e4m3_code_distance(q, q_ref)
    mismatch_fraction = (code_distance > 0).float().mean().item()
    passed = (
        torch.allclose(scale, scale_ref, rtol=SCALE_RTOL, atol=0.0)
        and code_distance.max().item() <= MAX_CODE_DISTANCE
        and mismatch_fraction <= MAX_MISMATCH_FRACTION
    )
    tolerance = (
        f"fraction of q codes != ref, <= {MAX_MISMATCH_FRACTION:g}, each within {MAX_CODE_DISTANCE} e4m3 step; "
        f"scale rtol={SCALE_RTOL:g}"
    )
    return Comparison(max_error=mismatch_fraction, tolerance=tolerance, passed=passed)


def bytes_moved(shape: Shape, dtype: str) -> int:
    num_tokens, hidden_size = shape
    read_bytes = num_tokens * hidden_size * int(DTYPE_BYTES[dtype])
    write_bytes = num_tokens * hidden_size * int(DTYPE_BYTES["fp8"]) + num_tokens * int(DTYPE_BYTES["fp32"])
    return read_bytes + write_bytes


ENTRY = KernelEntry(
    name="per_token_quant_fp8",
    triton_fn=per_token_quant_fp8,
    reference_fn=per_token_quant_fp8_ref,
    make_inputs=make_inputs,
    tunable_params=ROW_LAUNCH_PARAMS,
    compare=compare,
    bytes_moved=bytes_moved,
    check_shapes=((1, 128), (7, 1000), (4, 7168)),
    bench_shapes=((1, 7168), (32, 7168), (128, 7168), (512, 4096)),
    check_params=ROW_CHECK_PARAMS,
)
