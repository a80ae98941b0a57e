"""Per-GPU memory fit of one engine instance: weights + KV capacity + activations + reserve."""

from __future__ import annotations

import math

from autotune.perf import precision
from autotune.specs import DTYPE_BYTES, HardwareProfile, MemoryFit, ModelSpec, PhasePlan

GB = 1e9
GIB = 2**30  # HardwareProfile.memory_gb is binary (NVML total / 2^30; datasheet sizes such as "96 GB" are GiB)
GPU_MEMORY_UTILIZATION = 0.90  # share of device memory the engine may take (vLLM/SGLang static fraction)
# Runtime reserve per GPU: CUDA context + NCCL buffers + CUDA-graph pools + allocator slack. Prior in GB.
RESERVE_GB = 3.0
ACTIVATION_ROWS_PER_TOKEN = 16  # live hidden-sized rows per batched token (MoE/attention intermediates)


def weights_per_gpu_bytes(model: ModelSpec, phase: PhasePlan) -> float:
    """Weights held by the most loaded GPU (first pipeline stage holds the embedding and the head when pp=1)."""
    ranks = phase.tp * phase.dp
    dense_b = DTYPE_BYTES[precision.dense_dtype(model, phase)]
    expert_b = DTYPE_BYTES[precision.expert_dtype(model, phase)]
    layers_per_stage = math.ceil(model.num_layers / phase.pp)
    per_layer = []
    for layer in model.layers:
        ffn = layer.ffn
        dense = (layer.attention.params + ffn.params) * dense_b / phase.tp
        experts = ffn.num_experts * ffn.expert_params * expert_b / ranks
        per_layer.append(dense + experts)
    heaviest_stage = max(sum(per_layer[s : s + layers_per_stage]) for s in range(0, model.num_layers, layers_per_stage))
    embed = model.embed_params * DTYPE_BYTES["bf16"] / phase.tp / (2 if phase.pp > 1 else 1)
    return heaviest_stage + embed


def kv_bytes_per_token_per_gpu(model: ModelSpec, phase: PhasePlan) -> float:
    """KV bytes one token of context takes on one GPU of its DP-attention rank."""
    total = precision.kv_bytes_per_token(model, phase) / phase.pp
    att = model.layers[0].attention
    shard = 1 if att.latent_shared else min(phase.tp, att.num_kv_heads)
    return total / shard


def window_bytes_per_seq_per_gpu(model: ModelSpec, phase: PhasePlan) -> float:
    """Bounded sliding-window KV (fp8) each running sequence pins on its GPU."""
    return model.window_kv_elems_per_seq * DTYPE_BYTES["fp8"] / phase.pp


def memory_fit(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, seq_tokens: int) -> MemoryFit:
    """Memory per GPU and the KV tokens one instance holds (summed over its DP-attention ranks)."""
    capacity = hw.gpu.memory_gb * GIB * GPU_MEMORY_UTILIZATION
    weights = weights_per_gpu_bytes(model, phase)
    batched = phase.batching.chunked_prefill_tokens + phase.batching.max_running
    activations = batched * model.hidden_size * precision.ACTIVATION_BYTES * ACTIVATION_ROWS_PER_TOKEN / phase.tp
    activations += phase.batching.max_running / phase.dp * model.vocab_size * 4 / phase.tp  # fp32 logits
    free = capacity - weights - activations - RESERVE_GB * GB
    per_seq = seq_tokens * kv_bytes_per_token_per_gpu(model, phase) + window_bytes_per_seq_per_gpu(model, phase)
    seqs_per_rank = max(0.0, free) / per_seq if per_seq else 0.0
    kv_tokens = int(seqs_per_rank * seq_tokens * phase.dp)
    return MemoryFit(
        weights_gb=weights / GB,
        kv_gb=max(0.0, free) / GB,
        activations_gb=activations / GB,
        reserve_gb=RESERVE_GB,
        capacity_gb=capacity / GB,
        kv_tokens=kv_tokens,
    )
