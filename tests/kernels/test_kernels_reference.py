"""The torch references against small cases computed by hand."""

import math

import pytest

torch = pytest.importorskip("torch")

from autotune.kernels.runtime import load_kernel_module  # noqa: E402


@pytest.fixture(scope="module")
def rmsnorm():
    return load_kernel_module("autotune.kernels.rmsnorm")


@pytest.fixture(scope="module")
def quant():
    return load_kernel_module("autotune.kernels.quant")


def test_rmsnorm_ref_by_hand(rmsnorm):
    x = torch.tensor([[1.0, 2.0]])
    residual = torch.tensor([[2.0, 2.0]])
    weight = torch.tensor([1.0, 0.5])
    out, new_residual = rmsnorm.fused_add_rmsnorm_ref(x, residual, weight, eps=0.0)
    rms = math.sqrt((3.0**2 + 4.0**2) / 2)  # new_residual = [3, 4]
    assert new_residual.tolist() == [[3.0, 4.0]]
    assert out[0].tolist() == pytest.approx([3.0 / rms, 0.5 * 4.0 / rms], rel=1e-6)


def test_rmsnorm_ref_rounds_residual_to_input_dtype(rmsnorm):
    x = torch.tensor([[1.0, 1.0]], dtype=torch.bfloat16)
    residual = torch.tensor([[2.0**-9, 0.0]], dtype=torch.bfloat16)  # 1 + 2^-9 is not a bf16 value
    out, new_residual = rmsnorm.fused_add_rmsnorm_ref(x, residual, torch.ones(2, dtype=torch.bfloat16), eps=0.0)
    assert new_residual.dtype == out.dtype == torch.bfloat16
    assert new_residual.tolist() == [[1.0, 1.0]]
    assert out.tolist() == [[1.0, 1.0]]


def test_quant_ref_by_hand(quant):
    q, scale = quant.per_token_quant_fp8_ref(torch.tensor([[1.0, -2.0, 4.0, 0.0], [448.0, 17.0, -500.0, 1.0]]))
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (2, 1)
    assert scale.flatten().tolist() == pytest.approx([4.0 / 448.0, 500.0 / 448.0])
    assert q[0].float().tolist() == [112.0, -224.0, 448.0, 0.0]  # x * 448 / 4, all exact in e4m3
    # x * 448/500: 401.4 -> 416 (step 32 in [256, 512)), 15.2 -> 15 (step 1 in [8, 16)),
    # -500 -> -448 (clamp), 0.896 -> 0.875 (step 1/16 in [0.5, 1))
    assert q[1].float().tolist() == [416.0, 15.0, -448.0, 0.875]


def test_quant_ref_rounds_ties_to_even_and_keeps_zero_rows(quant):
    q, scale = quant.per_token_quant_fp8_ref(torch.tensor([[448.0, 17.0, 19.0], [0.0, 0.0, 0.0]]))
    assert q[0].float().tolist() == [448.0, 16.0, 20.0]  # scale 1: 17 and 19 are ties between steps of 2
    assert q[1].float().tolist() == [0.0, 0.0, 0.0]
    assert scale[1].item() == pytest.approx(quant.MIN_AMAX / quant.FP8_E4M3_MAX)


def test_e4m3_code_distance(quant):
    a = torch.tensor([0.0, 448.0, 1.0, -1.0, 2.0**-9]).to(torch.float8_e4m3fn)
    b = torch.tensor([-0.0, 416.0, 1.0, -1.125, 0.0]).to(torch.float8_e4m3fn)
    assert quant.e4m3_code_distance(a, b).tolist() == [0, 1, 0, 1, 1]


def test_compare_flags_a_wrong_output(rmsnorm, quant):
    x, residual, weight, eps = rmsnorm.make_inputs((2, 64), "bf16", "cpu")
    out, new_residual = rmsnorm.fused_add_rmsnorm_ref(x, residual, weight, eps)
    assert rmsnorm.compare((out, new_residual), (out, new_residual), "bf16").passed
    assert not rmsnorm.compare((out * 1.05, new_residual), (out, new_residual), "bf16").passed
    (x,) = quant.make_inputs((2, 64), "bf16", "cpu")
    q, scale = quant.per_token_quant_fp8_ref(x)
    assert quant.compare((q, scale), (q, scale), "bf16").passed
    for factor in (2.0, 1.02):  # far off, and biased by less than one e4m3 step
        biased = (x.float() / scale * factor).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        assert not quant.compare((biased, scale), (q, scale), "bf16").passed
