"""DeepSeek-V4 family: CSA/HCA (deepseek_v4) and CSA2 + CED + Engram (deepseek_v41)."""

from __future__ import annotations

from autotune.catalog.adapters.common import (
    Fields,
    _deepseek_ffn,
    _mtp_note,
    _spec,
)
from autotune.specs import AttentionSpec, LayerSpec, ModelSpec, SpecError

# ---------------------------------------------------------------- DeepSeek-V4 family (CSA/HCA, CSA2 + CED + Engram)

_CSA_RATIO = 4  # V4 reference model.py: the overlapping compressor and the lightning indexer exist only at ratio 4
_V41_MAIN_KV_BYTES = 0.5 + 1 / 16  # V4.1 compressed KV: FP4 E2M1, one E4M3 scale per 16 (models.md section 2)
_V41_INDEX_KV_BYTES = 0.5 + 1 / 32  # V4.1 index keys: FP4 E2M1, one E8M0 scale per 32
_ENGRAM_BYTES_PER_ELEM = 1 + 1 / 32  # Engram rows: FP8 with one E8M0 scale per 32 (264 B per 256-wide row)


def _v4_core_params(cfg: Fields) -> int:
    """wq_a, wq_b, wkv (one shared 512-d latent), grouped low-rank output wo_a and wo_b."""
    hidden, heads, head_dim = cfg.num("hidden_size"), cfg.num("num_attention_heads"), cfg.num("head_dim")
    q_lora, o_lora, o_groups = cfg.num("q_lora_rank"), cfg.num("o_lora_rank"), cfg.num("o_groups")
    wq = hidden * q_lora + q_lora * heads * head_dim
    wkv = hidden * cfg.num("num_key_value_heads", 1) * head_dim
    return wq + wkv + heads * head_dim * o_lora + o_groups * o_lora * hidden


def _v4_attention(
    cfg: Fields,
    kind: str,
    extra_params: int,
    ratio: int,
    kv_elems: float,
    cap: int,
    index: tuple[int, int, int] = (0, 0, 0),
) -> AttentionSpec:
    """`index` = (indexer heads, key width, max entries scored) when this layer runs the lightning indexer."""
    head_dim = cfg.num("head_dim")
    # wq_a and wkv (fused, disable_tp: vLLM models/deepseek_v4/attention.py:253-260; SGLang srt/models/
    # deepseek_v4.py:1095-1116), the compressor (vLLM deepseek_v4/compressor.py:292; SGLang srt/layers/attention/
    # dsv4/compressor.py:68) and the indexer (vLLM attention.py:947-960; SGLang dsv4/indexer.py:1178-1191,
    # dsv41_sparse.py:137-234) are whole on every TP rank; wq_b, wo_a, wo_b are split
    down = cfg.num("hidden_size") * (cfg.num("q_lora_rank") + cfg.num("num_key_value_heads", 1) * head_dim)
    return AttentionSpec(
        kind=kind,
        num_heads=cfg.num("num_attention_heads"),
        num_kv_heads=cfg.num("num_key_value_heads", 1),
        params=_v4_core_params(cfg) + extra_params,
        score_dim=2 * head_dim,  # K == V: one 512-wide latent for q.k and for v
        kv_elems_per_token=kv_elems,
        kv_read_elems_per_token=head_dim,
        compress_ratio=max(ratio, 1),
        attended_cap=cap,
        window=cfg.num("sliding_window"),
        window_only=ratio == 0,
        latent_shared=True,
        index_heads=index[0],
        index_dim=index[1],
        index_scored_cap=index[2],
        replicated_params=down + extra_params,
    )


def _layer_ratios(cfg: Fields) -> list[int]:
    n, ratios = cfg.num("num_hidden_layers"), cfg.nums("compress_ratios")
    if len(ratios) < n:
        raise SpecError(f"field '{cfg.prefix}compress_ratios': {len(ratios)} entries for {n} layers")
    return ratios[:n]  # trailing entries belong to the MTP layers


def deepseek_v4_model(config: dict, name: str) -> ModelSpec:
    """V4: per layer SWA-only (ratio 0), CSA (ratio 4, indexer top-k) or HCA (ratio 128, dense); all MoE."""
    cfg = Fields(config)
    hidden, head_dim = cfg.num("hidden_size"), cfg.num("head_dim")
    q_lora, index_heads, index_dim = cfg.num("q_lora_rank"), cfg.num("index_n_heads"), cfg.num("index_head_dim")
    indexer = q_lora * index_heads * index_dim + hidden * index_heads + 2 * (2 * index_dim) * hidden

    def attention(ratio: int) -> AttentionSpec:
        if ratio == 0:
            return _v4_attention(cfg, "swa", 0, 0, 0.0, 0)
        if ratio == _CSA_RATIO:  # overlapping compressor (wkv + wgate, 2 x head_dim wide) + indexer
            extra, kv_elems = 2 * (2 * head_dim) * hidden + indexer, (head_dim + index_dim) / ratio
            return _v4_attention(cfg, "csa", extra, ratio, kv_elems, cfg.num("index_topk"), (index_heads, index_dim, 0))
        return _v4_attention(cfg, "hca", 2 * head_dim * hidden, ratio, head_dim / ratio, 0)

    ratios = _layer_ratios(cfg)
    layers = [LayerSpec(i, attention(r), _deepseek_ffn(cfg, i)) for i, r in enumerate(ratios)]
    notes = [
        *_mtp_note(cfg),
        f"the first {cfg.num('num_hash_layers', 0)} layers route by token-id hash; modelled as top-k MoE",
        f"lightning indexer ({index_heads} heads x {index_dim}) on CSA layers: weights in params, scoring costed",
        "kv_dtype fp8: the reference keeps the compressed latent in fp8 (rope dims bf16), ~3.4-3.9 KB/token",
    ]
    window_elems = len(ratios) * cfg.num("sliding_window") * head_dim
    return _spec(name, cfg, cfg, layers, notes, kv_dtype="fp8", window_kv_elems_per_seq=window_elems)


