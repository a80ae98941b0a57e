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


def _mixed(expert_algo: str) -> dict:
    """A ModelOpt MIXED_PRECISION quantization_config (NVIDIA's NVFP4 2.0 layout): routed experts in
    `expert_algo`, attention and shared experts FP8, the linear-attention gates excluded."""
    layers = {
        "model.layers.0.mlp.experts.0.gate_proj": {"quant_algo": expert_algo, "group_size": 16},
        "model.layers.0.mlp.shared_experts.gate_proj": {"quant_algo": "FP8"},
        "model.layers.0.self_attn.q_a_proj": {"quant_algo": "FP8"},
    }
    return {
        "quant_method": "modelopt",
        "quant_algo": "MIXED_PRECISION",
        "quantized_layers": layers,
        "exclude_modules": ["lm_head", "*linear_attn.in_proj_a*", "*linear_attn.in_proj_b*"],
    }


@pytest.mark.parametrize(("algo", "fmt"), [("NVFP4", "nvfp4"), ("W4A16_NVFP4", "nvfp4_w4a16")])
def test_modelopt_mixed_precision_is_read_per_layer_group(tmp_path, algo, fmt):
    spec = _spec(tmp_path, _config("deepseek-v3", quantization_config=_mixed(algo), torch_dtype="bfloat16"))
    assert (spec.dense_dtype, spec.dense_format) == ("fp8", "fp8_tensor")
    assert (spec.expert_dtype, spec.expert_format) == ("fp4", fmt)


def test_modelopt_mixed_precision_without_layers_is_one_line_error(tmp_path):
    from autotune.specs.errors import SpecError

    quant = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}
    with pytest.raises(SpecError, match="quantized_layers"):
        _spec(tmp_path, _config("deepseek-v3", quantization_config=quant))


def test_awq_modules_to_not_convert_keep_attention_wide(tmp_path):
    quant = {"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["self_attn", "gate"]}
    spec = _spec(tmp_path, _config("deepseek-v3", quantization_config=quant, torch_dtype="bfloat16"))
    assert (spec.dense_dtype, spec.expert_dtype, spec.expert_format) == ("bf16", "int4", "int4_awq")


def test_dense_qwen3_awq_is_read(tmp_path):
    """Dense Qwen3 (model_type qwen3, Qwen3ForCausalLM) loads through the GQA adapter: no MoE layers, Qwen3-8B's
    8.19B parameters (hf.co/Qwen/Qwen3-8B: "Number of Parameters: 8.2B"), and an AWQ checkpoint's linears INT4."""
    from pathlib import Path

    fixture = Path(__file__).parents[1] / "fixtures" / "qwen3-dense" / "qwen3-8b" / "config.json"
    config = {k: v for k, v in json.loads(fixture.read_text()).items() if not k.startswith("_")}
    bf16 = _spec(tmp_path, config)
    assert bf16.family == "qwen3" and not bf16.is_moe and len(bf16.layers) == 36
    assert bf16.total_params / 1e9 == pytest.approx(8.19, abs=0.02)
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}
    spec = _spec(tmp_path, {**config, "quantization_config": awq})
    assert (spec.dense_dtype, spec.dense_format) == ("int4", "int4_awq")
