"""Triton kernels against their references: on CUDA when present, else under Triton's CPU interpreter."""

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None,
    reason="needs the gpu extra (torch, triton)",
)


@pytest.fixture(scope="module")
def device():
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def test_check_passes_every_case(device):
    from autotune.kernels import KERNEL_NAMES, check

    results = check()
    failures = [r for r in results if not r.passed]
    assert not failures, failures
    assert {r.kernel for r in results} == set(KERNEL_NAMES)
    assert {r.dtype for r in results} == {"bf16", "fp16", "fp32"}
    assert all(r.device == device and r.is_interpreted == (device == "cpu") for r in results)


@pytest.mark.parametrize(
    ("name", "shape", "params"),
    [
        ("fused_add_rmsnorm", (3, 300), {"block_size": 128, "num_warps": 1}),
        ("fused_add_rmsnorm", (2, 64), {"block_size": 256, "num_warps": 8}),
        ("per_token_quant_fp8", (3, 300), {"block_size": 128, "num_warps": 1}),
        ("per_token_quant_fp8", (2, 64), {"block_size": 256, "num_warps": 8}),
    ],
)
def test_tail_and_oversized_blocks_match(device, name, shape, params):
    from autotune.kernels.check import check_case
    from autotune.kernels.registry import get_entry

    entry = get_entry(name)
    for dtype in entry.dtypes:
        result = check_case(entry, shape, dtype, params, device)
        assert result.passed, result


def run_in_interpreter(code: str) -> None:
    """Run `code` in a fresh process that has no CUDA device, so Triton starts in interpreter mode on any
    machine (the mode is fixed at Triton's first import); the code prints 'ok' when its checks hold."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok"), done.stdout


def test_quant_is_bit_exact_under_the_interpreter():
    run_in_interpreter(
        "from autotune.kernels.check import check\n"
        "results = check(['per_token_quant_fp8'], device='cpu')\n"
        "assert results and all(r.is_interpreted and r.max_error == 0.0 for r in results), results\n"
        "print('ok')\n"
    )


def test_launchers_assert_shapes_and_contiguity(device):
    import torch

    from autotune.kernels.registry import get_entry

    rmsnorm = get_entry("fused_add_rmsnorm")
    x, residual, weight, eps = rmsnorm.make_inputs((4, 64), "fp32", device)
    with pytest.raises(AssertionError):
        rmsnorm.triton_fn(x.t(), residual.t(), weight, eps)
    with pytest.raises(AssertionError):
        rmsnorm.triton_fn(x, residual, weight[:32], eps)
    with pytest.raises(AssertionError):
        rmsnorm.triton_fn(x, residual.to(torch.bfloat16), weight, eps)
    quant = get_entry("per_token_quant_fp8")
    with pytest.raises(AssertionError):
        quant.triton_fn(x.t())
    with pytest.raises(AssertionError):
        quant.triton_fn(x, block_size=100)


INTERPRETER_DOWNCASTS = """
import numpy as np
import torch

from autotune.kernels.runtime import set_triton_mode

set_triton_mode(interpret=True)
import triton.language as tl
from triton.runtime import interpreter

values = np.array([127.0047836, 1.9999, -7.84, 17.0], dtype=np.float32)
fp8_bits = interpreter._convert_float(values, tl.float32, tl.float8e4nv, None)
fp8 = torch.from_numpy(fp8_bits.view(np.uint8).copy()).view(torch.float8_e4m3fn)
assert fp8.float().tolist() == [128.0, 2.0, -8.0, 16.0], fp8  # unpatched triton 3.9: 64.0, 1.0, -4.0, ...
bf16_bits = interpreter._convert_float(values, tl.float32, tl.bfloat16, None)
bf16 = torch.from_numpy(bf16_bits.view(np.int16).copy()).view(torch.bfloat16)
assert bf16.tolist() == torch.from_numpy(values).to(torch.bfloat16).tolist(), bf16
print("ok")
"""


def test_interpreter_downcasts_round_to_nearest_even():
    run_in_interpreter(INTERPRETER_DOWNCASTS)


def test_check_on_cpu_after_compiled_triton_import_is_one_line_error():
    code = (
        "import triton.language\n"
        "from autotune.kernels import check\n"
        "from autotune.specs.errors import MiTuneError\n"
        "try:\n    check(device='cpu')\nexcept MiTuneError as e:\n    print(e)\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip().endswith("rerun in a fresh process"), done.stderr
