"""Multi-head latent attention: deepseek_v3, and with the DSA indexer deepseek_v32 and glm_moe_dsa."""

from __future__ import annotations

from autotune.catalog.adapters.common import (
    Fields,
    _deepseek_ffn,
    _mtp_note,
    _spec,
)
from autotune.specs import AttentionSpec, LayerSpec, ModelSpec

# ---------------------------------------------------------------- MLA (deepseek_v3) and MLA + DSA (v32, glm_moe_dsa)


def mla_model(config: dict, name: str) -> ModelSpec:
    """Multi-head latent attention; with index_n_heads, a DSA lightning indexer selects index_topk entries."""
    cfg = Fields(config)
    hidden, heads, n = cfg.num("hidden_size"), cfg.num("num_attention_heads"), cfg.num("num_hidden_layers")
    q_lora, kv_lora = cfg.num("q_lora_rank", 0), cfg.num("kv_lora_rank")
    nope, rope, v_dim = cfg.num("qk_nope_head_dim"), cfg.num("qk_rope_head_dim"), cfg.num("v_head_dim")
    q_params = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
    mla_params = q_params + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
    index_heads, index_dim = cfg.num("index_n_heads", 0), cfg.num("index_head_dim", 0)
    # indexer: wq_b from the q latent, wk and weights_proj from the hidden state
    indexer_params = (q_lora or hidden) * index_heads * index_dim + hidden * index_dim + hidden * index_heads
    indexer_types = cfg.get("indexer_types") or ["full"] * n  # GLM-5.2 IndexCache: "shared" layers reuse top-k
    # replicated on every TP rank (ReplicatedLinear): q_a and kv_a down-projections (vLLM
    # models/deepseek_v2.py:494-524, fused :1051-1064; SGLang srt/models/deepseek_v2.py:2070-2101) and the whole
    # DSA indexer (vLLM deepseek_v2.py:702-719; SGLang srt/layers/attention/dsa/dsa_indexer.py:344-372)
    down_params = hidden * q_lora + hidden * (kv_lora + rope)

    def attention(i: int) -> AttentionSpec:
        own_index = bool(index_heads) and i < len(indexer_types) and indexer_types[i] == "full"
        return AttentionSpec(
            kind="mla-dsa" if index_heads else "mla",
            num_heads=heads,
            num_kv_heads=cfg.num("num_key_value_heads", heads),
            params=mla_params + (indexer_params if own_index else 0),
            score_dim=nope + rope + v_dim,  # prefill runs non-absorbed MLA
            kv_elems_per_token=kv_lora + rope + (index_dim if own_index else 0),
            kv_read_elems_per_token=kv_lora + rope,
            attended_cap=cfg.num("index_topk", 0) if index_heads else 0,
            latent_shared=True,
            score_dim_decode=kv_lora + rope + kv_lora,  # decode runs absorbed MLA over the latent
            index_heads=index_heads if own_index else 0,
            index_dim=index_dim if own_index else 0,
            replicated_params=down_params + (indexer_params if own_index else 0),
        )

    notes = _mtp_note(cfg)
    if index_heads:
        notes.append(
            f"DSA indexer ({index_heads} heads x {index_dim}) weights are in attention params and its keys in "
            f"kv_elems_per_token at the model KV dtype (engines keep them in fp8 + 4 B scale)"
        )
    return _spec(name, cfg, cfg, [LayerSpec(i, attention(i), _deepseek_ffn(cfg, i)) for i in range(n)], notes)
