"""GQA attention models: llama and qwen3 (dense) and qwen3_moe."""

from __future__ import annotations

from autotune.catalog.adapters.common import (
    Fields,
    _dense_ffn,
    _moe_ffn,
    _spec,
)
from autotune.specs import AttentionSpec, FfnSpec, LayerSpec, ModelSpec

# ---------------------------------------------------------------- GQA (llama, qwen3, qwen3_moe)


def _qwen_ffn(cfg: Fields, index: int) -> FfnSpec:
    hidden, experts = cfg.num("hidden_size"), cfg.num("num_experts", 0)
    sparse_step = cfg.num("decoder_sparse_step", 1)
    if experts and index not in cfg.nums("mlp_only_layers", []) and (index + 1) % sparse_step == 0:
        return _moe_ffn(hidden, cfg.num("moe_intermediate_size"), experts, cfg.num("num_experts_per_tok"), 0)
    return _dense_ffn(hidden, cfg.num("intermediate_size"))


def gqa_model(config: dict, name: str) -> ModelSpec:
    """Llama-style grouped-query attention with a dense or Qwen3-MoE FFN."""
    cfg = Fields(config)
    hidden, heads = cfg.num("hidden_size"), cfg.num("num_attention_heads")
    kv_heads = cfg.num("num_key_value_heads", heads)
    head_dim = cfg.num("head_dim", hidden // heads)
    kv_elems = 2 * kv_heads * head_dim
    attention = AttentionSpec(
        kind="gqa",
        num_heads=heads,
        num_kv_heads=kv_heads,
        params=hidden * head_dim * (2 * heads + 2 * kv_heads),  # q, k, v, o
        score_dim=2 * head_dim,
        kv_elems_per_token=kv_elems,
        kv_read_elems_per_token=kv_elems,
    )
    layers = [LayerSpec(i, attention, _qwen_ffn(cfg, i)) for i in range(cfg.num("num_hidden_layers"))]
    return _spec(name, cfg, cfg, layers, [])
