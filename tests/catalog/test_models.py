"""Catalog models pinned against shared/reference/models.md (exact config values and the derived numbers)."""

import json
from importlib.resources import files

import pytest
import yaml

from autotune.catalog.adapters import ADAPTERS, gqa_model
from autotune.catalog.models import CATALOG, list_models, load_model, model_meta, model_rows
from autotune.specs import MiTuneError, ModelSpec, SpecError, dump_yaml, from_dict

B = 1e9


def catalog_config(name: str) -> dict:
    return json.loads((files("autotune.catalog") / "models" / f"{name}.json").read_text())


def write_config(directory, config: dict):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if k != "_mi_tune"}))
    return path


def models_md_active(spec: ModelSpec) -> int:
    """ModelSpec counts embedding and LM head as active, as models.md and the model cards do."""
    return spec.active_params_decode


# ---------------------------------------------------------------- the JSON copies


# Exact config.json values quoted in models.md (section in the comment).
MODELS_MD_FIELDS = {
    "deepseek-v4.1-flash": {  # section 2 (text_config)
        "hidden_size": 5120, "num_hidden_layers": 40, "vocab_size": 129280, "max_position_embeddings": 1048576,
        "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64,
        "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8, "sliding_window": 128,
        "compress_ratios": [0, 0] + [2] * 18 + [1] * 20 + [0, 0, 0], "kv_source_layer_ids": [2, 8, 14, 20],
        "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36], "candidate_source_layer_id": 20,
        "candidate_topk_blocks": 2048, "candidate_block_size": 8, "index_n_heads": 32, "index_head_dim": 128,
        "index_topk": 512, "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 6,
        "moe_intermediate_size": 2304, "engram_layer_ids": [1, 14], "engram_num_embeddings": [384006168, 384016682],
        "engram_head_dim": 256, "engram_n_heads": 8, "engram_max_ngram_size": 4, "num_nextn_predict_layers": 3,
        "dspark_target_layer_ids": [37, 38, 39], "rms_norm_eps": 1e-20, "compress_rope_theta": 160000,
    },
    "deepseek-v4-flash": {  # section 1
        "hidden_size": 4096, "num_hidden_layers": 43, "vocab_size": 129280, "max_position_embeddings": 1048576,
        "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64,
        "q_lora_rank": 1024, "o_lora_rank": 1024, "o_groups": 8, "sliding_window": 128, "index_n_heads": 64,
        "index_head_dim": 128, "index_topk": 512, "n_routed_experts": 256, "n_shared_experts": 1,
        "num_experts_per_tok": 6, "moe_intermediate_size": 2048, "num_hash_layers": 3, "hc_mult": 4,
        "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0], "num_nextn_predict_layers": 1,
    },
    "deepseek-v3": {  # section 3a
        "hidden_size": 7168, "num_hidden_layers": 61, "first_k_dense_replace": 3, "num_attention_heads": 128,
        "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "moe_intermediate_size": 2048,
        "intermediate_size": 18432, "vocab_size": 129280, "max_position_embeddings": 163840,
        "num_nextn_predict_layers": 1,
    },
    "glm-5": {  # section 4a
        "hidden_size": 6144, "num_hidden_layers": 78, "first_k_dense_replace": 3, "num_attention_heads": 64,
        "num_key_value_heads": 64, "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_head_dim": 256, "index_n_heads": 32, "index_head_dim": 128,
        "index_topk": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048, "intermediate_size": 12288, "scoring_func": "sigmoid", "n_group": 1,
        "routed_scaling_factor": 2.5, "vocab_size": 154880, "max_position_embeddings": 202752,
    },
    "qwen3-235b-a22b": {  # section 5a
        "hidden_size": 4096, "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4,
        "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
        "vocab_size": 151936, "rope_theta": 1000000.0, "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
    },
    "qwen3-235b-a22b-w8a8": {  # section 5a (msModelSlim W8A8 of the same architecture)
        "hidden_size": 4096, "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4,
        "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
        "vocab_size": 151936, "rope_theta": 1000000.0, "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
    },
    "llama-3.1-70b": {  # section 5d
        "hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 28672, "vocab_size": 128256, "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
    },
    "glm-5.3": {  # section 4a: same q_lora / kv_lora / heads / experts / index_topk as GLM-5; 5.x context
        "hidden_size": 6144, "num_hidden_layers": 78, "q_lora_rank": 2048, "kv_lora_rank": 512,
        "num_attention_heads": 64, "n_routed_experts": 256, "num_experts_per_tok": 8, "index_topk": 2048,
        "max_position_embeddings": 1048576,
    },
    "glm-5.3-flash": {  # section 4b (warp docs/GLM.md)
        "hidden_size": 4096, "num_hidden_layers": 45, "first_k_dense_replace": 3, "n_routed_experts": 288,
        "num_experts_per_tok": 8, "n_shared_experts": 1, "moe_intermediate_size": 2048, "num_attention_heads": 64,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 256, "v_head_dim": 256, "qk_rope_head_dim": 0,
        "index_kpool": 4, "index_topk": 2048, "hc_mult": 4, "swiglu_limit": 10.0, "vocab_size": 154880,
        "max_position_embeddings": 1048576,
    },
    **{
        name: {  # the Qwen3.5-397B-A17B config.json values quoted in public material (catalog source)
            "hidden_size": 4096, "num_hidden_layers": 60, "num_attention_heads": 32, "num_key_value_heads": 2,
            "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 64, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "num_experts": 512, "num_experts_per_tok": 10,
            "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024, "vocab_size": 248320,
            "max_position_embeddings": 262144, "full_attention_interval": 4, "mtp_num_hidden_layers": 1,
        }
        for name in ("qwen3.5-397b-a17b", "qwen3.5-397b-a17b-fp8", "qwen3.5-397b-a17b-awq")
    },
    "qwen3.5-35b-a3b": {
        "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16, "num_key_value_heads": 2,
        "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32, "num_experts": 256,
        "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "vocab_size": 248320, "mamba_ssm_dtype": "float32",
    },
}  # fmt: skip