def deepseek_v41_model(config: dict, name: str) -> ModelSpec:
    """V4.1: CSA2 (only kv_source layers store KV), causal encoder-decoder (CED), Engram tables in host memory."""
    root = Fields(config)
    cfg = root.sub("text_config")
    hidden, head_dim, q_lora = cfg.num("hidden_size"), cfg.num("head_dim"), cfg.num("q_lora_rank")
    index_heads, index_dim = cfg.num("index_n_heads"), cfg.num("index_head_dim")
    kv_sources, index_sources = set(cfg.nums("kv_source_layer_ids")), set(cfg.nums("index_source_layer_ids"))
    ratios = _layer_ratios(cfg)
    if any(i >= len(ratios) or ratios[i] == 0 for i in kv_sources | index_sources):
        raise SpecError(f"field '{cfg.prefix}kv_source_layer_ids': a source layer has compress ratio 0 or is absent")
    decoder_start = ratios.index(1) if 1 in ratios else len(ratios)  # CED: ratio-1 layers form the decoder

    def attention(i: int, ratio: int) -> AttentionSpec:
        if ratio == 0:
            return _v4_attention(cfg, "swa", 0, 0, 0.0, 0)
        owner, indexer = i in kv_sources, i in index_sources
        # owner: compressor wkv (+ wgate when it pools, ratio > 1) and indexer.wk on the latent
        extra = (head_dim * hidden * (2 if ratio > 1 else 1) + index_dim * head_dim) if owner else 0
        extra += (q_lora * index_heads * index_dim + hidden * index_heads) if indexer else 0
        kv_elems = (head_dim + index_dim) / ratio if owner else 0.0
        candidates = cfg.num("candidate_topk_blocks", 0) * cfg.num("candidate_block_size", 0)
        # the candidate source scores densely and publishes the blocks; only the later indexers are capped to them
        # (vLLM models/deepseek_v41/attention.py:531-532; SGLang srt/layers/attention/dsv4/dsv41_sparse.py:204-205)
        source = cfg.num("candidate_source_layer_id", -1)
        scored_cap = candidates if 0 <= source < i else 0
        index = (index_heads, index_dim, scored_cap) if indexer else (0, 0, 0)
        return _v4_attention(cfg, "csa2", extra, ratio, kv_elems, cfg.num("index_topk"), index)

    layers = [
        LayerSpec(i, attention(i, r), _deepseek_ffn(cfg, i), in_prefill=i < decoder_start) for i, r in enumerate(ratios)
    ]
    main_kv = sum(head_dim / ratios[i] for i in kv_sources)
    index_kv = sum(index_dim / ratios[i] for i in kv_sources)
    engram_rows = sum(cfg.nums("engram_num_embeddings", []))
    vision_layers = root.get("vision_config", {}).get("num_hidden_layers")
    notes = [
        *_mtp_note(cfg),
        *([f"vision tower ({vision_layers} layers) left out"] if vision_layers else []),
        f"CED (inferred, models.md section 2): prompt tokens traverse layers 0-{decoder_start - 1}; the "
        f"compressor of layer {decoder_start}, which builds the decoders' global KV from them, is counted in that "
        f"layer (not in prefill)",
        f"indexer ({index_heads} heads x {index_dim}) runs on layers {sorted(index_sources)}, the others reuse its "
        f"top-k; after layer {cfg.num('candidate_source_layer_id', 0)} it scores only "
        f"{cfg.num('candidate_topk_blocks', 0)} x {cfg.num('candidate_block_size', 0)} candidate entries where "
        f"the engine runs the sparse MQA logits (sm_10x), masked dense logits elsewhere",
        f"Engram tables ({engram_rows} rows) served from host memory; their per-token projection engram.wkv is "
        f"not in params",
    ]
    return _spec(
        name,
        root,
        cfg,
        layers,
        notes,
        kv_dtype="fp4",
        kv_bytes_per_token_native=main_kv * _V41_MAIN_KV_BYTES + index_kv * _V41_INDEX_KV_BYTES,
        window_kv_elems_per_seq=len(ratios) * cfg.num("sliding_window") * head_dim,
        host_table_bytes=engram_rows * cfg.num("engram_head_dim", 0) * _ENGRAM_BYTES_PER_ELEM,
    )
