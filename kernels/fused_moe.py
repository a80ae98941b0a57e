"""mi-tune's own fused-MoE Triton kernel: the fallback `kernels tune-moe` times when no engine is installed.

It follows the engines' design so that a launch config means the same thing here as in vLLM/SGLang: tokens are
sorted by expert and each expert's rows padded to a multiple of BLOCK_SIZE_M (the engines' moe_align_block_size);
one program computes a BLOCK_SIZE_M x BLOCK_SIZE_N tile of one expert's GEMM, reading rows through the sorted ids,
looping over K in BLOCK_SIZE_K steps, with programs ordered in GROUP_SIZE_M super-rows for L2 reuse of the weight
tiles; num_warps and num_stages go to the launch. FP8 (w8a8): per-tensor activation scale and per-expert weight
scale, or 128x128 block weight scales with per-token-group activation scales. Written from that description
(vLLM fused_moe.py fused_moe_kernel, SGLang fused_moe_triton_kernels.py), not copied.

Import through `load()` (runtime.load_kernel_module), which fixes Triton's compiled/interpreter mode first.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0  # OCP OFP8 e4m3 largest normal


@triton.jit
def _moe_gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    a_scale_ptr,
    b_scale_ptr,
    weights_ptr,
    sorted_ids_ptr,
    expert_ids_ptr,
    padded_ptr,
    N,
    K,
    num_valid_rows,
    stride_am,
    stride_ak,
    stride_be,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    stride_asm,
    stride_ask,
    stride_bse,
    stride_bsn,
    stride_bsk,
    group_n,
    group_k,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    TOP_K: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    FP8: tl.constexpr,
    BLOCK_QUANT: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # program -> (row tile, column tile), row tiles grouped by GROUP_SIZE_M
    pid = tl.program_id(0)
    rows_padded = tl.load(padded_ptr)
    num_m = tl.cdiv(rows_padded, BLOCK_SIZE_M)
    num_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * num_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    group_rows = tl.minimum(num_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    if pid_m * BLOCK_SIZE_M >= rows_padded:
        return
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    row_ids = tl.load(sorted_ids_ptr + offs_m).to(tl.int64)
    row_ok = row_ids < num_valid_rows
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)).to(tl.int64)
    col_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    # a row of A is a token: TOP_K sorted rows share one token (the first GEMM) or are rows themselves (TOP_K 1)
    a_ptrs = a_ptr + (row_ids[:, None] // TOP_K) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + offs_n[None, :] * stride_bn + offs_k[:, None] * stride_bk
    if FP8 and not BLOCK_QUANT:
        a_scale = tl.load(a_scale_ptr)
        b_scale = tl.load(b_scale_ptr + expert * stride_bse)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_SIZE_K):
        k_ok = offs_k < K - k_start
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        if UPCAST:  # Triton 3.9's interpreter multiplies bf16 tiles as raw integers (see moe_gemm)
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if BLOCK_QUANT:
            # the tile sits inside one scale block along K (BLOCK_SIZE_K divides group_k)
            a_s = tl.load(
                a_scale_ptr + (row_ids // TOP_K) * stride_asm + (k_start // group_k) * stride_ask,
                mask=row_ok,
                other=0.0,
            )
            b_s = tl.load(
                b_scale_ptr
                + expert * stride_bse
                + (offs_n // group_n) * stride_bsn
                + (k_start // group_k) * stride_bsk,
                mask=col_ok,
                other=0.0,
            )
            acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        else:
            acc += tl.dot(a, b)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if FP8 and not BLOCK_QUANT:
        acc = acc * a_scale * b_scale
    if MUL_ROUTED_WEIGHT:
        acc = acc * tl.load(weights_ptr + row_ids, mask=row_ok, other=0.0)[:, None]
    c_ptrs = c_ptr + row_ids[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


def align_block_size(topk_ids: torch.Tensor, block_m: int, num_experts: int):
    """Rows (token x slot) sorted by expert, each expert's run padded to a multiple of block_m with the sentinel
    topk_ids.numel(); the expert of every BLOCK_SIZE_M block; the padded row count (a 1-element tensor)."""
    flat = topk_ids.flatten()
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    starts = torch.cumsum(padded, 0) - padded
    order = torch.argsort(flat, stable=True)
    sorted_experts = flat[order]
    first_of_expert = torch.cumsum(counts, 0) - counts
    rank = torch.arange(flat.numel(), device=flat.device) - first_of_expert[sorted_experts]
    total = int(padded.sum())
    sorted_ids = torch.full((total,), flat.numel(), dtype=torch.int32, device=flat.device)
    sorted_ids[starts[sorted_experts] + rank] = order.to(torch.int32)
    expert_ids = torch.repeat_interleave(torch.arange(num_experts, device=flat.device), padded // block_m)
    return sorted_ids, expert_ids.to(torch.int32), torch.tensor([total], dtype=torch.int32, device=flat.device)


def moe_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    aligned,
    config: dict,
    *,
    top_k: int,
    topk_weights: torch.Tensor | None = None,
    a_scale: torch.Tensor | None = None,
    b_scale: torch.Tensor | None = None,
    block_shape: tuple[int, int] | None = None,
) -> torch.Tensor:
    """out[row] = a[row // top_k] @ b[expert(row)].T for every routed row; b: [E, N, K], out: [rows, N]."""
    sorted_ids, expert_ids, padded = aligned
    num_experts, n, k = b.shape
    assert a.shape[1] == k and out.shape[1] == n and a.is_contiguous() and b.is_contiguous()
    fp8 = a.dtype == torch.float8_e4m3fn
    block_quant = fp8 and block_shape is not None
    if fp8:
        assert a_scale is not None and b_scale is not None
        if block_quant:
            assert config["BLOCK_SIZE_K"] <= block_shape[1] and block_shape[1] % config["BLOCK_SIZE_K"] == 0
    dummy = out  # pointer arguments a config does not read
    a_s = a_scale if fp8 else dummy
    b_s = b_scale if fp8 else dummy
    a_strides = (a_s.stride(0), a_s.stride(1)) if block_quant else (0, 0)
    b_strides = (
        (b_s.stride(0), b_s.stride(1), b_s.stride(2)) if block_quant else ((b_s.stride(0),) if fp8 else (0,)) + (0, 0)
    )
    grid = (triton.cdiv(sorted_ids.numel(), config["BLOCK_SIZE_M"]) * triton.cdiv(n, config["BLOCK_SIZE_N"]),)
    _moe_gemm_kernel[grid](
        a,
        b,
        out,
        a_s,
        b_s,
        topk_weights if topk_weights is not None else dummy,
        sorted_ids,
        expert_ids,
        padded,
        n,
        k,
        out.shape[0],
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        b.stride(2),
        out.stride(0),
        out.stride(1),
        *a_strides,
        *b_strides,
        block_shape[0] if block_quant else 1,
        block_shape[1] if block_quant else 1,
        BLOCK_SIZE_M=config["BLOCK_SIZE_M"],
        BLOCK_SIZE_N=config["BLOCK_SIZE_N"],
        BLOCK_SIZE_K=config["BLOCK_SIZE_K"],
        GROUP_SIZE_M=config["GROUP_SIZE_M"],
        TOP_K=top_k,
        MUL_ROUTED_WEIGHT=topk_weights is not None,
        FP8=fp8,
        BLOCK_QUANT=block_quant,
        UPCAST=not fp8 and _interpreting(),
        num_warps=config["num_warps"],
        num_stages=config["num_stages"],
    )
    return out


@functools.cache
def _interpreting() -> bool:
    """Under TRITON_INTERPRET=1, tl.dot of two bf16 tiles returns garbage (triton 3.9: the interpreter's numpy
    matmul sees bf16's storage integers; a 16x16 product is off by ~2e10), so bf16 tiles go through fp32 there.
    Compiled kernels never take that branch."""
    from autotune.kernels.runtime import is_triton_interpreting

    return is_triton_interpreting()


# ---- inputs, quantisation, the whole layer and its torch reference ------------------------------------------


def quantize_fp8(x: torch.Tensor, block_shape: tuple[int, int] | None, *, weight: bool):
    """(fp8 tensor, scale). Per-tensor: one scale (activations) or one per expert (weights [E, N, K]).
    Block: weights one scale per (block_n x block_k) block; activations one per token per block_k group."""
    xf = x.float()
    if block_shape is None:
        dims = tuple(range(1, xf.ndim)) if weight else tuple(range(xf.ndim))
        scale = xf.abs().amax(dim=dims, keepdim=True).clamp(min=1e-12) / FP8_MAX
        q = (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return q, scale.reshape(-1) if weight else scale.reshape(1)
    bn, bk = block_shape
    if weight:
        e, n, k = xf.shape
        blocks = xf.reshape(e, n // bn, bn, k // bk, bk)
        scale = blocks.abs().amax(dim=(2, 4), keepdim=True).clamp(min=1e-12) / FP8_MAX
        q = (blocks / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(e, n, k)
        return q, scale.reshape(e, n // bn, k // bk).contiguous()
    m, k = xf.shape
    groups = xf.reshape(m, k // bk, bk)
    scale = groups.abs().amax(dim=2, keepdim=True).clamp(min=1e-12) / FP8_MAX
    q = (groups / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(m, k)
    return q, scale.reshape(m, k // bk).contiguous()


def make_layer(num_experts, shard_n, hidden, dtype, block_shape, device, seed=0):
    """Random expert weights w1 [E, 2N, K] (gate and up) and w2 [E, K, N], as the engines store them; FP8 ones
    quantised with their scales."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    w1 = (torch.randn(num_experts, 2 * shard_n, hidden, generator=gen) / hidden**0.5).to(torch.bfloat16)
    w2 = (torch.randn(num_experts, hidden, shard_n, generator=gen) / shard_n**0.5).to(torch.bfloat16)
    layer = {"w1": w1.to(device), "w2": w2.to(device), "block_shape": block_shape, "fp8": dtype == "fp8_w8a8"}
    if layer["fp8"]:
        layer["w1"], layer["w1_scale"] = (t.to(device) for t in quantize_fp8(w1, block_shape, weight=True))
        layer["w2"], layer["w2_scale"] = (t.to(device) for t in quantize_fp8(w2, block_shape, weight=True))
    return layer


def make_tokens(batch, hidden, num_experts, topk, device, seed=0):
    """bf16 activations and a random top-k routing (softmax weights over random logits), as the engines' tuning
    scripts draw them."""
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    x = torch.randn(batch, hidden, generator=gen).to(torch.bfloat16)
    logits = torch.randn(batch, num_experts, generator=gen)
    weights, ids = torch.topk(torch.softmax(logits, dim=-1), topk, dim=-1)
    return x.to(device), weights.to(device), ids.to(torch.int64).to(device)


def _activation_input(x: torch.Tensor, layer: dict):
    if not layer["fp8"]:
        return x, None
    if layer["block_shape"] is None:
        return quantize_fp8(x, None, weight=False)
    return quantize_fp8(x, layer["block_shape"], weight=False)


def up_gemm(layer, x, topk_ids, config, aligned=None):
    """First GEMM: [rows, 2N] = token @ w1[expert].T for every routed (token, slot) row."""
    e, two_n, _ = layer["w1"].shape
    aligned = aligned or align_block_size(topk_ids, config["BLOCK_SIZE_M"], e)
    a, a_scale = _activation_input(x, layer)
    out = torch.empty(topk_ids.numel(), two_n, dtype=torch.bfloat16, device=x.device)
    return moe_gemm(
        a,
        layer["w1"],
        out,
        aligned,
        config,
        top_k=topk_ids.shape[1],
        a_scale=a_scale,
        b_scale=layer.get("w1_scale"),
        block_shape=layer["block_shape"],
    )


def down_gemm(layer, h, topk_ids, topk_weights, config, aligned=None):
    """Second GEMM on the activated rows h [rows, N]: [rows, K] = h[row] @ w2[expert].T x router weight."""
    e, hidden, _ = layer["w2"].shape
    aligned = aligned or align_block_size(topk_ids, config["BLOCK_SIZE_M"], e)
    a, a_scale = _activation_input(h, layer)
    out = torch.empty(h.shape[0], hidden, dtype=torch.bfloat16, device=h.device)
    return moe_gemm(
        a,
        layer["w2"],
        out,
        aligned,
        config,
        top_k=1,
        topk_weights=topk_weights.flatten().float(),
        a_scale=a_scale,
        b_scale=layer.get("w2_scale"),
        block_shape=layer["block_shape"],
    )


def silu_and_mul(y: torch.Tensor) -> torch.Tensor:
    gate, up = y.float().chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)


def fused_moe(layer, x, topk_weights, topk_ids, config, down_config=None) -> torch.Tensor:
    """The routed-expert output [batch, K]: both GEMMs with this kernel, SiLU-and-mul and the top-k sum in torch."""
    aligned = align_block_size(topk_ids, config["BLOCK_SIZE_M"], layer["w1"].shape[0])
    h = silu_and_mul(up_gemm(layer, x, topk_ids, config, aligned))
    y = down_gemm(layer, h, topk_ids, topk_weights, down_config or config, aligned)
    return y.view(x.shape[0], topk_ids.shape[1], -1).float().sum(dim=1).to(torch.bfloat16)


def dequantize(w: torch.Tensor, scale: torch.Tensor, block_shape) -> torch.Tensor:
    if block_shape is None:
        return w.float() * scale.reshape(-1, *([1] * (w.ndim - 1)))
    bn, bk = block_shape
    return w.float() * scale.repeat_interleave(bn, dim=-2).repeat_interleave(bk, dim=-1)


def reference_moe(layer, x, topk_weights, topk_ids) -> torch.Tensor:
    """The same layer in plain torch, expert by expert, in fp32 (FP8 weights dequantised; activations unquantised)."""
    w1, w2 = layer["w1"].float(), layer["w2"].float()
    if layer["fp8"]:
        w1 = dequantize(layer["w1"], layer["w1_scale"], layer["block_shape"])
        w2 = dequantize(layer["w2"], layer["w2_scale"], layer["block_shape"])
    out = torch.zeros(x.shape[0], w2.shape[1], dtype=torch.float32, device=x.device)
    xf = x.float()
    for slot in range(topk_ids.shape[1]):
        for expert in topk_ids[:, slot].unique().tolist():
            rows = topk_ids[:, slot] == expert
            gate, up = (xf[rows] @ w1[expert].T).chunk(2, dim=-1)
            h = torch.nn.functional.silu(gate) * up
            out[rows] += (h @ w2[expert].T) * topk_weights[rows, slot, None].float()
    return out
