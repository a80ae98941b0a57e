"""`mi-tune kernels check`: mi-tune's fused-MoE kernel against its torch reference, on CUDA or (without a GPU) under
Triton's CPU interpreter. The kernel is what `tune-moe` times when no engine is installed, so its timings mean
something only if it computes the layer: bf16, FP8 per-tensor and FP8 block-scaled, two launch configs each (one
with tiles smaller than the shape, so the K loop, masked tails and GROUP_SIZE_M ordering all run)."""

from __future__ import annotations

from autotune.kernels.runtime import import_torch, load_kernel_module, resolve_device

# (experts, N, K, batch, top-k): small, so the interpreter runs them in seconds; K not a multiple of 64 exercises
# the masked K tail; N=96 makes 2N=192 a partial last N tile for BLOCK_SIZE_N 128
CHECK_SHAPES = ((8, 96, 160, 7, 2), (4, 64, 128, 1, 1))
CHECK_CONFIGS = (
    {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2, "num_warps": 4, "num_stages": 2},
    {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3},
)
# max |kernel - reference| / max |reference|. bf16: outputs rounded to bf16 (8 mantissa bits, 0.4%) after two GEMMs;
# FP8: activations quantised to e4m3 (3 mantissa bits, up to 6% per element) before each GEMM, the reference keeps
# them exact. A kernel reading the wrong expert, row or scale is off by O(1).
TOLERANCE = {"bf16": 2e-2, "fp8_w8a8": 1e-1}
CHECK_DTYPES = (("bf16", None), ("fp8_w8a8", None), ("fp8_w8a8", (32, 32)))


def check(device: str | None = None) -> list[dict]:
    """One row per (shape, dtype, config): the relative error and whether it is within TOLERANCE."""
    torch = import_torch()
    device = resolve_device(device)
    fm = load_kernel_module("autotune.kernels.fused_moe", interpret=device == "cpu")
    rows = []
    for e, n, k, batch, topk in CHECK_SHAPES:
        for dtype, block in CHECK_DTYPES:
            if block and (n % block[0] or k % block[1]):
                block = (32, 32) if not (n % 32 or k % 32) else None
            layer = fm.make_layer(e, n, k, dtype, block, device)
            x, w, ids = fm.make_tokens(batch, k, e, topk, device)
            reference = fm.reference_moe(layer, x, w, ids)
            for config in CHECK_CONFIGS:
                if block and block[1] % config["BLOCK_SIZE_K"]:
                    continue
                out = fm.fused_moe(layer, x, w, ids, config)
                error = float((out.float() - reference).abs().max() / reference.abs().max().clamp(min=1e-12))
                rows.append(
                    {
                        "shape": f"E={e} N={n} K={k} batch={batch} top-k={topk}",
                        "dtype": dtype + (f" block {list(block)}" if block else ""),
                        "config": "/".join(
                            str(config[key]) for key in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
                        ),
                        "device": device + (" (interpreter)" if device == "cpu" else ""),
                        "rel_error": f"{error:.3g}",
                        "tolerance": TOLERANCE[dtype],
                        "ok": "yes" if error <= TOLERANCE[dtype] and not torch.isnan(out).any() else "NO",
                    }
                )
    return rows
