"""Per-GPU memory fit of one engine instance: weights + KV capacity + activations + reserve."""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import itemgetter

from autotune.capability.profiles import profile
from autotune.perf import efficiency as eff
from autotune.perf import linear_attention, precision
from autotune.perf.costing import BoundedMemo
from autotune.perf.layers import layer_groups
from autotune.perf.oplist import speculation
from autotune.perf.sharding import dense_shards, dispatch_act_bytes, head_over_dp, shared_expert_shards
from autotune.specs import DTYPE_BYTES, HardwareProfile, LayerSpec, MemoryFit, ModelSpec, PhasePlan

GB = 1e9
GIB = 2**30  # HardwareProfile.memory_gib is binary (NVML total / 2^30; datasheet sizes such as "96 GB" are GiB)
GPU_MEMORY_UTILIZATION = 0.90  # vLLM --gpu-memory-utilization default: the share of TOTAL memory it may take
# vLLM 0.34 KV budget (v1/worker/utils.py:742-743 requested = total x utilization; v1/worker/gpu_worker.py:776-779
# KV = requested - non_kv_cache_memory - cudagraph_memory_estimate; utils/mem_utils.py:326-336 non_kv_cache_memory
# = weights + non-torch growth (NCCL / custom all-reduce buffers) + the profiled activation peak). The CUDA context
# exists before the snapshot, so it sits in the (1 - utilization) share, not in the budget. Non-torch growth +
# CUDA graphs per GPU: 1.5 GB, a prior (no public breakdown; the v1 figure 3 GB also held the context and slack).
RESERVE_GB = 1.5
# SGLang 0.5.23 sizes its KV pool as total x mem_fraction_static - weights, with mem_fraction_static = (total -
# reserved) / total (srt/arg_groups/memory_hook.py:278-326; SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, which would skip
# the graph reserve, is off by default: srt/environ.py:640): reserved MB = 512 + 1.5 x activation tokens (max(chunk,
# 2048); on a decode server max(max_running x verified tokens, 2048): :296-305) + tp x pp / 8 x 1024 + the CUDA-graph
# reserve (:358-398), at least 10 GiB on GPUs above 60 GiB, then + 2 GiB of DeepEP buffers where decode graphs
# capture them (:401-413). The graph reserve: decode max_bs x 2, x attn-dp 3 more with DP attention, x 1.5 more above
# bs 300, none of it on a prefill server (its decode graphs are off: srt/arg_groups/cuda_graph_hook.py:557-566); the
# breakable prefill graphs, off on a decode server: 8 MB a captured size (1.5 GiB with an MLA backend), + 1 GiB with
# DeepEP. Activations run in the reserved share.
SGLANG_RESERVED_FLOOR_MB = 10 * 1024
SGLANG_DEEPEP_DECODE_GRAPH_MB = 2 * 1024  # reserve_for_deepep_a2a_mb, memory_hook.py:401-413
SGLANG_DEEPEP_PREFILL_GRAPH_MB = 1024  # breakable prefill graphs with DeepEP, memory_hook.py:391-397
SGLANG_PREFILL_GRAPH_MB_PER_SIZE = 8  # non-MLA backends, memory_hook.py:384-386
SGLANG_MLA_PREFILL_GRAPH_MB = 1.5 * 1024  # MLA backends, memory_hook.py:387-389
# The decode max_bs is the engine profile's resolved one (decode_graph_max_bs: the plan's, else SGLang's default
# tier), the same graph_caps prices steps with.
ACTIVATION_ROWS_PER_TOKEN = 16  # live hidden-sized rows per batched token (MoE/attention intermediates)


