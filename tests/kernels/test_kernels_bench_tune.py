"""bench and tune without CUDA, and the parts of them that need no GPU."""

import importlib
import json

import pytest

from autotune.kernels.bench import bench_row
from autotune.kernels.tune import search_params, shape_key
from autotune.specs.errors import MiTuneError

torch = pytest.importorskip("torch")
needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@needs_no_cuda
def test_bench_without_cuda_is_one_line_error():
    from autotune.kernels import bench

    with pytest.raises(MiTuneError, match=r"^kernels bench needs a CUDA device; none found$"):
        bench(["fused_add_rmsnorm"])


@needs_no_cuda
def test_tune_without_cuda_is_one_line_error(tmp_path):
    from autotune.kernels import tune

    with pytest.raises(MiTuneError, match=r"^kernels tune needs a CUDA device; none found$"):
        tune("per_token_quant_fp8", trials=2, out_path=tmp_path / "best.json")
    assert not (tmp_path / "best.json").exists()


def test_bench_row_arithmetic():
    row = bench_row("k", (2, 8), "bf16", triton_us=2.0, torch_us=5.0, num_bytes=4_000)
    assert row["speedup"] == 2.5
    assert row["achieved_gbs"] == pytest.approx(2.0)  # 4 kB in 2 us


def test_search_params_finds_the_minimum_and_is_seeded():
    # A synthetic cost (not a measurement) with its minimum at block_size=1024, num_warps=4.
    space = {"block_size": (256, 512, 1024, 2048), "num_warps": (1, 2, 4, 8)}
    calls = []

    def cost_us(params):
        calls.append(params)
        return abs(params["block_size"] - 1024) / 256 + abs(params["num_warps"] - 4) + 1.0

    best_params, best_us = search_params(space, cost_us, trials=40, seed=0)
    assert best_params == {"block_size": 1024, "num_warps": 4} and best_us == 1.0
    assert len(calls) == len({tuple(sorted(c.items())) for c in calls}) <= 16  # each config measured once
    assert search_params(space, cost_us, trials=10, seed=3) == search_params(space, cost_us, trials=10, seed=3)


def test_shape_key():
    assert shape_key((128, 7168)) == "128x7168"


@pytest.fixture
def fake_clock(monkeypatch):
    """bench/tune plumbing without CUDA events (on CPU: interpreted kernels) and a fake clock; no timing asserted."""
    from types import SimpleNamespace

    from autotune.kernels.registry import get_entries, get_entry

    fake_torch = SimpleNamespace(
        empty=torch.empty, int8=torch.int8, cuda=SimpleNamespace(get_device_name=lambda device: "fake device")
    )
    bench_module = importlib.import_module("autotune.kernels.bench")
    tune_module = importlib.import_module("autotune.kernels.tune")
    calls = []

    def fake_time_us(fn, flush_buffer, num_iters=100, num_warmup=10):
        calls.append(fn)
        return 10.0

    for module in (bench_module, tune_module):
        monkeypatch.setattr(module, "require_cuda", lambda command, device: fake_torch)
    monkeypatch.setattr(bench_module, "get_entries", lambda names, interpret: get_entries(names))
    monkeypatch.setattr(bench_module, "time_us", fake_time_us)
    monkeypatch.setattr(bench_module, "L2_FLUSH_BYTES", 1024)
    monkeypatch.setattr(tune_module, "get_entry", lambda name, interpret: get_entry(name))
    monkeypatch.setattr(tune_module, "time_us", lambda fn, flush_buffer, num_iters: (fn(), 10.0)[1])
    return SimpleNamespace(bench=bench_module.bench, tune=tune_module.tune, calls=calls)


def test_bench_rows_cover_every_shape_and_dtype(fake_clock):
    from autotune.kernels.registry import get_entry

    rows = fake_clock.bench(["per_token_quant_fp8"], device=DEVICE)
    entry = get_entry("per_token_quant_fp8")
    assert [(r["shape"], r["dtype"]) for r in rows] == [(s, d) for s in entry.bench_shapes for d in entry.dtypes]
    assert len(fake_clock.calls) == 2 * len(rows)  # Triton and torch, side by side
    assert set(rows[0]) == {"kernel", "shape", "dtype", "triton_us", "torch_us", "speedup", "achieved_gbs"}


def test_tune_writes_best_config_per_shape(fake_clock, tmp_path):
    out_path = tmp_path / "tuned" / "quant.json"
    tune = fake_clock.tune
    result = tune("per_token_quant_fp8", shapes=[(2, 300)], trials=3, device=DEVICE, out_path=out_path)
    assert json.loads(out_path.read_text()) == result
    assert result["schema"] == "mi-tune/kernel-tune/v1" and list(result["configs"]) == ["2x300"]
    best = result["configs"]["2x300"]
    assert set(best["params"]) == {"block_size", "num_warps"} and best["speedup_vs_default"] == 1.0
