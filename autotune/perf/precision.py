"""Which dtype each weight group is stored and computed in under a plan."""

from __future__ import annotations

from autotune.capability import kv_cache_dtype_on
from autotune.perf.layers import index_key_elems
from autotune.specs import DTYPE_BYTES, HardwareProfile, ModelSpec, PhasePlan, stored_bytes

ACTIVATION_BYTES = 2.0  # bf16 activations on the wire and in HBM
# Bytes per element of a DSA / V4 lightning indexer key in the cache, whatever the main KV's dtype: FP8 E4M3 values
# and one fp32 scale per 128 (vLLM models/deepseek_v41/attention.py:181-189 _indexer_k_cache_head_dim, 128 + 4 =
# 132 B a 128-wide key, "the same layout as V3.2", at the default indexer_kv_dtype auto -> fp8: v1/attention/backends/
# mla/indexer.py:67-75; SGLang srt/mem_cache/memory_pool.py:5279-5281 DSATokenToKVPool, a uint8 index_k_with_scale
# buffer at quant_block_size 128)
INDEX_KEY_BYTES_PER_ELEM = 1.0 + 4.0 / 128
_NARROWER = {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16"), "int8": ("int8", "bf16"), "bf16": ("bf16",)}


def dense_dtype(model: ModelSpec, phase: PhasePlan) -> str:
    """Storage dtype of attention/dense weights: the checkpoint's, or fp8 when the plan quantises online."""
    if phase.kernels.gemm_dtype == "fp8" and DTYPE_BYTES[model.dense_dtype] > DTYPE_BYTES["fp8"]:
        return "fp8"
    return model.dense_dtype


def expert_dtype(model: ModelSpec, phase: PhasePlan) -> str:
    if phase.kernels.gemm_dtype == "fp8" and DTYPE_BYTES[model.expert_dtype] > DTYPE_BYTES["fp8"]:
        return "fp8"
    return model.expert_dtype


def dense_weight_bytes(model: ModelSpec, phase: PhasePlan) -> float:
    """Bytes of one stored attention / dense weight as the plan serves it: dense_dtype in the checkpoint's format
    (specs.stored_bytes: NVFP4's scales per 16 values where the checkpoint keeps that dtype)."""
    return stored_bytes(dense_dtype(model, phase), model.dense_format)


def expert_weight_bytes(model: ModelSpec, phase: PhasePlan) -> float:
    """Bytes of one stored routed-expert weight as the plan serves it (dense_weight_bytes for the experts)."""
    return stored_bytes(expert_dtype(model, phase), model.expert_format)


# Weight-only checkpoint formats whose GEMMs run in bf16 on every chip: ModelOpt W4A16_NVFP4 (FP4 weights, bf16
# activations: vLLM quantization/modelopt.py:771, an FP4 Marlin GEMM). INT4 AWQ/GPTQ need no entry (no int4 path).
WEIGHT_ONLY_FORMATS = frozenset({"nvfp4_w4a16"})


def compute_dtype(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, group: str) -> str:
    """Tensor-core dtype a GEMM runs in: the storage dtype if the chip has it, else the next wider one
    (weight-only kernels such as Marlin dequantise fp8/fp4 weights to bf16 on chips without fp8); bf16 for a
    weight-only format (WEIGHT_ONLY_FORMATS)."""
    if (model.dense_format if group == "dense" else model.expert_format) in WEIGHT_ONLY_FORMATS:
        return "bf16"
    stored = dense_dtype(model, phase) if group == "dense" else expert_dtype(model, phase)
    features = hw.gpu.features
    supported = {"fp4": features.fp4, "fp8": features.fp8, "int8": features.int8, "bf16": True}
    for dtype in _NARROWER.get(stored, ("bf16",)):
        if supported.get(dtype) and hw.gpu.peak_tflops.get(dtype):
            return dtype
    return "bf16"


def kv_bytes_per_token(model: ModelSpec, phase: PhasePlan, engine: str, arch: str) -> float:
    """KV bytes per token of context, all layers, in the KV dtype the engine runs (capability.kv_cache_dtype_on:
    the plan's, or the engine's default where the plan says `auto`), but the indexer's keys (layers.index_key_elems)
    in their own layout (INDEX_KEY_BYTES_PER_ELEM) whatever that dtype: the other elements at the dtype's mean bytes
    (kv_bytes_per_elem; a native format's mean where the model gives its official figure)."""
    index = index_key_elems(model)
    if not index:
        return model.kv_bytes_per_token(kv_cache_dtype_on(engine, phase, model, arch))
    main = model.kv_elems_per_token - index
    return main * kv_bytes_per_elem(model, phase, engine, arch) + index * INDEX_KEY_BYTES_PER_ELEM


def kv_bytes_per_elem(model: ModelSpec, phase: PhasePlan, engine: str, arch: str) -> float:
    """Bytes of one stored KV element (the indexer's keys aside: kv_bytes_per_token), the mean over the layers."""
    return model.kv_bytes_per_token(kv_cache_dtype_on(engine, phase, model, arch)) / max(model.kv_elems_per_token, 1.0)


def numerics_changes(model: ModelSpec, phase: PhasePlan) -> tuple[str, ...]:
    """How a phase's numerics differ from the checkpoint's: online FP8 weights, an FP8 KV cache. Empty when
    the plan serves the checkpoint as published (speculative decoding verifies drafts: it changes nothing)."""
    changes = []
    if dense_dtype(model, phase) != model.dense_dtype or expert_dtype(model, phase) != model.expert_dtype:
        changes.append(f"fp8 weights (online from {model.dense_dtype})")
    if phase.kernels.kv_cache_dtype not in ("auto", model.kv_dtype):
        changes.append(f"{phase.kernels.kv_cache_dtype} kv cache (checkpoint: {model.kv_dtype})")
    return tuple(changes)


# Bytes each activation element is written in when a GEMM quantises its input on the fly: FP8 (W8A8, one fp32
# scale per row besides); NVFP4 (W4A4: 4-bit values and one FP8 scale per 16 elements, vLLM scaled_fp4_quant in
# front of every NVFP4 linear, model_executor/kernels/linear/nvfp4/cutlass.py:63). Weight-only formats (MXFP4
# W4A16, INT4 AWQ/GPTQ, bf16) quantise nothing: 0.
_ACT_QUANT_BYTES = {"fp8": 1.0, "nvfp4": 0.5 + 1.0 / 16}


def act_quant_bytes(compute: str, fmt: str) -> float:
    """Bytes per activation element a GEMM computing in `compute` quantises its input to (0: no quantisation);
    `fmt` is the checkpoint format of the weights (ModelSpec.dense_format / expert_format)."""
    if compute == "fp8":
        return _ACT_QUANT_BYTES["fp8"]
    if compute == "fp4" and fmt == "nvfp4":
        return _ACT_QUANT_BYTES["nvfp4"]
    return 0.0


def standalone_quants(compute: str, fmt: str, inputs: int) -> int:
    """Quantisation kernels of a pair of GEMM inputs (qkv + o_proj, gate_up + down) that run on their own. vLLM
    0.34 at its default -O2 fuses an NVFP4 model's activation quant into the kernel before it where that kernel
    is a custom op: SiLU-and-mul (fuse_act_quant always on for NVFP4, config/vllm.py:196-205) and the attention
    output (fuse_attn_quant for quantised models, config/vllm.py:331); the input after the RMSNorm keeps its own
    scaled_fp4_quant (a custom op Inductor cannot fuse). FP8 keeps one kernel per input (a conservative reading:
    Inductor may fuse its native quant too)."""
    if compute == "fp4" and fmt == "nvfp4":
        return min(inputs, 1)
    return inputs


def quant_row_bytes(quants: int, hidden: int, q_width: float, quant_bytes: float) -> float:
    """Bytes a row moves through an attention half's `quants` activation-quant kernels (bf16 read, quantised write
    and a 4-byte scale each): two of hidden width (the q/kv or q_a+kv_a input; o_proj's per-rank input is taken as
    hidden), and a third of `q_width` (an MLA q_b's input, mla.query_quant_width) where one runs on its own; 0
    without activation quantisation (`quant_bytes` 0)."""
    if not quant_bytes:
        return 0.0
    if quants <= 2:
        return quants * (hidden * (ACTIVATION_BYTES + quant_bytes) + 4.0)
    return 2 * (hidden * (ACTIVATION_BYTES + quant_bytes) + 4.0) + (q_width * (ACTIVATION_BYTES + quant_bytes) + 4.0)
