"""The kernel table is complete, and the package imports without the gpu extra."""

import inspect
import subprocess
import sys

import pytest

from autotune.kernels.registry import KERNEL_MODULES, KERNEL_NAMES, get_entries, get_entry
from autotune.kernels.runtime import GPU_EXTRA_MESSAGE, import_torch
from autotune.specs.errors import MiTuneError


def test_import_needs_neither_torch_nor_triton():
    code = "import sys, autotune.kernels; print('torch' in sys.modules, 'triton' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_missing_gpu_extra_is_a_mi_tune_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(MiTuneError, match=r"^kernels need the gpu extra: pip install 'mi-tune\[gpu\]'$"):
        import_torch()
    assert GPU_EXTRA_MESSAGE == "kernels need the gpu extra: pip install 'mi-tune[gpu]'"


def test_unknown_kernel_is_a_mi_tune_error():
    with pytest.raises(MiTuneError, match="unknown kernel 'softmax'"):
        get_entry("softmax")


torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def entries():
    return get_entries()


def test_every_name_has_a_complete_entry(entries):
    assert KERNEL_NAMES == ("fused_add_rmsnorm", "per_token_quant_fp8") == tuple(KERNEL_MODULES)
    assert [entry.name for entry in entries] == list(KERNEL_NAMES)
    for entry in entries:
        for fn in (entry.triton_fn, entry.reference_fn, entry.make_inputs, entry.compare, entry.bytes_moved):
            assert callable(fn)
        assert entry.check_shapes and entry.bench_shapes and entry.dtypes


def test_tunable_and_checked_params_are_launcher_keywords(entries):
    for entry in entries:
        keywords = {
            name
            for name, param in inspect.signature(entry.triton_fn).parameters.items()
            if param.kind == param.KEYWORD_ONLY
        }
        assert set(entry.tunable_params) <= keywords
        assert all(len(choices) > 1 for choices in entry.tunable_params.values())
        assert all(set(params) <= keywords for params in entry.check_params)


def test_make_inputs_follow_shape_and_dtype(entries):
    for entry in entries:
        for dtype, torch_dtype in [("bf16", torch.bfloat16), ("fp32", torch.float32)]:
            inputs = entry.make_inputs((3, 96), dtype, "cpu")
            tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
            assert tensors[0].shape == (3, 96) and all(t.dtype == torch_dtype for t in tensors)
            assert all(t.is_contiguous() for t in tensors)


def test_bytes_moved_by_hand():
    rmsnorm, quant = get_entry("fused_add_rmsnorm"), get_entry("per_token_quant_fp8")
    # rmsnorm bf16 [2, 8]: read x, residual (2 * 16 * 2 B) and weight (8 * 2 B); write out, new_residual (2 * 32 B)
    assert rmsnorm.bytes_moved((2, 8), "bf16") == 64 + 16 + 64
    # quant fp32 [2, 8]: read 16 * 4 B; write 16 * 1 B of e4m3 and 2 * 4 B of scales
    assert quant.bytes_moved((2, 8), "fp32") == 64 + 16 + 8
