"""Shared pieces of the architecture adapters: config field access, FFN specs, the ModelSpec builder."""

from __future__ import annotations

from autotune.specs import FfnSpec, LayerSpec, ModelSpec, SpecError
from autotune.specs.ranges import check_config

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
        check_config(key, value, f"field '{self.prefix}{key}'")  # specs/ranges.py CONFIG_KEYS
        return value

    def nums(self, key: str, default=_MISSING) -> list[int]:
        value = self.get(key, default)
        if value is _MISSING:
            raise SpecError(f"missing field '{self.prefix}{key}'")
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise SpecError(f"field '{self.prefix}{key}': expected a list of integers, got {value!r}")
        check_config(key, value, f"field '{self.prefix}{key}'")
        return value

    def sub(self, key: str) -> Fields:
        """The nested mapping `key` (multimodal configs keep the text model under text_config)."""
        value = self.data.get(key)
        if not isinstance(value, dict):
            raise SpecError(f"missing field '{self.prefix}{key}'")
        return Fields(value, f"{self.prefix}{key}.")


# ---------------------------------------------------------------- shared pieces


# Checkpoint quantisation formats (ModelSpec.dense_format / expert_format): what decides which kernels an
# engine accepts (engine-knobs.md section 1), beyond the storage dtype.
# Per-tensor FP8 carries its activation scheme, which decides vLLM 0.34's fused-MoE kernel: `fp8_tensor` has
# static per-tensor activation scales (ModelOpt FP8, quantization/modelopt.py:505-509; fp8 "activation_scheme":
# "static", quantization/fp8.py:509-511; compressed-tensors "dynamic": false), FlashInfer CUTLASS's scheme
# (fused_moe/experts/flashinfer_cutlass_moe.py:153-168); FP8_TENSOR_DYNAMIC quantises activations at run time
# (fp8 "dynamic", quantization/fp8.py:512-518; compressed-tensors "dynamic": true; ModelOpt
# FP8_PER_CHANNEL_PER_TOKEN, modelopt.py:2846-2851), which FlashInfer CUTLASS and DeepGEMM refuse.
FP8_TENSOR_DYNAMIC = "fp8_tensor_dynamic"
_INT4_METHODS = {"awq": "int4_awq", "gptq": "int4_gptq"}


def _formats(root: Fields) -> tuple[str, str, str, str]:
    """(dense dtype, expert dtype, dense format, expert format) from quantization_config; unquantised = the
    torch dtype. fp8 with weight_block_size is block-scaled (DeepSeek style), else per-tensor; fp4 experts
    with ue8m0 / MX scales are MXFP4, ModelOpt NVFP4 is NVFP4 and ModelOpt FP8 per-tensor FP8; AWQ/GPTQ 4-bit
    are weight-only INT4; compressed-tensors (llm-compressor) by its weights' scheme (_compressed_tensors). A
    top-level `expert_dtype` (V4-style FP4 experts beside FP8 dense) overrides the experts of any method, and an
    `ignore` / `exclude_modules` list that keeps attention unquantised keeps the dense group at the torch dtype."""
    base = _TORCH_DTYPES.get(root.get("torch_dtype", root.get("dtype", "bfloat16")), "bf16")
    quant = root.get("quantization_config", {})
    method = quant.get("quant_method")
    if method is None:
        return base, base, base, base
    algo = str(quant.get("quant_algo", "")).upper()
    if method == "fp8":
        block = quant.get("weight_block_size") or []
        # 32-wide blocks with power-of-two (ue8m0) scales are MXFP8 (DeepSeek-V4.1 dense layers); per-tensor
        # weights by activation_scheme (vLLM quantization/fp8.py:158, "dynamic" by default at :95)
        static = str(quant.get("activation_scheme", "dynamic")) == "static"
        tensor = "fp8_tensor" if static else FP8_TENSOR_DYNAMIC
        fmt = "mxfp8" if block and max(block) == 32 else "fp8_block" if block else tensor
        dense, expert, dense_fmt, expert_fmt = "fp8", "fp8", fmt, fmt
    elif method == "mxfp4":
        dense, expert, dense_fmt, expert_fmt = base, "fp4", base, "mxfp4"
    elif method == "modelopt" and algo == "NVFP4":
        dense, expert, dense_fmt, expert_fmt = "fp4", "fp4", "nvfp4", "nvfp4"
    elif method == "modelopt" and algo == "FP8":  # vLLM ModelOptFp8Config, per-tensor (quantization/modelopt.py:461)
        dense, expert, dense_fmt, expert_fmt = "fp8", "fp8", "fp8_tensor", "fp8_tensor"
    elif method == "modelopt" and algo == "MIXED_PRECISION":
        dense, expert, dense_fmt, expert_fmt = _modelopt_mixed(quant, base)
    elif method in _INT4_METHODS and quant.get("bits", 4) == 4:
        dense, expert, dense_fmt, expert_fmt = "int4", "int4", _INT4_METHODS[method], _INT4_METHODS[method]
    elif method == "compressed-tensors":
        dtype, fmt = _compressed_tensors(quant)
        dense, expert, dense_fmt, expert_fmt = dtype, dtype, fmt, fmt
    else:
        supported = "fp8, mxfp4, modelopt (NVFP4, FP8, MIXED_PRECISION), awq / gptq (4-bit), compressed-tensors"
        raise SpecError(f"quantization_config.quant_method '{method}' is not supported (supported: {supported})")
    expert_override = quant.get("expert_dtype") or root.get("expert_dtype")
    if expert_override in _STORED_DTYPES and expert_override != expert:
        expert, expert_fmt = expert_override, _STORED_DTYPES[expert_override]
    # ModelOpt ignore / exclude_modules, compressed-tensors ignore, AWQ modules_to_not_convert (vLLM
    # quantization/auto_awq.py:248-250 leaves those layers unquantised)
    skipped = quant.get("ignore") or quant.get("exclude_modules") or quant.get("modules_to_not_convert") or []
    ignored = [str(p) for p in skipped]
    # attention (and with it the dense group) left at the torch dtype; MIXED_PRECISION: quantized_layers decides
    if algo != "MIXED_PRECISION" and any("attn" in p for p in ignored):
        dense, dense_fmt = base, base
    return dense, expert, dense_fmt, expert_fmt


