"""mi-tune's fused-MoE kernel against its torch reference: CUDA when present, else Triton's CPU interpreter."""

import importlib.util

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None,
    reason="needs the gpu extra (torch, triton)",
)


def test_fused_moe_kernel_matches_the_reference():
    from autotune.kernels import check

    rows = check()
    assert len(rows) >= 10
    assert {r["dtype"].split()[0] for r in rows} == {"bf16", "fp8_w8a8"}
    assert any("block" in r["dtype"] for r in rows)
    bad = [r for r in rows if r["ok"] != "yes"]
    assert not bad, bad


def test_a_wrong_expert_is_caught():
    """The tolerance is tight enough to see a kernel that reads the wrong expert's weights."""
    import torch

    from autotune.kernels.check import TOLERANCE
    from autotune.kernels.runtime import load_kernel_module

    device = "cuda" if torch.cuda.is_available() else "cpu"
    fm = load_kernel_module("autotune.kernels.fused_moe", interpret=device == "cpu")
    layer = fm.make_layer(4, 64, 128, "bf16", None, device)
    x, w, ids = fm.make_tokens(5, 128, 4, 2, device)
    config = {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 2,
    }
    out = fm.fused_moe(layer, x, w, (ids + 1) % 4, config).float()  # every row sent to the next expert
    ref = fm.reference_moe(layer, x, w, ids)
    assert float((out - ref).abs().max() / ref.abs().max()) > 10 * TOLERANCE["bf16"]