# Replication rules (vLLM 0.34.0, SGLang 0.5.23 wheels). Plan `tp` is the attention TP group and `dp` the
# attention-DP ranks; SGLang's --tp-size is tp*dp (attn_tp = tp_size // attn_dp_size: srt/runtime_context.py:73-76).
# - Attention: split over tp, each DP rank holding its own copy; the down-projections (MLA q_a/kv_a, V4 wq_a/wkv),
#   indexer and compressor are ReplicatedLinear, whole on every rank (AttentionSpec.replicated_params).
# - Dense MLP: vLLM's DP ranks are separate engines, each sharding its model over its own TP group (config/
#   parallel.py:155-157: only MoE layers span tp*dp; models/deepseek_v2.py:1339-1345); SGLang builds it over the
#   full TP group = tp*dp ranks (srt/models/deepseek_v2.py:2664-2675, parallel_group "tp"), whole on every rank
#   with --moe-dense-tp-size 1 (is_dense_ffn_fully_dp, srt/layers/layer_boundary/layout.py:83-84): ops.dense_shards.
# - Shared experts: sharding.shared_expert_layout (the op list reads the same rule): SGLang over the full TP group
#   (tp*dp), whole on every rank with an all-to-all backend such as DeepEP; vLLM over tp, whole on every rank under
#   sequence-parallel MoE; SGLang's FP4 all-gather dispatch too (_replicated_dispatch, read where the box is given).
#   SGLang's fused shared experts (one more routed expert at expert parallel 1: sharding.fused_shared_experts) are
#   split over the tp*dp ranks as the routed experts are: the same bytes.
# - Embedding: vocab-parallel over tp in both (SGLang's attention-TP group under DP attention:
#   srt/layers/vocab_parallel_embedding.py:166-185). LM head: over tp, except SGLang under DP attention without
#   --enable-dp-lm-head: over all tp*dp ranks (srt/models/deepseek_v2.py:3291-3297, vocab_parallel_embedding.py:
#   253-263): ops.head_over_dp.
# - Routed experts: over all tp*dp ranks (as experts with EP, tensor-sharded without).


def _replicated_dispatch(model: ModelSpec, phase: PhasePlan, engine: str, hw: HardwareProfile | None) -> bool:
    """Whether attention DP gathers rows quantised for the experts (sharding.dispatch_act_bytes: SGLang's FP4
    all-gather), which replicates the shared experts (sharding.shared_expert_layout); needs the box (the MoE kernel
    'auto' resolves by arch: efficiency.resolved_moe_kernel), False without one."""
    if hw is None or phase.dp == 1 or not model.is_moe or not profile(engine).tp_spans_dp:
        return False
    expert_dtype = precision.compute_dtype(model, phase, hw, "expert")
    moe = eff.resolved_moe_kernel(model, phase, engine, hw.gpu.arch, expert_dtype)
    return bool(dispatch_act_bytes(model, phase, engine, moe, expert_dtype))


def _layer_bytes(
    layer: LayerSpec, phase: PhasePlan, engine: str, dense_b: float, expert_b: float, replicated: bool = False
) -> float:
    """One layer's weights on one GPU (the replication rules above); `replicated`: _replicated_dispatch."""
    att, ffn = layer.attention, layer.ffn
    if ffn.kind == "dense":
        ffn_shards = dense_shards(ffn, phase, engine)
    else:
        ffn_shards = shared_expert_shards(phase, engine, replicated)
    attention = (att.params - att.replicated_params) / phase.tp + att.replicated_params
    dense = attention * dense_b + ffn.params * dense_b / ffn_shards
    return dense + ffn.num_experts * ffn.expert_params * expert_b / (phase.tp * phase.dp)


_KINDS: dict[int, tuple[ModelSpec, Callable]] = {}  # id(model) -> (model, _layer_kinds' picker)


def _layer_kinds(model: ModelSpec) -> Callable[[list], tuple]:
    """A function from the per-kind values of layers.layer_groups (a list, in its order) to the value of each
    layer (memoised per model object), so weights are costed once per distinct layer kind."""
    hit = _KINDS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    index = {(rep.attention, rep.ffn, rep.in_prefill): i for i, (rep, _) in enumerate(layer_groups(model))}
    picks = [index[(layer.attention, layer.ffn, layer.in_prefill)] for layer in model.layers]
    pick = itemgetter(*picks) if len(picks) > 1 else lambda values: (values[picks[0]],)
    if len(_KINDS) >= 64:
        _KINDS.clear()
    _KINDS[id(model)] = (model, pick)
    return pick


WEIGHTS_MEMO_MAX = 4096  # weights_per_gpu_bytes results remembered across plans
_WEIGHTS = BoundedMemo(WEIGHTS_MEMO_MAX)  # (id(model), engine, what of the phase it reads) -> (model, bytes)