# ModelOpt per-layer algorithms (vLLM quantization/modelopt.py:150-163 LINEAR_ALGOS) -> (dtype, format).
# W4A16_NVFP4 is weight-only: FP4 weights with bf16 activations (modelopt.py:771, an FP4 Marlin GEMM).
_MODELOPT_ALGOS = {
    "FP8": ("fp8", "fp8_tensor"),
    "FP8_PER_CHANNEL_PER_TOKEN": ("fp8", FP8_TENSOR_DYNAMIC),
    "FP8_PB_WO": ("fp8", "fp8_block"),
    "MXFP8": ("fp8", "mxfp8"),
    "NVFP4": ("fp4", "nvfp4"),
    "W4A16_NVFP4": ("fp4", "nvfp4_w4a16"),
}


def _modelopt_mixed(quant: dict, base: str) -> tuple[str, str, str, str]:
    """(dense dtype, expert dtype, dense format, expert format) of a ModelOpt MIXED_PRECISION checkpoint (NVIDIA's
    NVFP4 2.0 releases: NVFP4 routed experts, FP8 attention and shared experts): the algorithm of its routed
    experts' and attention layers' entries in `quantized_layers` (vLLM modelopt.py:1779-1805 reads the same
    mapping); a group with no entry stays at the torch dtype."""
    layers = quant.get("quantized_layers") or (quant.get("quantization") or {}).get("quantized_layers") or {}
    if not layers:
        raise SpecError("quantization_config: ModelOpt MIXED_PRECISION needs a non-empty 'quantized_layers' mapping")

    def group(is_member) -> tuple[str, str]:
        algos = [str((info or {}).get("quant_algo", "")).upper() for name, info in layers.items() if is_member(name)]
        if not algos:
            return base, base
        if algos[0] not in _MODELOPT_ALGOS:
            known = ", ".join(_MODELOPT_ALGOS)
            raise SpecError(f"quantization_config.quantized_layers: quant_algo '{algos[0]}' is not supported ({known})")
        return _MODELOPT_ALGOS[algos[0]]

    expert = group(lambda name: ".experts." in name and "shared_expert" not in name)
    dense = group(lambda name: "attn" in name)
    return dense[0], expert[0], dense[1], expert[1]


# a top-level expert_dtype -> the format it is stored in
_STORED_DTYPES = {"fp4": "mxfp4", "fp8": "fp8_block", "bf16": "bf16", "int4": "int4_gptq"}


def _compressed_tensors(quant: dict) -> tuple[str, str]:
    """(dtype, format) of a compressed-tensors checkpoint from its first config group's weights: 4-bit int =
    W4A16 (GPTQ-packed, Marlin kernels: int4_gptq), 8-bit float = FP8 (block or per-tensor / channel), 4-bit
    float = NVFP4 (vLLM compressed_tensors.py schemes W4A16 / W8A8Fp8 / W4A4Fp4)."""
    groups = quant.get("config_groups") or {}
    if not isinstance(groups, dict):
        raise SpecError(f"quantization_config.config_groups: expected a mapping of groups, got {groups!r}")
    first = next((g for g in groups.values() if isinstance(g, dict)), {})
    weights, acts = first.get("weights") or {}, first.get("input_activations") or {}
    for key, value in (("weights", weights), ("input_activations", acts)):
        if not isinstance(value, dict):
            raise SpecError(f"quantization_config.config_groups: {key}: expected a mapping, got {value!r}")
    bits, kind = weights.get("num_bits"), str(weights.get("type", "int"))
    if bits == 4 and kind == "int":
        return "int4", "int4_gptq"
    if bits == 8 and kind == "float":
        if weights.get("strategy") == "block":
            return "fp8", "fp8_block"
        # static only where the first group's input_activations say "dynamic": false
        # (vLLM compressed_tensors_moe_w8a8_fp8.py:82); none at all is weight-only, not static either
        return "fp8", FP8_TENSOR_DYNAMIC if acts.get("dynamic", True) else "fp8_tensor"
    if bits == 4 and kind == "float":
        return "fp4", "nvfp4"
    raise SpecError(
        f"quantization_config.config_groups: compressed-tensors weights {bits}-bit {kind} are not supported "
        "(supported: 4-bit int, 8-bit float, 4-bit float)"
    )


def _draft_heads(*configs: Fields) -> tuple[str, ...]:
    """Speculative heads the checkpoint ships: MTP (num_nextn_predict_layers; Qwen3.5 mtp_num_hidden_layers) and
    DSpark (dspark_* fields)."""
    has = lambda key: any(cfg.get(key) for cfg in configs)  # noqa: E731
    mtp = has("num_nextn_predict_layers") or has("mtp_num_hidden_layers")  # Qwen3.5 names its MTP head so
    return (("mtp",) if mtp else ()) + (("dspark",) if has("dspark_target_layer_ids") else ())


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
    dense, expert, dense_format, expert_format = _formats(root)
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
        dense_format=dense_format,
        expert_format=expert_format,
        draft_heads=_draft_heads(root, text),
        kv_dtype=kv_dtype,
        notes=(_CONVENTION, *notes),
        **extra,
    )
