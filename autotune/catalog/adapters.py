"""Architecture adapters: a Hugging Face config.json (as a dict) -> ModelSpec, one function per family.

Parameter counts follow shared/reference/models.md: every projection is counted (q/kv/o with their LoRA ranks,
indexer, compressor, dense/shared/routed FFN, embedding + untied head); norms, routers, mHC and biases are not.
Adding a family = one adapter function + one entry in ADAPTERS.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.specs import AttentionSpec, FfnSpec, LayerSpec, ModelSpec, SpecError

_MISSING = object()
_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_CONVENTION = "params count every projection; norms, routers, mHC and biases are left out (<0.5 %, models.md)"


class Fields:
    """Typed read access to one config mapping; errors name the field (the loader prefixes the file)."""

    def __init__(self, data: dict, prefix: str = "") -> None:
        self.data, self.prefix = data, prefix

    def get(self, key: str, default=None):
        value = self.data.get(key)
        return default if value is None else value

    def num(self, key: str, default=_MISSING) -> int:
        value = self.get(key, default)
        if value is _MISSING:
            raise SpecError(f"missing field '{self.prefix}{key}'")
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"field '{self.prefix}{key}': expected an integer, got {value!r}")
        return value

    def nums(self, key: str, default=_MISSING) -> list[int]:
        value = self.get(key, default)
        if value is _MISSING:
            raise SpecError(f"missing field '{self.prefix}{key}'")
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise SpecError(f"field '{self.prefix}{key}': expected a list of integers, got {value!r}")
        return value

    def sub(self, key: str) -> Fields:
        """The nested mapping `key` (multimodal configs keep the text model under text_config)."""
        value = self.data.get(key)
        if not isinstance(value, dict):
            raise SpecError(f"missing field '{self.prefix}{key}'")
        return Fields(value, f"{self.prefix}{key}.")


# ---------------------------------------------------------------- shared pieces


def _dtypes(root: Fields) -> tuple[str, str]:
    """(dense, routed-expert) checkpoint dtypes from quantization_config; unquantised = the torch dtype."""
    base = _TORCH_DTYPES.get(root.get("torch_dtype", root.get("dtype", "bfloat16")), "bf16")
    quant = root.get("quantization_config", {})
    method = quant.get("quant_method")
    dense = {None: base, "fp8": "fp8", "mxfp4": base}.get(method, "")
    if not dense:
        raise SpecError(f"quantization_config.quant_method '{method}' is not supported (supported: fp8, mxfp4)")
    expert = quant.get("expert_dtype") or root.get("expert_dtype") or ("fp4" if method == "mxfp4" else dense)
    return dense, expert


def _dense_ffn(hidden: int, intermediate: int) -> FfnSpec:
    return FfnSpec(kind="dense", params=3 * hidden * intermediate)


def _moe_ffn(hidden: int, moe_intermediate: int, experts: int, top_k: int, shared: int) -> FfnSpec:
    expert_params = 3 * hidden * moe_intermediate
    return FfnSpec("moe", expert_params * shared, experts, top_k, expert_params)


def _deepseek_ffn(cfg: Fields, index: int) -> FfnSpec:
    """DeepSeek/GLM MoE: first_k_dense_replace (or mlp_layer_types) dense layers, then routed + shared experts."""
    hidden, experts = cfg.num("hidden_size"), cfg.num("n_routed_experts", 0)
    types = cfg.get("mlp_layer_types")
    if types is not None:
        is_moe = index < len(types) and types[index] == "sparse"
    else:
        first_moe = cfg.num("first_k_dense_replace", 0)
        is_moe = bool(experts) and index >= first_moe and index % cfg.num("moe_layer_freq", 1) == 0
    if not is_moe:
        return _dense_ffn(hidden, cfg.num("intermediate_size"))
    moe_inter = cfg.num("moe_intermediate_size")
    return _moe_ffn(hidden, moe_inter, experts, cfg.num("num_experts_per_tok"), cfg.num("n_shared_experts", 0))


def _mtp_note(cfg: Fields) -> list[str]:
    n = cfg.num("num_nextn_predict_layers", 0)
    return [f"{n} MTP / next-token-prediction layer(s) left out of layers"] if n else []


def _spec(
    name: str, root: Fields, text: Fields, layers: list[LayerSpec], notes: list[str], kv_dtype: str = "bf16", **extra
) -> ModelSpec:
    dense, expert = _dtypes(root)
    hidden, vocab = text.num("hidden_size"), text.num("vocab_size")
    tied = bool(root.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    return ModelSpec(
        name=name,
        family=root.get("model_type"),
        hf_id=root.get("_name_or_path", ""),
        hidden_size=hidden,
        vocab_size=vocab,
        max_position=text.num("max_position_embeddings"),
        layers=tuple(layers),
        embed_params=vocab * hidden * (1 if tied else 2),
        dense_dtype=dense,
        expert_dtype=expert,
        kv_dtype=kv_dtype,
        notes=(_CONVENTION, *notes),
        **extra,
    )


# ---------------------------------------------------------------- GQA (llama, qwen3_moe)


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
        )

    notes = _mtp_note(cfg)
    if index_heads:
        notes.append(
            f"DSA indexer ({index_heads} heads x {index_dim}) weights are in attention params and its keys in "
            f"kv_elems_per_token at the model KV dtype (engines keep them in fp8 + 4 B scale)"
        )
    return _spec(name, cfg, cfg, [LayerSpec(i, attention(i), _deepseek_ffn(cfg, i)) for i in range(n)], notes)


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
        scored_cap = candidates if i >= cfg.num("candidate_source_layer_id", len(ratios)) else 0
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
        f"top-k; from layer {cfg.num('candidate_source_layer_id', 0)} it scores only "
        f"{cfg.num('candidate_topk_blocks', 0)} x {cfg.num('candidate_block_size', 0)} candidate entries",
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


Adapter = Callable[[dict, str], ModelSpec]

ADAPTERS: dict[str, Adapter] = {
    "llama": gqa_model,
    "qwen3_moe": gqa_model,
    "deepseek_v3": mla_model,
    "deepseek_v32": mla_model,
    "glm_moe_dsa": mla_model,
    "deepseek_v4": deepseek_v4_model,
    "deepseek_v41": deepseek_v41_model,
}
