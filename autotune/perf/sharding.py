"""How an engine spreads a dense MLP, a MoE layer's shared experts and the LM head over an instance's tp*dp ranks (the
engine profile's `tp_spans_dp`; the replication rules are listed in perf/memory.py), what attention DP's MoE dispatch
gathers, and the shared experts an engine fuses into the routed experts."""

from __future__ import annotations

from autotune.capability.engine_profile import SharedFusionFacts
from autotune.capability.profiles import profile
from autotune.perf import precision
from autotune.specs import FfnSpec, ModelSpec, PhasePlan


def dense_layout(ffn: FfnSpec, phase: PhasePlan, engine: str) -> str:
    """How a dense MLP layer spreads over the instance's tp*dp ranks: 'tp' = tensor-parallel over the attention
    TP group and all-reduced (vLLM's DP ranks are separate engines); 'all' = SGLang under DP attention by
    default: sharded over all tp*dp ranks, its tokens all-gathered to every rank and reduce-scattered back;
    'dp' = SGLang --moe-dense-tp-size 1: whole on every rank, on the rank's own tokens, no collective."""
    if ffn.kind != "dense" or phase.dp == 1:
        return "tp"
    if phase.dense_dp:
        return "dp"
    return "all" if profile(engine).tp_spans_dp else "tp"


def layout_shards(layout: str, phase: PhasePlan) -> int:
    """Ranks a dense MLP's or shared experts' weights are split over under `layout` (dense_layout,
    shared_expert_layout): the TP group for 'tp', none for 'dp' / 'rank' (whole on every rank), tp*dp for 'all'."""
    return phase.tp if layout == "tp" else 1 if layout in ("dp", "rank") else phase.tp * phase.dp


def dense_shards(ffn: FfnSpec, phase: PhasePlan, engine: str) -> int:
    """Ranks a dense MLP layer's weights are split over (see dense_layout)."""
    return layout_shards(dense_layout(ffn, phase, engine), phase)


def shared_expert_layout(phase: PhasePlan, engine: str, replicated_dispatch: bool = False) -> str:
    """How a MoE layer's shared experts, run apart from the routed experts, spread over the instance's tp*dp ranks
    (one rule for the op list, perf/ffn_shape.py, and the weights, perf/memory.py):
    - 'all': over every rank, on the gathered rows. SGLang builds them over its full TP group, tp*dp ranks under DP
      attention (srt/models/deepseek_v2.py:865-896 parallel_group "tp"; GLM-5's GlmMoeDsaForCausalLM is that class,
      srt/models/glm4_moe.py:1284; DeepSeek-V4 runs DeepseekV2MoE, srt/models/deepseek_v4.py:3155), and runs them in
      the MoE block (deepseek_v2.py:1300-1340 forward_normal) on the gathered buffer (srt/layers/layer_boundary/
      prepare.py:183-225; V4's srt/models/deepseek_common/moe_transport.py:160-187). Its local-rows path
      (moe_transport.py:35-44, deepseek_v4.py:3625 skip_shared_experts) needs SGLANG_DP_SHARED_EXPERT_LOCAL, off by
      default, and replicated shared experts.
    - 'rank': whole on every rank, on the rank's own rows (its attention-TP slice of them). SGLang with an a2a
      backend such as DeepEP, or with the FP4 all-gather of an NVFP4 FlashInfer-CUTLASS MoE (`replicated_dispatch`:
      sharding.dispatch_act_bytes), replicates them (deepseek_v2.py:874-896 _shared_expert_use_tp1, glm4_moe.py:
      474-490; the MoE input stays scattered over the DP ranks, srt/layers/moe/utils.py:707-726, and over attention
      TP under an a2a backend, moe_transport.py:120-128); vLLM under sequence-parallel MoE (EP, tp > 1, dp > 1 with
      the default allgather_reducescatter or DeepEP: config/parallel.py:229, 859-877) replicates them
      (model_executor/models/deepseek_v2.py:245-275 disable_tp, :312, :364-369) on its tp-chunk of the rows
      (:411-422 sequence_parallel_chunk).
    - 'tp': over the attention TP group, on the DP rank's rows (vLLM's DP ranks are separate engines; either
      engine without DP attention)."""
    if profile(engine).tp_spans_dp:
        if phase.comm.all2all == "deepep" or replicated_dispatch:
            return "rank"
        return "all" if phase.dp > 1 else "tp"
    return "rank" if phase.ep > 1 and phase.tp > 1 and phase.dp > 1 else "tp"


