"""ModelSpec: a model as perf sees it, per layer (built by a catalog adapter from a HF config.json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

# Bytes per element of each storage dtype, scales included where the format carries them
# (FP4 E2M1 with one E8M0 scale per 32 values = 0.5 + 1/32 = 0.53125 B).
CONTEXT_KEY = "max_position_embeddings"  # the config.json key ModelSpec.max_position is read from
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.53125, "int4": 0.53125}
# Stored formats of a dtype whose scales differ from DTYPE_BYTES' (MXFP4's for fp4): NVFP4 (ModelOpt, and
# compressed-tensors W4A4 / W4A16 FP4) packs two E2M1 values a byte with one FP8 E4M3 scale per 16 of them: vLLM
# model_executor/layers/quantization/modelopt.py:958-1014 (uint8 weights of k // 2, float8_e4m3fn scales of
# k // group_size), group_size 16 by default (:837) and required of NVFP4 checkpoints (:1303-1309): 0.5 + 1/16 B.
FORMAT_BYTES = {("fp4", "nvfp4"): 0.5625, ("fp4", "nvfp4_w4a16"): 0.5625}


def stored_bytes(dtype: str, fmt: str = "") -> float:
    """Bytes of one stored weight of `dtype` in checkpoint format `fmt`: FORMAT_BYTES where that format stores the
    dtype with its own scales, else DTYPE_BYTES (the format does not apply to a dtype the plan re-quantises to)."""
    return FORMAT_BYTES.get((dtype, fmt)) or DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class AttentionSpec:
    kind: str  # gqa | mla | csa | swa | dense-mha ...
    num_heads: int  # query heads
    num_kv_heads: int  # KV heads (1 for MQA-style latent KV); TP > num_kv_heads replicates KV
    params: int  # projection parameters of this layer's attention (q, kv, o, indexer, compressor)
    score_dim: int  # per head, per attended token: q.k width + v width (flops = 2 * heads * score_dim)
    kv_elems_per_token: float  # KV elements this layer STORES per token (0 if it reuses another layer's)
    kv_read_elems_per_token: float  # KV elements this layer READS per attended token
    compress_ratio: int = 1  # context tokens per stored entry (V4 CSA/HCA); 1 = uncompressed
    attended_cap: int = 0  # sparse attention selects at most this many entries; 0 = dense
    window: int = 0  # sliding-window tokens attended besides the compressed/sparse set; 0 = none
    window_only: bool = False  # attends only the sliding window
    latent_shared: bool = False  # one KV shared by all heads (MLA/MQA): TP replicates it on every rank
    score_dim_decode: int = 0  # per-head width in decode when it differs (absorbed MLA: kv_lora+rope+kv_lora)
    index_heads: int = 0  # sparse-attention indexer run by THIS layer (0: none, or it reuses another's top-k)
    index_dim: int = 0  # indexer key width; scoring costs 2*index_heads*index_dim FLOPs per scored entry
    # entries the indexer scores at most (V4.1 candidate consumers) where the engine scores only the candidates
    # (Context.dsa_candidate_sparse; elsewhere it scores all and masks); 0 = all
    index_scored_cap: int = 0
    index_pool: int = 1  # context tokens per indexer key (GLM-5.3-Flash index_kpool: one pooled key per 4 tokens)
    # part of `params` every TP rank holds whole (MLA q_a/kv_a down-projections, DSA/V4 indexer, V4 compressor):
    # the engines build them as ReplicatedLinear; the rest of `params` is split over TP
    replicated_params: int = 0
    # linear attention (kind gdn | kda): a fixed recurrent state per request instead of KV per token. num_heads
    # = the state's value heads, score_dim = key + value head width; the state is num_heads x d_k x d_v
    # elements at ModelSpec.state_dtype, the short-convolution window conv_elems_per_seq at the activation dtype
    state_elems_per_seq: float = 0.0
    conv_elems_per_seq: float = 0.0

    @property
    def is_linear(self) -> bool:
        return self.state_elems_per_seq > 0


@dataclass(frozen=True)
class FfnSpec:
    kind: str  # dense | moe
    params: int  # dense FFN params, or the shared experts' params in a MoE layer
    num_experts: int = 0
    experts_per_token: int = 0
    expert_params: int = 0  # parameters of ONE routed expert

    def __post_init__(self) -> None:
        if self.kind == "moe" and not 1 <= self.experts_per_token <= self.num_experts:
            raise ValueError(
                f"experts_per_token: expected 1..num_experts ({self.num_experts}) routed experts per token, "
                f"got {self.experts_per_token}"
            )


@dataclass(frozen=True)
class LayerSpec:
    index: int
    attention: AttentionSpec
    ffn: FfnSpec
    in_prefill: bool = True  # causal encoder-decoder models skip decoder layers for prompt tokens


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # HF model_type the adapter was chosen by
    hf_id: str
    hidden_size: int
    vocab_size: int
    max_position: int
    layers: tuple[LayerSpec, ...]
    embed_params: int  # embedding + untied LM head
    dense_dtype: str  # checkpoint dtype of attention / dense / shared weights
    expert_dtype: str  # checkpoint dtype of routed experts
    kv_dtype: str  # native KV-cache dtype the model is served with by default
    # checkpoint quantisation format: bf16 | fp16 | fp8_tensor (static activation scales) | fp8_tensor_dynamic |
    # fp8_block | mxfp4 | nvfp4 | int4_awq | int4_gptq
    # ("" = the plain storage dtype); engines accept kernels by format, not only by dtype
    dense_format: str = ""
    expert_format: str = ""
    draft_heads: tuple[str, ...] = ()  # speculative heads the checkpoint ships: mtp, dspark
    kv_bytes_per_token_native: float = 0.0  # official KV bytes/token in the native KV format (0 = derive)
    window_kv_elems_per_seq: float = 0.0  # bounded sliding-window KV per sequence (all layers)
    host_table_bytes: float = 0.0  # tables served from host memory (Engram n-gram memory)
    state_dtype: str = "bf16"  # dtype of the linear-attention recurrent state (hybrid models)
    notes: tuple[str, ...] = ()
    checkpoint_dir: str = ""  # local directory the model was loaded from (engines load it there); "" = hf_id
    schema: str = "mi-tune/model/v1"
    total_params: int = field(init=False)
    active_params_decode: int = field(init=False)
    active_params_prefill: int = field(init=False)

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("layers: a model needs at least one layer")
        for name, key in (("hidden_size", "hidden_size"), ("vocab_size", "vocab_size"), ("max_position", CONTEXT_KEY)):
            if getattr(self, name) < 1:
                raise ValueError(f"{key}: expected a positive integer, got {getattr(self, name)}")
        for dtype in (self.dense_dtype, self.expert_dtype, self.kv_dtype, self.state_dtype):
            if dtype not in DTYPE_BYTES:
                raise ValueError(f"unknown dtype {dtype!r} (expected one of {', '.join(DTYPE_BYTES)})")
        total = self.embed_params + sum(
            layer.attention.params + layer.ffn.params + layer.ffn.num_experts * layer.ffn.expert_params
            for layer in self.layers
        )
        for name, dtype in (("dense_format", self.dense_dtype), ("expert_format", self.expert_dtype)):
            if not getattr(self, name):
                object.__setattr__(self, name, dtype)
        object.__setattr__(self, "total_params", total)
        object.__setattr__(self, "active_params_decode", self._active(decode=True))
        object.__setattr__(self, "active_params_prefill", self._active(decode=False))

    def _active(self, decode: bool) -> int:
        layers = [layer for layer in self.layers if decode or layer.in_prefill]
        per_layer = sum(
            layer.attention.params + layer.ffn.params + layer.ffn.experts_per_token * layer.ffn.expert_params
            for layer in layers
        )
        # Model-card convention: embedding and LM head count as active for a decode token; a prompt token
        # does not run the LM head (only the last one is sampled).
        return per_layer + (self.embed_params if decode else self.embed_params // 2)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    # the layer walks below run for every prediction: cached_property computes each once per model object
    @cached_property
    def latent_kv(self) -> bool:
        """Some layer keeps one latent KV shared by every head (MLA-style): the engines' MLA attention backends."""
        return any(layer.attention.latent_shared for layer in self.layers)

    @cached_property
    def is_moe(self) -> bool:
        return any(layer.ffn.kind == "moe" for layer in self.layers)

    @cached_property
    def num_experts(self) -> int:
        return max((layer.ffn.num_experts for layer in self.layers), default=0)

    @property
    def num_heads(self) -> int:
        return self.layers[0].attention.num_heads

    @cached_property
    def attention_family(self) -> str:
        """'mha' (GQA/MHA/MQA/sliding window), 'mla', or the kinds joined (+sparse) for kinds no generic
        attention backend runs (DeepSeek-V4.x compressed attention, DSA sparse MLA)."""
        kinds = {layer.attention.kind for layer in self.layers}
        sparse = any(layer.attention.attended_cap for layer in self.layers)
        if not sparse and kinds <= {"gqa", "mha", "mqa", "dense-mha", "swa"}:
            return "mha"
        if not sparse and kinds == {"mla"}:
            return "mla"
        return "+".join(sorted(kinds)) + ("+sparse" if sparse else "")

    @cached_property
    def is_hybrid(self) -> bool:
        """Linear-attention layers (a recurrent state per request) interleaved with KV-cache attention."""
        return any(layer.attention.is_linear for layer in self.layers)

    def state_bytes_per_seq(self, state_dtype: str = "auto") -> float:
        """Linear-attention state one running request holds, all layers: recurrent state at `state_dtype`
        ('auto' = the model's) plus the short-convolution window at the activation dtype (bf16)."""
        dtype = self.state_dtype if state_dtype == "auto" else state_dtype
        recurrent = sum(layer.attention.state_elems_per_seq for layer in self.layers)
        conv = sum(layer.attention.conv_elems_per_seq for layer in self.layers)
        return recurrent * DTYPE_BYTES[dtype] + conv * DTYPE_BYTES["bf16"]

    @cached_property
    def kv_elems_per_token(self) -> float:
        return sum(layer.attention.kv_elems_per_token for layer in self.layers)

    def kv_bytes_per_token(self, kv_dtype: str) -> float:
        """KV-cache bytes per token of context, all layers, in `kv_dtype` ('auto' = the model's native format)."""
        if kv_dtype in ("auto", self.kv_dtype) and self.kv_bytes_per_token_native:
            return self.kv_bytes_per_token_native
        dtype = self.kv_dtype if kv_dtype == "auto" else kv_dtype
        return self.kv_elems_per_token * DTYPE_BYTES[dtype]

    def weight_bytes(self) -> tuple[float, float]:
        """(dense bytes, routed-expert bytes) of the whole checkpoint as served."""
        expert_params = sum(layer.ffn.num_experts * layer.ffn.expert_params for layer in self.layers)
        dense_params = self.total_params - expert_params
        dense_b = stored_bytes(self.dense_dtype, self.dense_format)
        return dense_params * dense_b, expert_params * stored_bytes(self.expert_dtype, self.expert_format)
