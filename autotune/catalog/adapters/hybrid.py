"""Hybrid linear-attention families: Qwen3.5 MoE (qwen3_5_moe: Gated DeltaNet + gated full attention) and
GLM-5.3-Flash (glm5_next: Kimi Delta Attention + MLA with a k-pool DSA indexer, mHC residual streams).

A linear-attention layer keeps a fixed recurrent state per request (value heads x d_k x d_v) and a short
convolution window ((kernel - 1) x conv channels) instead of KV per token (AttentionSpec.state_elems_per_seq).
Field meanings: SGLang srt/configs/qwen3_5.py (Qwen3_5TextConfig extends srt/configs/qwen3_next.py) and
srt/configs/glm5_next.py (Glm5NextTextConfig, linear_attn_config); layer structure as built by vLLM
model_executor/models/qwen3_next.py / qwen3_5.py and SGLang srt/models/glm5_next.py:343-580.
"""

from __future__ import annotations

import dataclasses

from autotune.catalog.adapters.common import Fields, _deepseek_ffn, _moe_ffn, _spec
from autotune.specs import AttentionSpec, FfnSpec, LayerSpec, ModelSpec, SpecError

LINEAR, FULL = "linear_attention", "full_attention"
# the SSM-state dtype names config.json's mamba_ssm_dtype may carry (vLLM models/config.py:1293-1306 reads it;
# SGLang srt/configs/mamba_utils.py:47-90 defaults to float32 without it)
_STATE_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _positive(cfg: Fields, key: str, default=None) -> int:
    value = cfg.num(key) if default is None else cfg.num(key, default)
    if value < 1:
        raise SpecError(f"field '{cfg.prefix}{key}': expected a positive integer, got {value}")
    return value


def _layer_types(cfg: Fields, n: int, interval_key: str | None) -> list[str]:
    """Per-layer kinds: `layer_types` when given, else every `interval`-th layer full (Qwen3-Next default 4)."""
    types = cfg.get("layer_types")
    if types is None:
        interval = _positive(cfg, interval_key, 4) if interval_key else 4
        return [FULL if (i + 1) % interval == 0 else LINEAR for i in range(n)]
    if not isinstance(types, list) or len(types) != n:
        raise SpecError(f"field '{cfg.prefix}layer_types': expected {n} entries (num_hidden_layers), got {types!r}")
    return [LINEAR if t == LINEAR else FULL for t in types]


def _state_dtype(cfg: Fields) -> str:
    name = cfg.get("mamba_ssm_dtype", "float32")
    if name not in _STATE_DTYPES:
        raise SpecError(
            f"field '{cfg.prefix}mamba_ssm_dtype': expected one of {', '.join(_STATE_DTYPES)}, got {name!r}"
        )
    return _STATE_DTYPES[name]


# ---------------------------------------------------------------- Qwen3.5 MoE (Gated DeltaNet)


def _gdn(cfg: Fields) -> AttentionSpec:
    """Gated DeltaNet: in_proj_qkvz (q, k over key heads; v, z gate over value heads), in_proj_ba (beta, alpha
    per value head), depthwise conv over q/k/v channels, out_proj (vLLM models/qwen3_next.py, qwen3_5.py:226-229).
    Heads split over TP (linear key and value heads both)."""
    hidden = cfg.num("hidden_size")
    nk, nv = _positive(cfg, "linear_num_key_heads"), _positive(cfg, "linear_num_value_heads")
    dk, dv = _positive(cfg, "linear_key_head_dim"), _positive(cfg, "linear_value_head_dim")
    kernel = _positive(cfg, "linear_conv_kernel_dim", 4)
    if nv % nk:
        raise SpecError(f"field '{cfg.prefix}linear_num_value_heads': {nv} is not a multiple of {nk} key heads")
    conv_dim = 2 * nk * dk + nv * dv
    params = hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv + conv_dim * kernel + nv * dv * hidden
    return AttentionSpec(
        kind="gdn",
        num_heads=nv,
        num_kv_heads=nk,
        params=params,
        score_dim=dk + dv,
        kv_elems_per_token=0.0,
        kv_read_elems_per_token=0.0,
        state_elems_per_seq=nv * dk * dv,
        conv_elems_per_seq=(kernel - 1) * conv_dim,
    )


