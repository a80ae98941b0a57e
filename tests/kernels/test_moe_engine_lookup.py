"""The written files are found by each engine's own config lookup, called on CPU.

Neither engine imports on a CPU-only machine without its CUDA build (vllm pulls CUDA torch and its compiled ops;
sglang's config module imports triton and its runtime context), and CI must not install them. So this test runs
the engines' lookup *source*, unchanged, from unpacked wheels (vllm 0.34.0, sglang 0.5.23): the named functions are
taken out of the module with `ast` and executed with what they import replaced by small stand-ins (the environment
variable, the GPU name torch would report, a logger, triton.__version__). Without the unpacked wheels
(MI_TUNE_ENGINE_SRC, default /tmp/wheels/src: `pip download --no-deps vllm==0.34.0 sglang==0.5.23` and unzip
into vllm/ and sglang/) it skips; tests/kernels/test_moe_configs.py then still checks the names against files the
engines ship.
"""

import ast
import os
import sys
import types
import typing
from pathlib import Path

import pytest

from autotune.catalog.models import load_model
from autotune.kernels import moe_configs as mc
from autotune.kernels.moe_tune import BatchResult, TuneRequest, write_files

ENGINE_SRC = Path(os.environ.get("MI_TUNE_ENGINE_SRC", "/tmp/wheels/src"))
VLLM_FUSED_MOE = ENGINE_SRC / "vllm/vllm/model_executor/layers/fused_moe/fused_moe.py"
VLLM_PLATFORM_UTILS = ENGINE_SRC / "vllm/vllm/utils/platform_utils.py"
SGLANG_CONFIG = ENGINE_SRC / "sglang/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py"
GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
TRITON = "3.9.0"