def shared_expert_shards(phase: PhasePlan, engine: str, replicated_dispatch: bool = False) -> int:
    """Ranks a MoE layer's shared experts are split over (shared_expert_layout; 1 = whole on every rank)."""
    return layout_shards(shared_expert_layout(phase, engine, replicated_dispatch), phase)


def head_over_dp(engine: str, phase: PhasePlan) -> bool:
    """SGLang under DP attention without --enable-dp-lm-head: the LM head is vocab-parallel over all tp*dp
    ranks (vLLM's DP ranks are separate engines, each with its own head over its TP group)."""
    return profile(engine).tp_spans_dp and phase.dp > 1 and not phase.dp_lm_head


def rank_chunk(phase: PhasePlan, engine: str, chunk: int) -> int:
    """One attention-DP rank's prompt tokens per step out of the instance's `chunk` (each prompt runs on one rank:
    opcore.rank_prompt_tokens): chunk / dp where the engine splits it (the profile's `chunk_split_over_dp`: SGLang),
    else the whole chunk (each vLLM DP engine core's scheduler has its own budget); the chunk at dp 1."""
    if phase.dp > 1 and profile(engine).chunk_split_over_dp:
        return max(1, chunk // phase.dp)
    return chunk


def dp_prefill_apart(phase: PhasePlan, engine: str) -> bool:
    """An engine that runs prompts in prefill-only steps (SGLang: the profile's `mixed_prefill_chunks` off) under
    attention DP without speculative decoding: each rank's scheduler picks its own batch, a prefill when it has
    one, else its decodes (srt/managers/scheduler.py:3970-4010 get_next_batch_to_run, then the MLP sync), so one
    rank's prompt step carries the other ranks' decodes and only its own wait; its prompt budget is not shared
    with decodes. With speculative decoding SGLang keeps prefill and decode batches apart across the ranks
    (scheduler.py:3979-3990, unless SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION): every rank's decodes wait."""
    return phase.dp > 1 and not profile(engine).mixed_prefill_chunks and phase.speculative.method == "none"


def mixed_steps(phase: PhasePlan, engine: str) -> bool:
    """Whether a step carries prompt tokens beside decodes: the engine mixes prompt chunks into decode steps (the
    profile's `mixed_prefill_chunks`), or, under attention DP, one rank's prompt step carries the other ranks'
    decodes (dp_prefill_apart); else prompts run in prefill-only steps (perf/serving.separate_point)."""
    return profile(engine).mixed_prefill_chunks or dp_prefill_apart(phase, engine)


TOPK_SLOT_BYTES = 8  # a routed slot's int32 expert id and fp32 weight (vLLM fused_moe/router/fused_topk_router.py)


def dispatch_act_bytes(model: ModelSpec, phase: PhasePlan, engine: str, moe_kernel: str, expert_dtype: str) -> float:
    """Bytes per hidden element of a token's row in attention DP's all-gather dispatch where the engine gathers the
    rows quantised for the expert GEMMs (profile quantised_dp_dispatch; the row's routing slots travel with it,
    TOPK_SLOT_BYTES each: oplist._comm_ops); 0 where the rows go out in bf16."""
    quant_bytes = precision.act_quant_bytes(expert_dtype, model.expert_format)
    rule = profile(engine).quantised_dp_dispatch
    if not (model.is_moe and quant_bytes and rule and rule(moe_kernel, model.expert_format, phase.ep, phase.dp)):
        return 0.0
    return quant_bytes


def fused_shared_experts(model: ModelSpec, phase: PhasePlan, engine: str, arch: str, moe_kernel: str = "") -> int:
    """Shared experts of the model's MoE layers that the engine fuses into the routed fused MoE (its profile's
    `fused_shared_experts` rule: one more expert every token picks, perf/ffn_shape.py); 0 where it runs them apart.
    `moe_kernel`: the plan's kernels.moe (default: the phase's). The shared count is the layer's shared parameters
    over one routed expert's (DeepSeek's shared expert is a routed expert's shape)."""
    rule = profile(engine).fused_shared_experts
    if rule is None or not model.is_moe:
        return 0
    for layer in model.layers:  # the first MoE layer's FFN (a loop that stops there: once per Context)
        ffn = layer.ffn
        if ffn.kind == "moe":
            break
    if not ffn.params or not ffn.expert_params:
        return 0
    # (family, routed, shared, ep, arch, a2a, two_batch, moe_kernel, expert_format), positionally
    facts = SharedFusionFacts(
        model.family, ffn.num_experts, ffn.params // ffn.expert_params, phase.ep, arch,
        phase.comm.all2all == "deepep", phase.overlap.two_batch, moe_kernel or phase.kernels.moe, model.expert_format,
    )  # fmt: skip
    return rule(facts)
