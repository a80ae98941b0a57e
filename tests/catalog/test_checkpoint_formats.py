"""Checkpoint formats read from quantization_config (issue 16): ModelOpt FP8, compressed-tensors, ModelOpt's
ignore list, a top-level expert_dtype under any method, Qwen3.5's mtp_num_hidden_layers."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from autotune.catalog.models import model_from_config


def _config(name: str, **changes) -> dict:
    config = json.loads(files("autotune.catalog").joinpath("models", f"{name}.json").read_text())
    config.pop("_mi_tune", None)
    config.update(changes)
    return config


def _spec(tmp_path, config: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return model_from_config(path)


def test_modelopt_fp8_is_accepted(tmp_path):
    spec = _spec(
        tmp_path, _config("llama-3.1-70b", quantization_config={"quant_method": "modelopt", "quant_algo": "FP8"})
    )
    assert (spec.dense_dtype, spec.dense_format) == ("fp8", "fp8_tensor")


@pytest.mark.parametrize(
    ("weights", "dtype", "fmt"),
    [
        ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32}, "int4", "int4_gptq"),
        ({"num_bits": 8, "type": "float", "strategy": "block"}, "fp8", "fp8_block"),
        ({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}, "fp4", "nvfp4"),
    ],
)
def test_compressed_tensors_is_read_by_its_weight_scheme(tmp_path, weights, dtype, fmt):
    quant = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": weights}}}
    spec = _spec(tmp_path, _config("deepseek-v3", quantization_config=quant))
    assert (spec.expert_dtype, spec.expert_format) == (dtype, fmt)


def test_ignored_attention_keeps_the_dense_group_wide(tmp_path):
    """Kimi-K2-style INT4 experts (compressed-tensors) and NVFP4 ModelOpt checkpoints that leave attention out."""
    weights = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32}
    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": weights}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
    }
    spec = _spec(tmp_path, _config("deepseek-v3", quantization_config=quant, torch_dtype="bfloat16"))
    assert (spec.dense_dtype, spec.expert_dtype, spec.expert_format) == ("bf16", "int4", "int4_gptq")
    nvfp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head", "model.layers.*.self_attn*"]}
    spec = _spec(tmp_path, _config("deepseek-v3", quantization_config=nvfp4, torch_dtype="bfloat16"))
    assert (spec.dense_dtype, spec.expert_dtype) == ("bf16", "fp4")


def test_top_level_expert_dtype_is_read_under_any_method(tmp_path):
    quant = {"quant_method": "modelopt", "quant_algo": "FP8"}
    spec = _spec(tmp_path, _config("deepseek-v3", quantization_config=quant, expert_dtype="fp4"))
    assert (spec.dense_dtype, spec.expert_dtype, spec.expert_format) == ("fp8", "fp4", "mxfp4")


def test_qwen35_mtp_head_is_read(tmp_path):
    spec = _spec(tmp_path, _config("qwen3-235b-a22b", mtp_num_hidden_layers=1))
    assert "mtp" in spec.draft_heads