def _functions(path: Path, names: set[str], namespace: dict) -> dict:
    """Execute the module-level functions `names` of `path` (their decorators included) in `namespace`."""
    tree = ast.parse(path.read_text())
    picked = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    assert {node.name for node in picked} == names, f"{path}: functions missing"
    namespace.setdefault("__file__", str(path))  # vLLM's second place to look: the package's own configs/
    exec(compile(ast.Module(body=picked, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace


TYPING = {"Optional": typing.Optional, "Dict": dict, "Any": typing.Any, "List": list, "Tuple": tuple}


class _Log:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _module(monkeypatch, name: str, **attrs) -> None:
    monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attrs))


def _written(tmp_path, engine, model="qwen3-235b-a22b", dtype="fp8_w8a8", block=None):
    req = TuneRequest(
        model=load_model(model),
        tp=8,
        ep=1,
        dtype=dtype,
        engines=(engine,),
        out_dir=tmp_path,
        block_shape=block,
        device="cpu",
        device_name=GPU,
        arch="sm_120",
        triton_version=TRITON,
    )
    shape = mc.moe_shape(req.model, engine=engine, tp=8, dtype=dtype, block_shape=block)
    up = {
        m: {
            "BLOCK_SIZE_M": 16 if m < 64 else 64,
            "BLOCK_SIZE_N": 64,
            "BLOCK_SIZE_K": 128,
            "GROUP_SIZE_M": 1,
            "num_warps": 4,
            "num_stages": 3,
        }
        for m in (1, 64, 512)
    }
    down = {m: {**cfg, "BLOCK_SIZE_N": 128} for m, cfg in up.items()}
    timing = {"total_us": 10.0, "up_us": 6.0, "down_us": 4.0}
    results = [BatchResult(m, up[m], timing, up[m], timing, 1, 0, down[m], 4.0) for m in up]
    write_files(req, shape, results, "test")
    return shape, up, down


@pytest.fixture(autouse=True)
def _engine_sources():
    """The engines' lookup code is read from their unpacked wheels: `make test` downloads them (.ci/test_deps.sh)."""
    missing = [str(p) for p in (VLLM_FUSED_MOE, VLLM_PLATFORM_UTILS, SGLANG_CONFIG) if not p.exists()]
    if missing:
        pytest.fail(f"no unpacked engine wheel file {', '.join(missing)}: run `make test`")


@pytest.mark.parametrize("block", [None, (128, 128)])
def test_vllm_lookup_finds_the_written_file(tmp_path, monkeypatch, block):
    shape, up, _ = _written(tmp_path, "vllm", block=block)
    _module(monkeypatch, "vllm.platforms", current_platform=types.SimpleNamespace(get_device_name=lambda i=0: GPU))
    _module(monkeypatch, "vllm.model_executor.layers.fused_moe", get_config=lambda: None)
    import functools
    import json
    import re

    envs = types.SimpleNamespace(VLLM_TUNED_CONFIG_FOLDER=str(tmp_path / "vllm"), VLLM_BATCH_INVARIANT=False)
    ns = {
        "functools": functools,
        "cache": functools.cache,
        "re": re,
        "os": os,
        "json": json,
        "envs": envs,
        "logger": _Log(),
        "Any": object,
    }
    _functions(VLLM_PLATFORM_UTILS, {"get_device_name_as_file_name"}, ns)
    _functions(
        VLLM_FUSED_MOE,
        {"get_config_file_name", "get_moe_configs", "_moe_config_shape", "_get_configured_moe_config"},
        ns,
    )
    configs = ns["get_moe_configs"](shape.num_experts, shape.shard_n, "fp8_w8a8", *(block or (None, None)))
    assert configs == up  # int keys, triton_version dropped
    w2_shape = (shape.num_experts, shape.hidden, shape.shard_n)  # the layer's w2: (E, hidden, N)
    assert ns["_get_configured_moe_config"](w2_shape, "fp8_w8a8", 40, list(block) if block else None) == up[64]


@pytest.mark.parametrize(("model", "block"), [("qwen3-235b-a22b", None), ("deepseek-v3", (128, 128))])
def test_sglang_lookup_finds_the_written_file_and_down_file(tmp_path, monkeypatch, model, block):
    shape, up, down = _written(tmp_path, "sglang", model=model, block=block)
    if model == "deepseek-v3":
        assert shape.num_experts == 257  # the fused shared expert is in the name SGLang looks up
    _module(monkeypatch, "sglang.srt.layers.moe.moe_runner.triton_utils", get_config=lambda: None)
    monkeypatch.setenv("SGLANG_MOE_CONFIG_DIR", str(tmp_path / "sglang"))
    import functools
    import json

    deterministic = types.SimpleNamespace(enable_deterministic_inference=False)
    ns = {
        "functools": functools,
        "os": os,
        "json": json,
        "logger": _Log(),
        **TYPING,
        "triton": types.SimpleNamespace(__version__=TRITON),
        "get_device_name": lambda device_id=0: GPU,
        "get_exec": lambda: types.SimpleNamespace(deterministic=deterministic),
    }
    _functions(SGLANG_CONFIG, {"get_config_file_name", "get_moe_configs", "try_get_optimal_moe_config"}, ns)
    w2_shape = (shape.num_experts, shape.hidden, shape.shard_n)
    config, (down_config, max_block_m) = ns["try_get_optimal_moe_config"](
        (shape.num_experts, 2 * shape.shard_n, shape.hidden),
        w2_shape,
        shape.topk,
        "fp8_w8a8",
        600,
        block_shape=list(block) if block else None,
        return_down_config=True,
    )
    assert config == up[512] and down_config == down[512] and max_block_m == 64


def test_sglang_finds_the_file_from_another_triton_version(tmp_path, monkeypatch):
    """SGLang falls back to the newest other triton_* folder: a file tuned under 3.9.0 still serves 3.10.0."""
    shape, up, _ = _written(tmp_path, "sglang")
    monkeypatch.setenv("SGLANG_MOE_CONFIG_DIR", str(tmp_path / "sglang"))
    import functools
    import json

    deterministic = types.SimpleNamespace(enable_deterministic_inference=False)
    ns = {
        "functools": functools,
        "os": os,
        "json": json,
        "logger": _Log(),
        **TYPING,
        "triton": types.SimpleNamespace(__version__="3.10.0"),
        "get_device_name": lambda i=0: GPU,
        "get_exec": lambda: types.SimpleNamespace(deterministic=deterministic),
    }
    _functions(SGLANG_CONFIG, {"get_config_file_name", "get_moe_configs"}, ns)
    assert ns["get_moe_configs"](shape.num_experts, shape.shard_n, "fp8_w8a8") == up