def _gated_attention(cfg: Fields) -> AttentionSpec:
    """Full GQA attention; attn_output_gate doubles q_proj (a sigmoid gate per head: vLLM qwen3_next.py)."""
    hidden, heads = cfg.num("hidden_size"), _positive(cfg, "num_attention_heads")
    kv_heads, head_dim = _positive(cfg, "num_key_value_heads", heads), _positive(cfg, "head_dim", hidden // heads)
    gate = 2 if cfg.get("attn_output_gate", True) else 1
    return AttentionSpec(
        kind="gqa",
        num_heads=heads,
        num_kv_heads=kv_heads,
        params=hidden * head_dim * (gate * heads + 2 * kv_heads) + heads * head_dim * hidden,
        score_dim=2 * head_dim,
        kv_elems_per_token=2 * kv_heads * head_dim,
        kv_read_elems_per_token=2 * kv_heads * head_dim,
    )


def _qwen35_ffn(cfg: Fields, index: int) -> FfnSpec:
    hidden, experts = cfg.num("hidden_size"), cfg.num("num_experts", 0)
    if not experts:
        return FfnSpec("dense", 3 * hidden * _positive(cfg, "intermediate_size"))
    moe = _moe_ffn(hidden, _positive(cfg, "moe_intermediate_size"), experts, _positive(cfg, "num_experts_per_tok"), 0)
    shared = 3 * hidden * cfg.num("shared_expert_intermediate_size", 0)  # one shared expert of its own width
    return FfnSpec("moe", shared, moe.num_experts, moe.experts_per_token, moe.expert_params)


def qwen35_moe_model(config: dict, name: str) -> ModelSpec:
    """Qwen3.5 MoE: the text model under text_config; 3 Gated DeltaNet layers to 1 gated-attention layer."""
    root = Fields(config)
    cfg = root.sub("text_config") if isinstance(config.get("text_config"), dict) else root
    n = _positive(cfg, "num_hidden_layers")
    types = _layer_types(cfg, n, "full_attention_interval")
    gdn, full = _gdn(cfg), _gated_attention(cfg)
    layers = [LayerSpec(i, gdn if t == LINEAR else full, _qwen35_ffn(cfg, i)) for i, t in enumerate(types)]
    mtp = cfg.num("mtp_num_hidden_layers", 0)
    vision = root.get("vision_config", {}).get("depth")
    notes = [
        f"{types.count(LINEAR)} Gated DeltaNet layers (state {gdn.num_heads} x {cfg.num('linear_key_head_dim')} x "
        f"{cfg.num('linear_value_head_dim')} per request) and {types.count(FULL)} full-attention layers (KV)",
        *([f"{mtp} MTP layer(s) (mtp_num_hidden_layers) left out of layers"] if mtp else []),
        *([f"vision tower ({vision} blocks) left out"] if vision else []),
    ]
    spec = _spec(name, root, cfg, layers, notes, state_dtype=_state_dtype(cfg))
    if mtp:  # Qwen3.5 declares its MTP head as mtp_num_hidden_layers, not num_nextn_predict_layers
        return _with_mtp(spec)
    return spec


def _with_mtp(spec: ModelSpec) -> ModelSpec:
    heads = spec.draft_heads if "mtp" in spec.draft_heads else ("mtp", *spec.draft_heads)
    return dataclasses.replace(spec, draft_heads=heads)


# ---------------------------------------------------------------- GLM-5.3-Flash (KDA + MLA/DSA)


def _kda(cfg: Fields) -> AttentionSpec:
    """Kimi Delta Attention (SGLang srt/models/glm5_next.py:343-580): q/k/v projections (heads x head_dim each),
    low-rank forget gate f_a/f_b and output gate g_a/g_b (f_a, g_a replicated), beta b_proj, per-channel conv
    over q/k/v, o_proj. State heads x head_dim x head_dim per request."""
    hidden = cfg.num("hidden_size")
    lin = cfg.get("linear_attn_config") or {}
    if not isinstance(lin, dict):
        raise SpecError(f"field '{cfg.prefix}linear_attn_config': expected a mapping, got {lin!r}")
    lc = Fields(lin, f"{cfg.prefix}linear_attn_config.")
    heads = _positive(lc, "num_heads", cfg.num("linear_num_heads", 64))
    head_dim = _positive(lc, "head_dim", cfg.num("linear_head_dim", 128))
    kernel = _positive(lc, "short_conv_kernel_size", cfg.num("linear_conv_kernel_dim", 4))
    proj = heads * head_dim
    low_rank_down = 2 * hidden * head_dim  # f_a, g_a: ReplicatedLinear (glm5_next.py:486-517)
    params = 3 * hidden * proj + low_rank_down + 2 * head_dim * proj + hidden * heads + 3 * proj * kernel
    params += proj * hidden
    return AttentionSpec(
        kind="kda",
        num_heads=heads,
        num_kv_heads=heads,
        params=params,
        score_dim=2 * head_dim,
        kv_elems_per_token=0.0,
        kv_read_elems_per_token=0.0,
        replicated_params=low_rank_down,
        state_elems_per_seq=heads * head_dim * head_dim,
        conv_elems_per_seq=(kernel - 1) * 3 * proj,
    )


def _glm_mla(cfg: Fields) -> AttentionSpec:
    """MLA (no RoPE: qk_rope_head_dim 0) with the DSA indexer scoring pools of index_kpool tokens: one pooled
    index key per index_kpool tokens (warp docs/GLM.md, "k-pool flavour"), top index_topk tokens attended."""
    hidden, heads = cfg.num("hidden_size"), _positive(cfg, "num_attention_heads")
    q_lora, kv_lora = cfg.num("q_lora_rank", 0), _positive(cfg, "kv_lora_rank")
    nope, rope, v_dim = _positive(cfg, "qk_nope_head_dim"), cfg.num("qk_rope_head_dim", 0), _positive(cfg, "v_head_dim")
    q_params = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
    mla = q_params + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
    index_heads, index_dim = cfg.num("index_n_heads", 0), cfg.num("index_head_dim", 0)
    pool = _positive(cfg, "index_kpool", 1)
    indexer = (q_lora or hidden) * index_heads * index_dim + hidden * index_dim + hidden * index_heads
    down = hidden * q_lora + hidden * (kv_lora + rope)
    return AttentionSpec(
        kind="mla-dsa" if index_heads else "mla",
        num_heads=heads,
        num_kv_heads=cfg.num("num_key_value_heads", heads),
        params=mla + indexer,
        score_dim=nope + rope + v_dim,
        kv_elems_per_token=kv_lora + rope + index_dim / pool,
        kv_read_elems_per_token=kv_lora + rope,
        attended_cap=cfg.num("index_topk", 0) if index_heads else 0,
        latent_shared=True,
        score_dim_decode=kv_lora + rope + kv_lora,
        index_heads=index_heads,
        index_dim=index_dim,
        index_pool=pool,
        replicated_params=down + indexer,
    )


def glm5_next_model(config: dict, name: str) -> ModelSpec:
    """GLM-5.3-Flash: KDA layers per linear_attn_config.kda_layers (or layer_types), MLA+DSA on the others."""
    root = Fields(config)
    cfg = root.sub("text_config") if isinstance(config.get("text_config"), dict) else root
    n = _positive(cfg, "num_hidden_layers")
    lin = cfg.get("linear_attn_config")
    if isinstance(lin, dict) and lin.get("kda_layers") is not None:
        kda = set(Fields(lin, f"{cfg.prefix}linear_attn_config.").nums("kda_layers"))
        if any(i < 0 or i >= n for i in kda):
            raise SpecError(f"field '{cfg.prefix}linear_attn_config.kda_layers': indices outside 0..{n - 1}")
        types = [LINEAR if i in kda else FULL for i in range(n)]
    else:  # SGLang srt/configs/glm5_next.py:200-214: layer_types, else every 4th layer (i % 4 == 3) full
        types = cfg.get("layer_types") and _layer_types(cfg, n, None)
        types = types or [FULL if i % 4 == 3 else LINEAR for i in range(n)]
    kda_att, mla_att = _kda(cfg), _glm_mla(cfg)
    layers = [LayerSpec(i, kda_att if t == LINEAR else mla_att, _deepseek_ffn(cfg, i)) for i, t in enumerate(types)]
    mtp = cfg.num("num_nextn_predict_layers", 0)
    notes = [
        f"{types.count(LINEAR)} KDA layers (state {kda_att.num_heads} x {kda_att.score_dim // 2} x "
        f"{kda_att.score_dim // 2} per request) and {types.count(FULL)} MLA + DSA layers (KV, index keys pooled "
        f"by {cfg.num('index_kpool', 1)})",
        f"mHC: {cfg.num('hc_mult', 1)} residual streams; their mixing projections are not in params",
        *([f"{mtp} MTP / next-token-prediction layer(s) left out of layers"] if mtp else []),
        *(["vision tower left out"] if root.get("vision_config") else []),
    ]
    return _spec(name, root, cfg, layers, notes, state_dtype=_state_dtype(cfg))