def weights_per_gpu_bytes(
    model: ModelSpec, phase: PhasePlan, engine: str = "vllm", hw: HardwareProfile | None = None
) -> float:
    """Weights held by the most loaded GPU (first pipeline stage holds the embedding and the head when pp=1).
    Remembered across plans (a search's plans differ mostly in what this does not read) by the model (by
    identity, kept alive by the entry), the engine (its profile's tp_spans_dp: dense_shards, shared_expert_shards,
    head_over_dp) and what of the phase _weights_per_gpu_bytes and those read: gemm_dtype (the stored dtypes),
    tp / dp / ep / pp, dense_dp, comm.all2all, the speculative method and dp_lm_head, and whether the dispatch
    replicates the shared experts (_replicated_dispatch, from `hw`: the box, None where not given)."""
    replicated = _replicated_dispatch(model, phase, engine, hw)
    key = (
        id(model), engine, phase.kernels.gemm_dtype, phase.tp, phase.dp, phase.ep, phase.pp, phase.dense_dp,
        phase.comm.all2all, phase.speculative.method, phase.dp_lm_head, replicated,
    )  # fmt: skip
    hit = _WEIGHTS.get(key)
    if hit is None or hit[0] is not model:
        hit = _WEIGHTS.put(key, (model, _weights_per_gpu_bytes(model, phase, engine, replicated)))
    return hit[1]


def _weights_per_gpu_bytes(model: ModelSpec, phase: PhasePlan, engine: str, replicated: bool = False) -> float:
    """weights_per_gpu_bytes, computed."""
    dense_b, expert_b = precision.dense_weight_bytes(model, phase), precision.expert_weight_bytes(model, phase)
    layers_per_stage = math.ceil(model.num_layers / phase.pp)
    per_kind = [_layer_bytes(layer, phase, engine, dense_b, expert_b, replicated) for layer, _ in layer_groups(model)]
    per_layer = _layer_kinds(model)(per_kind)
    heaviest_stage = max(sum(per_layer[s : s + layers_per_stage]) for s in range(0, model.num_layers, layers_per_stage))
    if phase.speculative.method != "none":  # the draft layer (MTP; DSpark's head costed alike) on the last stage
        heaviest_stage += per_layer[-1]
    head = model.vocab_size * model.hidden_size
    embed = max(0, model.embed_params - head) * DTYPE_BYTES["bf16"] / phase.tp  # 0 when the head is tied to it
    head_shards = phase.tp * phase.dp if head_over_dp(engine, phase) else phase.tp
    head_b = head * DTYPE_BYTES["bf16"] / head_shards
    return heaviest_stage + (max(embed, head_b) if phase.pp > 1 else embed + head_b)


def kv_bytes_per_token_per_gpu(model: ModelSpec, phase: PhasePlan, engine: str, arch: str) -> float:
    """KV bytes one token of context takes on one GPU of its DP-attention rank. MLA latent KV is replicated on
    every TP rank unless decode context parallelism shards each sequence over `dcp` of them. A draft layer
    (speculative decoding) keeps its own KV, one more layer like the last."""
    total = precision.kv_bytes_per_token(model, phase, engine, arch) / phase.pp
    if phase.speculative.method != "none" and model.kv_elems_per_token:
        total *= 1 + model.layers[-1].attention.kv_elems_per_token / model.kv_elems_per_token
    att = next(
        (layer.attention for layer in model.layers if layer.attention.kv_elems_per_token), model.layers[0].attention
    )
    shard = phase.dcp if att.latent_shared else min(phase.tp, att.num_kv_heads)
    return total / shard


def window_bytes_per_seq_per_gpu(model: ModelSpec, phase: PhasePlan) -> float:
    """Bounded sliding-window KV (fp8) each running sequence pins on its GPU."""
    return model.window_kv_elems_per_seq * DTYPE_BYTES["fp8"] / phase.pp


# SGLang's state pool share when --max-mamba-cache-size is unset: --mamba-full-memory-ratio falls back to 0.9
# (srt/arg_groups/fields/schedule.py:220-225) and the pool takes ratio / (1 + ratio) of the memory left after the
# weights (srt/mem_cache/kv_cache_configurator.py:3346-3356)
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9