@pytest.mark.parametrize("name", CATALOG)
def test_json_copy_has_the_models_md_values(name):
    config = catalog_config(name)
    text = config.get("text_config", config)
    assert {key: text[key] for key in MODELS_MD_FIELDS[name]} == MODELS_MD_FIELDS[name]
    meta = config["_mi_tune"]
    assert meta["name"] == name and meta["hf_id"] and meta["revision"]
    assert "models.md" in meta["source"] or "huggingface.co/" in meta["source"]


def test_v41_copy_keeps_hf_nesting_and_pinned_revision():
    config = catalog_config("deepseek-v4.1-flash")
    assert config["model_type"] == "deepseek_v41" and config["text_config"]["model_type"] == "deepseek_v41_text"
    assert config["vision_config"]["num_hidden_layers"] == 32
    assert config["quantization_config"] == {
        "quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
        "scale_fmt": "ue8m0", "expert_dtype": "fp4",
    }  # fmt: skip
    assert model_meta("DeepSeek-V4.1-Flash")["revision"] == "dba1be0a40aa45a94ad051997016db3960a90277"


# ---------------------------------------------------------------- derived numbers (models.md "computed")


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("deepseek-v4.1-flash", 551.4, 16.3),
        ("deepseek-v4-flash", 284.3, 13.7),
        ("deepseek-v3", 670.9, 37.4),
        ("glm-5", 743.8, 41.7),
        ("qwen3-235b-a22b", 235.0, 22.1),
        ("llama-3.1-70b", 70.6, 70.6),
    ],
)
def test_params_match_models_md(name, total_b, active_b):
    spec = load_model(name)
    assert spec.total_params / B == pytest.approx(total_b, rel=0.005)
    assert models_md_active(spec) / B == pytest.approx(active_b, rel=0.01)


