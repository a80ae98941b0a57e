"""Layer kinds of a model (identical layers collapsed) and what one query of an attention layer reads."""

from __future__ import annotations

from collections import Counter

from autotune.specs import AttentionSpec, LayerSpec, ModelSpec


def attended_entries(att: AttentionSpec, ctx: float) -> float:
    """KV entries one query reads at context length `ctx` (compressed, sparse and windowed attention)."""
    window = min(ctx, att.window) if att.window else 0.0
    if att.window_only:
        return window
    entries = ctx / att.compress_ratio
    if att.attended_cap:
        entries = min(entries, att.attended_cap)
    return entries + window


def indexer_scored(att: AttentionSpec, ctx: float, candidates_only: bool = False) -> float:
    """Compressed entries the layer's sparse-attention indexer scores for one query (0 without an indexer): every
    entry, unless `candidates_only` (Context.dsa_candidate_sparse: the engine's sparse MQA logits score a V4.1
    consumer's candidate blocks alone) caps them at index_scored_cap. The default path computes dense logits over
    the whole context and masks them to the candidates (vLLM model_executor/layers/sparse_attn_indexer.py:940-961,
    :1149-1180; SGLang srt/layers/attention/dsv4/v41_indexer/dense_blocks.py:121-140)."""
    if not att.index_heads:
        return 0.0
    scored = ctx / att.compress_ratio / att.index_pool
    return min(scored, att.index_scored_cap) if candidates_only and att.index_scored_cap else scored


_INDEX_KEYS: dict[int, tuple[ModelSpec, float]] = {}  # id(model) -> (model, index_key_elems)


def index_key_elems(model: ModelSpec) -> float:
    """Indexer key elements the model's KV cache stores per token, all layers: index_dim per compressed (and pooled)
    entry of each layer that runs an indexer and stores KV (its kv_elems_per_token holds them; a V4.1 index source
    that reads another layer's keys stores none). Memoised per model object (every KV sizing asks)."""
    hit = _INDEX_KEYS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    elems = sum(
        n * layer.attention.index_dim / layer.attention.compress_ratio / layer.attention.index_pool
        for layer, n in layer_groups(model)
        if layer.attention.index_heads and layer.attention.kv_elems_per_token
    )
    if len(_INDEX_KEYS) >= 64:
        _INDEX_KEYS.clear()
    _INDEX_KEYS[id(model)] = (model, elems)
    return elems


def dsa_top_k(model: ModelSpec) -> int:
    """The top-k entries the model's DSA layers attend (absorbed MLA with an indexer: mla-dsa), 0 without any."""
    return max((layer.attention.attended_cap for layer, _ in layer_groups(model) if layer.attention.kind == "mla-dsa"),
               default=0)  # fmt: skip


_GROUPS: dict[int, tuple[ModelSpec, tuple[tuple[LayerSpec, int], ...]]] = {}  # id(model) -> (model, groups)


def layer_groups(model: ModelSpec) -> tuple[tuple[LayerSpec, int], ...]:
    """Identical layers collapsed with their count, so a step costs O(distinct layer kinds). Memoised per
    model object (a predict() costs every step of one model: hashing its layers each step was a quarter of it)."""
    hit = _GROUPS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    counts: Counter = Counter()
    reps: dict = {}
    for layer in model.layers:
        key = (layer.attention, layer.ffn, layer.in_prefill)
        counts[key] += 1
        reps.setdefault(key, layer)
    groups = tuple((reps[key], n) for key, n in counts.items())
    if len(_GROUPS) >= 64:
        _GROUPS.clear()
    _GROUPS[id(model)] = (model, groups)
    return groups
