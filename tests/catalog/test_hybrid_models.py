"""Hybrid linear-attention families (qwen3_5_moe, glm5_next): adapter conformance against the published totals."""

import json
from importlib.resources import files

import pytest

from autotune.catalog.models import load_model, model_from_config
from autotune.specs import SpecError

B = 1e9
MIB = 2**20


def catalog_config(name: str) -> dict:
    return json.loads((files("autotune.catalog") / "models" / f"{name}.json").read_text())


def write(tmp_path, config: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if k != "_mi_tune"}))
    return path


@pytest.mark.parametrize(
    ("name", "total_b", "active_b", "rel"),
    [
        # model cards: 397B / 17B, 35B / 3B, 320B / 18B (WASTE counts GLM-5.3-Flash at 313.33B / 16.74B, embedding
        # once: models.md 4b); GLM-5.3 743.8B computed as GLM-5 (models.md 4a)
        ("qwen3.5-397b-a17b", 397, 17, 0.02),
        ("qwen3.5-35b-a3b", 35, 3, 0.15),
        ("glm-5.3-flash", 313.33, 16.74, 0.04),
        ("glm-5.3", 743.8, 41.7, 0.01),
    ],
)
def test_params_match_the_published_totals(name, total_b, active_b, rel):
    spec = load_model(name)
    assert spec.total_params / B == pytest.approx(total_b, rel=0.01 if name != "qwen3.5-35b-a3b" else 0.02)
    assert spec.active_params_decode / B == pytest.approx(active_b, rel=rel)


def test_qwen35_layout_kv_and_state():
    spec = load_model("qwen3.5-397b-a17b")
    kinds = [layer.attention.kind for layer in spec.layers]
    assert kinds == ["gdn", "gdn", "gdn", "gqa"] * 15 and spec.is_hybrid
    # KV only on the 15 full layers: 2 x 2 KV heads x 256 x bf16 = 2 KiB each -> 30 KiB/token (the published
    # "KV cache 30 KiB" of Qwen3.5-397B)
    assert spec.kv_bytes_per_token("auto") == 15 * 2 * 2 * 256 * 2 == 30 * 1024
    # GDN state: 64 value heads x 128 x 128 fp32 (mamba_ssm_dtype) + conv (2*16*128 + 64*128) x 3 bf16, x 45
    per_layer = 64 * 128 * 128 * 4 + (2 * 16 * 128 + 64 * 128) * 3 * 2
    assert spec.state_bytes_per_seq() == 45 * per_layer
    assert spec.state_dtype == "fp32" and "mtp" in spec.draft_heads
    assert spec.layers[0].ffn.num_experts == 512 and spec.layers[0].ffn.experts_per_token == 10
    assert spec.layers[0].ffn.params == 3 * 4096 * 1024  # the shared expert


def test_qwen35_small_state_matches_the_engines_formula():
    # one GDN layer of Qwen3.5-35B-A3B: 32 x 128 x 128 fp32 temporal state + (2*16*128 + 32*128) x 3 bf16 conv
    spec = load_model("qwen3.5-35b-a3b")
    assert spec.state_bytes_per_seq() == 30 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2)
    assert spec.kv_bytes_per_token("auto") == 10 * 2 * 2 * 256 * 2


def test_glm53_flash_layout_kv_and_state():
    spec = load_model("glm-5.3-flash")
    kda = [layer.index for layer in spec.layers if layer.attention.kind == "kda"]
    assert len(kda) == 34 and [i for i in range(45) if i not in kda] == list(range(3, 45, 4))
    mla = spec.layers[3].attention
    # KV: 512-wide latent (no rope) + one 128-wide index key per 4-token pool, 11 layers (models.md 4b: 11 KB bf16)
    assert mla.kv_elems_per_token == 512 + 128 / 4 and mla.attended_cap == 2048
    assert spec.kv_bytes_per_token("bf16") == 11 * (512 + 32) * 2
    # KDA state 64 x 128 x 128 fp32 (vLLM kda_state_dtype default) + q/k/v conv windows (3 x 8192 x 3 bf16)
    assert spec.state_bytes_per_seq() == 34 * (64 * 128 * 128 * 4 + 3 * 8192 * 3 * 2)
    assert spec.state_bytes_per_seq() / MIB == pytest.approx(140.8, abs=0.1)
    assert (spec.dense_format, spec.expert_format) == ("fp8_block", "fp8_block")
    assert [layer.ffn.kind for layer in spec.layers[:4]] == ["dense", "dense", "dense", "moe"]


@pytest.mark.parametrize(
    ("name", "formats"),
    [("qwen3.5-397b-a17b-awq", ("int4", "int4_awq")), ("qwen3.5-397b-a17b-fp8", ("fp8", "fp8_block"))],
)
def test_quantised_qwen35_checkpoints(name, formats):
    spec = load_model(name)
    assert (spec.dense_dtype, spec.dense_format) == formats
    assert spec.total_params == load_model("qwen3.5-397b-a17b").total_params
    dense, experts = spec.weight_bytes()
    assert (dense + experts) / B < (400 if formats[0] == "fp8" else 220)


def test_the_same_from_a_config_json_path(tmp_path):
    for name in ("qwen3.5-397b-a17b", "glm-5.3-flash"):
        path = write(tmp_path, catalog_config(name))
        spec = model_from_config(path)
        assert spec.total_params == load_model(name).total_params and spec.is_hybrid


def test_flat_text_config_and_layer_types_default(tmp_path):
    """A text-only Qwen3.5 MoE config (fields at the top) with no layer_types: every 4th layer full."""
    text = dict(catalog_config("qwen3.5-35b-a3b")["text_config"])
    del text["layer_types"]
    spec = model_from_config(write(tmp_path, text))
    assert [layer.attention.kind for layer in spec.layers[:4]] == ["gdn", "gdn", "gdn", "gqa"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.update(linear_num_value_heads=0), "linear_num_value_heads': expected a positive integer"),
        (lambda t: t.update(linear_num_value_heads=24), "is not a multiple of 16 key heads"),
        (lambda t: t.update(layer_types=["linear_attention"]), "layer_types': expected 40 entries"),
        (lambda t: t.update(mamba_ssm_dtype="int3"), "mamba_ssm_dtype': expected one of"),
        (lambda t: t.pop("linear_key_head_dim"), "missing field 'text_config.linear_key_head_dim'"),
    ],
)
def test_nonsense_qwen35_fields_are_refused_naming_the_file(tmp_path, edit, message):
    config = catalog_config("qwen3.5-35b-a3b")
    edit(config["text_config"])
    path = write(tmp_path, config)
    with pytest.raises(SpecError) as err:
        model_from_config(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_nonsense_kda_layers_are_refused(tmp_path):
    config = catalog_config("glm-5.3-flash")
    config["text_config"]["linear_attn_config"]["kda_layers"] = [0, 99]
    with pytest.raises(SpecError, match="kda_layers': indices outside 0..44"):
        model_from_config(write(tmp_path, config))