def test_v41_flash_ced_kv_and_engram():
    spec = load_model("deepseek-v4.1-flash")
    assert spec.num_layers == 40 and spec.is_moe and spec.num_experts == 384
    assert spec.active_params_prefill / B == pytest.approx(8.1, rel=0.015)
    assert [layer.in_prefill for layer in spec.layers] == [True] * 20 + [False] * 20
    assert spec.kv_bytes_per_token("auto") == 890
    assert spec.kv_bytes_per_token("fp4") == 890
    assert spec.kv_bytes_per_token("bf16") == 3200
    assert spec.kv_bytes_per_token("fp8") == 1600
    owners = {
        layer.index: layer.attention.kv_elems_per_token for layer in spec.layers if layer.attention.kv_elems_per_token
    }
    assert owners == {2: 320, 8: 320, 14: 320, 20: 640}
    assert [layer.attention.window_only for layer in spec.layers[:3]] == [True, True, False]
    assert {layer.attention.attended_cap for layer in spec.layers[2:]} == {512}
    assert {layer.attention.score_dim for layer in spec.layers} == {1024}
    assert spec.window_kv_elems_per_seq == 40 * 128 * 512
    assert spec.host_table_bytes == (384006168 + 384016682) * 264
    assert spec.host_table_bytes / 2**30 == pytest.approx(188.8, abs=0.05)
    assert (spec.dense_dtype, spec.expert_dtype, spec.kv_dtype) == ("fp8", "fp4", "fp4")
    assert spec.layers[5].ffn.expert_params == 3 * 5120 * 2304
    assert any("MTP" in note for note in spec.notes) and any("vision" in note for note in spec.notes)


def test_v41_fp4_kv_bytes_are_derived_without_the_catalog_figure(tmp_path):
    spec = load_model(str(write_config(tmp_path / "DeepSeek-V4.1-Flash", catalog_config("deepseek-v4.1-flash"))))
    assert spec.kv_bytes_per_token("auto") == 890  # 1280 x (0.5 + 1/16) + 320 x (0.5 + 1/32)
    assert spec.name == "DeepSeek-V4.1-Flash" and spec.hf_id == ""


def test_v4_flash_csa_hca_swa_layers():
    spec = load_model("deepseek-v4-flash")
    kinds = [layer.attention.kind for layer in spec.layers]
    assert kinds == ["swa", "swa"] + ["csa", "hca"] * 20 + ["csa"]
    csa, hca = spec.layers[2].attention, spec.layers[3].attention
    assert (csa.kv_elems_per_token, csa.compress_ratio, csa.attended_cap) == (160, 4, 512)
    assert (hca.kv_elems_per_token, hca.compress_ratio, hca.attended_cap) == (4, 128, 0)
    assert spec.kv_elems_per_token == 3440 and spec.kv_bytes_per_token("bf16") == 6880
    assert spec.window_kv_elems_per_seq == 43 * 128 * 512
    assert (spec.dense_dtype, spec.expert_dtype, spec.kv_dtype) == ("fp8", "fp4", "fp8")


def test_v3_mla_kv_and_layers():
    spec = load_model("deepseek-v3")
    assert [layer.ffn.kind for layer in spec.layers[:4]] == ["dense", "dense", "dense", "moe"]
    attention = spec.layers[0].attention
    assert attention.kv_elems_per_token * 2 == 1152  # (kv_lora + rope) bf16 per token per layer
    assert (attention.kv_read_elems_per_token, attention.score_dim, attention.latent_shared) == (576, 320, True)
    assert spec.kv_bytes_per_token("bf16") / 1e3 == pytest.approx(70.3, abs=0.05)
    assert spec.layers[3].ffn.expert_params == 44_040_192
    assert (spec.dense_dtype, spec.expert_dtype, spec.kv_dtype) == ("fp8", "fp8", "bf16")


def test_glm5_dsa_indexer():
    spec = load_model("glm-5")
    attention = spec.layers[0].attention
    assert (attention.kind, attention.attended_cap, attention.score_dim) == ("mla-dsa", 2048, 512)
    assert attention.kv_elems_per_token == 512 + 64 + 128  # latent + rope + index key
    assert sum(layer.ffn.kind == "dense" for layer in spec.layers) == 3
    assert spec.dense_dtype == spec.expert_dtype == "bf16"