def state_pool_max_running(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, engine: str) -> int:
    """Running requests an engine with a separate state pool (SGLang) admits on a hybrid model when no pool size is
    given: its default pool (SGLANG_MAMBA_FULL_MEMORY_RATIO) over the slots each running request takes."""
    per_request = linear_attention.state_bytes_per_seq_per_gpu(model, phase, engine)
    if not per_request:
        return phase.batching.max_running
    capacity, _, _ = _engine_budget_bytes(model, phase, hw, engine)
    free = capacity - weights_per_gpu_bytes(model, phase, engine, hw)
    ratio = SGLANG_MAMBA_FULL_MEMORY_RATIO
    pool = max(0.0, free) * ratio / (1 + ratio)
    return max(1, min(phase.batching.max_running, int(pool / per_request) * phase.dp))


def memory_fit(
    model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, seq_tokens: int, engine: str = "vllm", role: str = "both"
) -> MemoryFit:
    """Memory per GPU and the KV tokens one instance holds (summed over its DP-attention ranks); `role` is the
    plan's phase name (a disaggregated "prefill" / "decode" server, or "both")."""
    weights = weights_per_gpu_bytes(model, phase, engine, hw)
    capacity, activations, reserve = _engine_budget_bytes(model, phase, hw, engine, role)
    inside = profile(engine).memory_budget == "gpu_memory_utilization"  # activations + reserve in the budget
    free = capacity - weights - (activations + reserve if inside else 0.0)
    # hybrid models: SGLang's separate linear-attention state pool comes off the top; vLLM's per-request states
    # come out of the shared pool with each request's KV (perf/linear_attention.py)
    pool = linear_attention.state_pool_bytes_per_gpu(model, phase, engine)
    state_seq = 0.0 if pool else linear_attention.state_bytes_per_seq_per_gpu(model, phase, engine)
    free -= pool
    per_seq = seq_tokens * kv_bytes_per_token_per_gpu(model, phase, engine, hw.gpu.arch)
    per_seq += window_bytes_per_seq_per_gpu(model, phase)
    per_seq += state_seq
    seqs_per_rank = max(0.0, free) / per_seq if per_seq else 0.0
    kv_tokens = int(seqs_per_rank * seq_tokens * phase.dp)
    state = pool + min(seqs_per_rank, phase.batching.max_running / phase.dp) * state_seq
    return MemoryFit(
        weights_gb=weights / GB,
        kv_gb=max(0.0, free + pool - state) / GB,
        state_gb=state / GB,
        activations_gb=activations / GB,
        reserve_gb=reserve / GB,
        capacity_gb=capacity / GB,
        kv_tokens=kv_tokens,
    )


def gpu_total_bytes(hw: HardwareProfile) -> float:
    """One GPU's memory, bytes (HardwareProfile holds GiB)."""
    return hw.gpu.memory_gib * GIB


def utilization_share_bytes(hw: HardwareProfile) -> float:
    """What vLLM may take of one GPU: gpu_memory_utilization of the total (weights, KV, activations, reserve)."""
    return gpu_total_bytes(hw) * GPU_MEMORY_UTILIZATION


def _engine_budget_bytes(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, engine: str, role: str = "both"):
    """(capacity, activations, reserve) per GPU by the engine's own arithmetic. SGLang: its static fraction, with
    activations and slack outside the pool (capacity is what is left for weights + KV); vLLM:
    gpu_memory_utilization of the card, activations and a reserve inside it (the profile's `memory_budget`).
    `role`: the plan's phase name ("both", or a disaggregated "prefill" / "decode" server)."""
    if profile(engine).memory_budget == "mem_fraction_static":
        activations, reserve = _sglang_reserved_bytes(model, phase, hw, engine, role)
        return gpu_total_bytes(hw) - activations - reserve, activations, reserve
    batched = phase.batching.chunked_prefill_tokens + phase.batching.max_running
    activations = batched * _activation_bytes_per_token(model, phase)
    # the profile run's sampler pass holds fp32 logits of every request over the whole vocabulary on each rank: its
    # compute_logits all-gathers the vocab-parallel logits (vllm/v1/worker/gpu/model_runner.py:1039-1062,
    # vllm/model_executor/layers/logits_processor.py:122-134), so not a 1/tp slice
    activations += phase.batching.max_running / phase.dp * model.vocab_size * 4  # fp32 logits
    activations += _wide_decode_graph_tokens(model, phase, hw, engine) * _activation_bytes_per_token(model, phase)
    return utilization_share_bytes(hw), activations, RESERVE_GB * GB