def test_gqa_kv_per_layer():
    qwen, llama = load_model("qwen3-235b-a22b"), load_model("llama-3.1-70b")
    assert qwen.layers[0].attention.kv_elems_per_token * 2 == 2048
    assert qwen.kv_bytes_per_token("bf16") / 1e3 == pytest.approx(192.5, abs=0.1)  # models.md: 188 KiB
    assert all(layer.ffn.kind == "moe" and layer.ffn.params == 0 for layer in qwen.layers)
    assert llama.layers[0].attention.kv_elems_per_token * 2 == 4096 and not llama.is_moe
    assert llama.kv_bytes_per_token("bf16") == 80 * 4096


# ---------------------------------------------------------------- loading, errors, round trip


def test_list_models_and_rows_in_catalog_order():
    assert [spec.name for spec in list_models()] == list(CATALOG)
    rows = model_rows()
    assert [row["name"] for row in rows] == list(CATALOG)
    assert set(rows[0]) == {
        "name", "family", "total_params_b", "active_params_b", "kv_bytes_per_token", "state_bytes_per_seq", "hf_id"
    }  # fmt: skip
    assert rows[0]["state_bytes_per_seq"] == 0
    assert {r["name"]: r["state_bytes_per_seq"] for r in rows}["qwen3.5-35b-a3b"] == 30 * (32 * 128**2 * 4 + 8192 * 6)
    assert rows[0]["kv_bytes_per_token"] == 890 and rows[0]["hf_id"] == "deepseek-ai/DeepSeek-V4.1-Flash"


def test_names_and_hf_ids_are_case_insensitive():
    assert load_model("  DeepSeek-V3 ") is load_model("deepseek-v3")
    assert load_model("deepseek-ai/deepseek-v4.1-flash") is load_model("deepseek-v4.1-flash")


def test_unknown_name_lists_the_catalog():
    with pytest.raises(MiTuneError) as err:
        load_model("no-such-model")
    message = str(err.value)
    assert message.startswith("unknown model 'no-such-model' (known: deepseek-v4.1-flash, deepseek-v4-flash,")
    assert "qwen3.5-35b-a3b; or a path to a config.json)" in message and "\n" not in message


def test_path_to_config_or_directory(tmp_path):
    path = write_config(tmp_path / "Qwen3-235B-A22B", catalog_config("qwen3-235b-a22b"))
    by_file, by_dir = load_model(str(path)), load_model(str(path.parent))
    assert by_file == by_dir and by_file.name == "Qwen3-235B-A22B"
    assert by_file.total_params == load_model("qwen3-235b-a22b").total_params


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model_type": "foo"}, "model_type 'foo' is not supported (supported: deepseek_v3, deepseek_v32,"),
        ({"hidden_size": 1}, "missing field 'model_type'"),
        ({"model_type": "llama", "num_attention_heads": 8}, "missing field 'hidden_size'"),
        ({"model_type": "llama", "hidden_size": "big"}, "field 'hidden_size': expected an integer, got 'big'"),
        ({"model_type": "deepseek_v41", "text_config": {}}, "missing field 'text_config.hidden_size'"),
    ],
)
def test_bad_config_gives_one_line_naming_the_file(tmp_path, config, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(SpecError) as err:
        load_model(str(path))
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(SpecError, match="nope.json: file not found"):
        load_model(str(tmp_path / "nope.json"))


def test_a_new_family_is_one_registry_entry(tmp_path, monkeypatch):
    monkeypatch.setitem(ADAPTERS, "mistral", gqa_model)
    config = {k: v for k, v in catalog_config("llama-3.1-70b").items() if k != "_mi_tune"}
    spec = load_model(str(write_config(tmp_path / "m", {**config, "model_type": "mistral"})))
    assert spec.family == "mistral" and spec.total_params == load_model("llama-3.1-70b").total_params


@pytest.mark.parametrize("name", CATALOG)
def test_specs_round_trip_through_yaml(name):
    spec = load_model(name)
    assert from_dict(ModelSpec, yaml.safe_load(dump_yaml(spec)), name) == spec