def _activation_bytes_per_token(model: ModelSpec, phase: PhasePlan) -> float:
    """The activation prior per batched token on one GPU (ACTIVATION_ROWS_PER_TOKEN hidden-sized rows over tp)."""
    return model.hidden_size * precision.ACTIVATION_BYTES * ACTIVATION_ROWS_PER_TOKEN / phase.tp


def _wide_decode_graph_tokens(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, engine: str) -> int:
    """Tokens by which the widest decode CUDA graph (a raised batching.cuda_graph_max_bs) exceeds the widest
    prompt-carrying graph. vLLM 0.34: graphs no wider than the widest prefill graph mostly reuse its memory in the
    shared graph pool, wider ones take memory from the KV cache (vllm/config/compilation.py:791-799, the budget
    subtracts the profiled graph memory: vllm/v1/worker/gpu_worker.py:776-779). Their extra buffers are priced at
    the activation prior per token (no public figure of graph memory against capture size); the per-graph driver
    cost, 1 MiB a graph in vLLM's own estimate (vllm/v1/worker/gpu/cudagraph_utils.py:984-985, 1098-1106), is
    left in RESERVE_GB (tens of graphs: tens of MiB). At the engine's default sizes the decode graphs fit in the
    prefill ones (graph_caps), so this is 0."""
    if phase.batching.cuda_graph_max_bs is None or profile(engine).graph_caps is None:
        return 0
    query_len = speculation(phase)[0]  # tokens a decoding request runs per step (1 + drafts)
    requests, tokens = profile(engine).graph_caps(hw.gpu.arch, hw.gpu.memory_gib, model, phase, query_len)
    return max(0, requests * query_len - tokens)


def _sglang_reserved_bytes(
    model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, engine: str, role: str
) -> tuple[float, float]:
    """(activation + CUDA-graph share, parallel slack) SGLang keeps outside mem_fraction_static (see above), with
    the decode graphs' resolved max_bs (the profile's decode_graph_max_bs) and its breakable prefill graphs
    (graph_caps' prompt-carrying cap, 0 when off)."""
    mb = 2**20
    graph_bs = profile(engine).decode_graph_max_bs
    max_bs = graph_bs(hw.gpu.memory_gib, phase) if graph_bs else phase.batching.max_running
    deepep = phase.comm.all2all == "deepep"
    if role == "decode":
        activation_tokens = max(phase.batching.max_running * speculation(phase)[0], 2048)
    else:
        activation_tokens = max(phase.batching.chunked_prefill_tokens, 2048)
    graph_mb = 0.0
    if role != "prefill":
        graph_mb += max_bs * 2 + (max_bs * phase.dp * (3 + (1.5 if max_bs > 300 else 0)) if phase.dp > 1 else 0)
    caps = profile(engine).graph_caps
    prefill_graph_tokens = caps(hw.gpu.arch, hw.gpu.memory_gib, model, phase, 1)[1] if caps else 0
    graph_sizes = profile(engine).prefill_graph_sizes
    if role != "decode" and prefill_graph_tokens > 0 and graph_sizes:
        sizes = len(graph_sizes(prefill_graph_tokens))
        graph_mb += SGLANG_MLA_PREFILL_GRAPH_MB if model.latent_kv else sizes * SGLANG_PREFILL_GRAPH_MB_PER_SIZE
        graph_mb += SGLANG_DEEPEP_PREFILL_GRAPH_MB if deepep else 0
    working_mb = 512 + 1.5 * activation_tokens + graph_mb
    slack_mb = phase.tp * phase.dp * phase.pp / 8 * 1024  # SGLang's tp_size is tp x dp (attention-DP ranks)
    if gpu_total_bytes(hw) > 60 * 1024 * mb:
        working_mb = max(working_mb, SGLANG_RESERVED_FLOOR_MB - slack_mb)
    if deepep and role != "prefill":
        working_mb += SGLANG_DEEPEP_DECODE_GRAPH_MB
    return working_mb * mb, slack_mb * mb
