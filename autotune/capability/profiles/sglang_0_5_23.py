"""SGLang 0.5.23: the engine profile (autotune/capability/engine_profile.py). Sources: the wheel's source, `srt/`
= sglang/srt/, `arg_groups/` = sglang/srt/arg_groups/ (the citation test opens each cited line)."""

from __future__ import annotations

from autotune.capability import sglang_0_5_23 as rules
from autotune.capability.engine_profile import (
    CUDA_VISIBLE_DEVICES,
    AllReducePath,
    DpStep,
    EngineProfile,
    MoeConfigFiles,
    SharedFusionFacts,
)
from autotune.capability.flashinfer_comm import mnnvl_fused_path, trtllm_fused_path
from autotune.specs import Batching, ModelSpec, PhasePlan

VERSION = "0.5.23"


def default_batching(memory_gib: float, gpu_name: str, arch: str) -> Batching:
    """SGLang sizes the chunk from GPU memory (MiB, srt/utils/common.py:995) when --chunked-prefill-size is unset,
    srt/arg_groups/memory_hook.py:89-178: below 20 GiB 2048, below 60 GiB 4096, below 160 GiB 8192, else 16384;
    4096 when the memory is unknown. Max running requests follow the KV pool (capped here at 1024, a prior)."""
    if memory_gib <= 0:
        return Batching(max_running=1024, chunked_prefill_tokens=4096)
    tokens = 2048 if memory_gib < 20 else 4096 if memory_gib < 60 else 8192 if memory_gib < 160 else 16384
    return Batching(max_running=1024, chunked_prefill_tokens=tokens)


# decode CUDA-graph batch by GPU memory (GiB, below) and --tp-size: (tp < 4, tp >= 4); 512 from 160 GiB
# (srt/arg_groups/memory_hook.py:90-170)
DECODE_GRAPH_MAX_BS = ((20, 8, 8), (35, 48, 160), (60, 32, 160), (90, 256, 512), (160, 256, 512))


def decode_graph_max_bs(memory_gib: float, phase: PhasePlan) -> int:
    """SGLang's resolved decode CUDA-graph max_bs, per rank: the plan's batching.cuda_graph_max_bs as
    --cuda-graph-max-bs-decode (srt/arg_groups/cuda_graph_hook.py:72-73), kept as given; else the memory tier's
    default by --tp-size (DECODE_GRAPH_MAX_BS; 160 when the memory is unknown, srt/arg_groups/memory_hook.py:180),
    clipped to max_running_requests only then (srt/arg_groups/memory_hook.py:182-188: decode_max_bs_is_default).
    The graph reserve of the KV budget (autotune/perf/memory.py _sglang_reserved_bytes) and graph_caps both
    read it."""
    b = phase.batching
    if b.cuda_graph_max_bs is not None:
        return b.cuda_graph_max_bs
    tp_size = phase.tp * phase.dp if PROFILE.tp_spans_dp else phase.tp
    decode = 160
    if memory_gib > 0:
        below = [(small, large) for limit, small, large in DECODE_GRAPH_MAX_BS if memory_gib < limit]
        decode = (below[0][0] if tp_size < 4 else below[0][1]) if below else 512
    return min(decode, b.max_running)


# model_types of the catalog whose checkpoints name DeepseekV3ForCausalLM (DeepSeek-V3 / R1 / V3.1)
DEEPSEEK_V3_ARCH = ("deepseek_v3",)


def graph_caps(arch: str, memory_gib: float, model: ModelSpec, phase: PhasePlan, query_len: int) -> tuple[int, int]:
    """SGLang's CUDA graphs, per rank: (decode requests, prompt-carrying step tokens) that replay one. Decode:
    decode_graph_max_bs within max_running_requests (a larger explicit max_bs captures graphs no batch reaches).
    Prefill: the breakable graph, on by default on CUDA (srt/model_executor/cuda_graph_config.py:119-123), up to the
    chunk, min(8192, chunk) for an MLA model (srt/arg_groups/memory_hook.py:233-238); off by default with pp > 1
    (srt/arg_groups/cuda_graph_hook.py:150-161), with two-batch overlap and for DeepSeek-V4 (:183-240), V4.1 included:
    its config loader renames DeepseekV41ForCausalLM to DeepseekV4ForCausalLM (srt/configs/deepseek_v41.py:38-39),
    which is_deepseek_v4 matches (srt/configs/model_config.py:395-400); and for DeepseekV3ForCausalLM on trtllm_mla
    (:279-311), the attention backend SGLang picks for it on compute capability 10.x when none is named
    (arg_groups/model_overrides/deepseek_v2.py:178-188; is_sm100: srt/utils/common.py:309-313)."""
    b = phase.batching
    prefill = min(8192, b.chunked_prefill_tokens) if model.latent_kv else b.chunked_prefill_tokens
    if phase.pp > 1 or phase.overlap.two_batch or model.family in ("deepseek_v4", "deepseek_v41"):
        prefill = 0
    if arch in ("sm_100", "sm_103") and model.family in DEEPSEEK_V3_ARCH and phase.kernels.attention == "auto":
        prefill = 0
    return min(decode_graph_max_bs(memory_gib, phase), b.max_running), prefill


def prefill_graph_sizes(max_tokens: int) -> tuple[int, ...]:
    """SGLang's breakable prefill graph capture sizes up to max_tokens (srt/arg_groups/cuda_graph_hook.py:480-497)."""
    steps = ((4, 33, 4), (48, 257, 16), (288, 513, 32), (576, 1025, 64), (1280, 4097, 256), (4608, max_tokens + 1, 512))
    return tuple(s for lo, hi, step in steps for s in range(lo, hi, step) if s <= max_tokens)


def auto_moe_kernel(expert_dtype: str, arch: str, deepep: bool, ep: int, expert_format: str = "") -> str:
    """kernels.moe = auto: FP8 = DeepGEMM only with an a2a backend (DeepEP), else Triton
    (srt/layers/quantization/fp8.py:1520-1542); FP4 (V4.x MXFP4) experts = flashinfer_mxfp4
    (arg_groups/model_overrides/deepseek_v4.py:66-88); NVFP4 (ModelOpt) experts: Marlin below SM100
    (srt/layers/quantization/modelopt_quant.py:2377-2381), FlashInfer CUTLASS on SM120/SM110
    (srt/arg_groups/overrides.py:1513-1521) and valued so on SM100 (its own CUTLASS FP4 MoE there has no value of
    its own here); bf16: the Triton fused MoE."""
    if expert_dtype == "fp8":
        return "deep_gemm" if deepep else "triton"
    if expert_dtype == "fp4" and expert_format == "nvfp4":
        return "flashinfer_cutlass" if arch in ("sm_100", "sm_120") else "marlin"
    return "flashinfer_mxfp4" if expert_dtype == "fp4" else "triton"


def quantised_dp_dispatch(moe_kernel: str, expert_format: str, ep: int, dp: int) -> bool:
    """Attention DP gathers bf16 hidden states to every rank (srt/layers/dp_attention.py:987-1043), except that an
    NVFP4 (ModelOpt) checkpoint on the FlashInfer CUTLASS MoE with EP over the DP ranks and no a2a backend quantises
    to FP4 before the all-gather (srt/layers/moe/utils.py:707-718; --disable-flashinfer-cutlass-moe-fp4-allgather
    is off by default, srt/arg_groups/fields/exec_.py:981-983)."""
    return moe_kernel == "flashinfer_cutlass" and expert_format == "nvfp4" and ep == dp


KIB, MIB = 1024, 1024 * 1024
# The JIT custom all-reduce v2, on by default on CUDA (srt/environ.py:1532 SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2;
# chosen by srt/distributed/device_communicators/custom_all_reduce.py:387-395) for a full-NVLink group
# (srt/distributed/device_communicators/custom_all_reduce_v2.py:582-597). Its CUDA-graph thresholds (the decode
# steps'): one-shot (push, then pull) up to the first figure, two-shot pull up to the second, by arch and world size,
# srt/distributed/device_communicators/configs/custom_all_reduce_v2.py:142-200 (sm_100), :266-311 (sm_90), :326-332
# (other archs: 1 MB / 16 MB); each clipped to the workspace, 16 MiB by default (srt/environ.py:1535
# SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB; srt/distributed/device_communicators/custom_all_reduce_v2.py:147-150).
# Inclusive (srt/distributed/device_communicators/custom_all_reduce_v2.py:389-397 `nbytes <= threshold`). The
# multicast two-shot (sm_90 8 ranks from 512 KiB, sm_100 8 ranks from 8 MiB) and the sm_100 two-shot push (4 / 8 ranks
# up to 8 MiB) are costed as the two-shot pull.
V2_MAX_BYTES = 16 * MIB
V2_ONE_SHOT_MAX_BYTES = {
    "sm_90": {2: 16 * MIB, 3: 1.25 * MIB, 4: 384 * KIB, 5: 192 * KIB, 6: 128 * KIB, 7: 128 * KIB, 8: 128 * KIB},
    "sm_100": {2: 16 * MIB, 3: 4 * MIB, 4: 0.625 * MIB, 5: 1.5 * MIB, 6: 1 * MIB, 7: 0.625 * MIB, 8: 256 * KIB},
}
V2_DEFAULT_ONE_SHOT_MAX_BYTES = 1 * MIB
# The legacy kernel (srt/distributed/device_communicators/custom_all_reduce.py:41-42 world sizes 2/4/6/8, 8 MiB;
# :272-273 2 GPUs or full NVLink, `inp_size <= self.max_size`): what a 2-GPU PCIe pair runs, one-shot at 2 ranks
LEGACY_MAX_BYTES = 8 * MIB


def _v2_group(link: str, world: int) -> bool:
    """The group runs the custom all-reduce v2 (see V2_MAX_BYTES): a full-NVLink group of 2 to 8 GPUs."""
    return link == "nvlink" and 2 <= world <= 8


def allreduce_paths(arch: str, world: int, link: str) -> tuple[AllReducePath, ...]:
    """SGLang's tensor-parallel all-reduce dispatch: its custom all-reduce, then NCCL (the PCIe-IPC kernel is a plan
    choice of its own, comm.pcie_ipc). Both of its kernels synchronise once around the reads: the v2 pull kernels
    arrive at one barrier before and one after (sglang/kernels/jit/csrc/distributed/custom_all_reduce.cuh:324-382,
    the two-shot pull included: its reduced part is pushed to the peers, no second round)."""
    if _v2_group(link, world):
        one_shot = V2_ONE_SHOT_MAX_BYTES.get(arch, {}).get(world, V2_DEFAULT_ONE_SHOT_MAX_BYTES)
        return (AllReducePath("custom", V2_MAX_BYTES, min(one_shot, V2_MAX_BYTES)),)
    if world == 2 and link == "p2p":
        return (AllReducePath("custom", LEGACY_MAX_BYTES, float("inf")),)
    return ()


def dp_gather(step: DpStep) -> tuple[str, str]:
    """Attention DP's gather before the FFN and return after it (the layer-boundary decoders: DeepSeek, Qwen3-MoE,
    GLM, Llama ...). The padding mode is chosen per forward (srt/model_executor/forward_batch_info.py:1774-1828;
    DpPaddingMode.get_dp_padding_mode, srt/layers/dp_attention.py:165-204):
    - a prompt-carrying step (an extend or mixed batch on some rank; a verify batch of speculative decoding counts
      as extend, srt/model_executor/forward_batch_info.py:227-235) that replays the breakable prefill graph (on by
      default on CUDA, srt/model_executor/cuda_graph_config.py:119-123; the ranks' vote,
      srt/managers/scheduler_components/dp_attn.py:384-470, refuses a verify batch): MAX_LEN, every rank padded to
      the captured bucket of the longest rank (srt/model_executor/forward_batch_info.py:1793-1810); a decoding rank
      joins as one-token extends (srt/managers/scheduler_components/dp_attn.py:777-800). sgl-project/sglang#30898
      (2026-07-11) enabled the graph under DP attention with one padded bucket across the ranks; #37933: its body is
      captured with MAX_LEN geometry, so every rank must replay the same bucket;
    - any other prompt-carrying step, and a verify step run eagerly: SUM_LEN (srt/layers/dp_attention.py:183-192);
    - a decode-only step: SUM_LEN while the custom all-reduce v2 holds the summed buffer, without speculative decoding,
      an a2a backend or an idle rank (srt/layers/dp_attention.py:222-243; its comm.max_size is V2_MAX_BYTES), else
      the cheaper of the two (srt/layers/dp_attention.py:196-204): MAX_LEN unless the ranks' rows sum to under half
      of the longest rank's x ranks;
    - a decode or verify step that replays the decode graph runs the mode the graph was captured with, equal counts
      on every rank (srt/model_executor/runner/decode_cuda_graph_runner.py:740-745, :1154-1217;
      DpPaddingMode.get_default_mode_in_cuda_graph, srt/layers/dp_attention.py:207-219): SUM_LEN where the custom
      all-reduce v2 holds the buffer without speculative decoding or an a2a backend, else MAX_LEN (a verify step
      so: its graph is captured under speculative decoding).
    MAX_LEN gathers with all_gather_into_tensor (srt/layers/dp_attention.py:716-755); SUM_LEN writes each rank's rows
    at its offset of a zeroed buffer and all-reduces it (srt/layers/dp_attention.py:661-713, chosen at :987-1043;
    the all_gatherv path is off unless SGLANG_DP_USE_GATHERV is set, :760, :896-914). The return
    (srt/layers/layer_boundary/exit.py:76-95): a reduce_scatterv where the boundary reduction allows rsv (rs+rsv,
    these models' default: srt/arg_groups/boundary_reduction.py:28-54) and the layout is DEP, attention TP 1 with
    the experts over exactly the DP ranks, no a2a backend and no FP4 all-gather of FlashInfer's
    (srt/layers/moe/utils.py:707-750); a reduce-scatter on a MAX_LEN batch; else the FFN output's all-reduce over
    the whole buffer and a copy of this rank's slice (srt/layers/layer_boundary/exit.py:366-389,
    srt/layers/layer_boundary/ops.py:326-358). An a2a backend (DeepEP) moves the MoE layers' rows itself
    (autotune/perf/oplist.py _comm_ops); pplx forces MAX_LEN (no plan runs it). Two families return otherwise:
    DP_AR_RETURN_FAMILIES, DP_MOE_TRANSPORT_FAMILIES."""
    fits = not step.a2a and _v2_group(step.link, step.world) and step.sum_bytes <= V2_MAX_BYTES
    if step.prompt:
        padding = "max" if step.graph and not step.verify else "sum"
    elif step.verify:
        padding = "max" if step.graph else "sum"
    elif fits and (step.graph or not step.idle):
        padding = "sum"
    else:
        padding = "sum" if step.sparse and not step.graph else "max"
    gather = "allgather" if padding == "max" else "allreduce"
    if step.family in DP_AR_RETURN_FAMILIES:
        return gather, "allreduce"
    if step.family in DP_MOE_TRANSPORT_FAMILIES:
        return gather, "reducescatter" if step.dep or step.two_batch else "allreduce"
    return gather, "reducescatter" if step.dep or padding == "max" else "allreduce"


# The "ar" boundary reduction (an all-reduce, then this rank's rows) is the default of a Qwen3 dense model
# (model_type qwen3 / qwen3_vl_text; srt/arg_groups/boundary_reduction.py:14-25, :41-44)
DP_AR_RETURN_FAMILIES = ("qwen3", "qwen3_vl_text")
# DeepSeek-V4 (V4.1 loads as V4: srt/configs/deepseek_v41.py:38-39) returns its MoE rows through its own transport
# (srt/models/deepseek_v4_boundary.py:500-546, srt/models/deepseek_common/moe_transport.py:99-255): a reduce_scatterv
# under DEP (:151-156, :242-247) and under two-batch overlap (:320-330, srt/layers/dp_attention.py:1244-1281), else the
# experts' all-reduce and a copy of this rank's slice (:251), on a MAX_LEN batch too (its equal reduce-scatter needs
# SGLANG_DP_USE_REDUCE_SCATTER, :141-149, on by default on HIP only: srt/environ.py:976)
DP_MOE_TRANSPORT_FAMILIES = ("deepseek_v4", "deepseek_v41")


# Runners that turn the fusion off (srt/arg_groups/overrides.py:1528-1552 _moe_runner_fusion_disable); kernels.moe
# offers none of them today
UNFUSED_MOE_RUNNERS = ("flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_trtllm_routed")
# Expert formats whose routed and shared experts run different quant methods (W4A16 here:
# srt/models/deepseek_v2.py:3392-3393 is_wint4afp8_or_wint4a16_config)
UNFUSED_EXPERT_FORMATS = ("int4_awq", "int4_gptq")


def fused_shared_experts(f: SharedFusionFacts) -> int:
    """Shared experts SGLang fuses into the routed fused MoE as more experts (E + n experts, top-k + n per token:
    srt/models/deepseek_v2.py:694-703; the shared expert's weights loaded as expert E, sharded like the routed ones),
    by default (--disable-shared-experts-fusion off: srt/arg_groups/fields/exec_.py:984-990). The loader asks the
    model class's gate once (srt/layers/moe/utils.py:601-623: n = the class's num_fusable_shared_experts, 0 where the
    class has no count or the gate gives a reason):
    - DeepSeek-V3/R1 (DeepseekV3ForCausalLM) and GLM-5 (GlmMoeDsaForCausalLM, srt/models/glm4_moe.py:1284-1285), the
      gate srt/models/deepseek_v2.py:3325-3394: 256 routed experts (384 only for a Quark MXFP4 checkpoint), one
      shared expert, compute capability >= 8.0, expert-parallel size 1, no two-batch overlap (SBO/TBO), no DeepEP,
      no W4AFP8 / W4A16 checkpoint;
    - GLM-5.3-Flash (Glm5NextForConditionalGeneration, srt/models/glm5_next.py:1351-1390, count :1494-1500): one
      shared expert, expert-parallel size 1, sm >= 80, no DeepEP;
    - DeepSeek-V4 / V4.1 only with --enforce-shared-experts-fusion (srt/models/deepseek_v4.py:4864-4890); Qwen3.5's
      classes have no count (srt/models/qwen3_5.py:2987-3018): none.
    Off under the runners UNFUSED_MOE_RUNNERS names."""
    if f.moe_kernel in UNFUSED_MOE_RUNNERS or f.shared != 1 or f.ep != 1 or f.a2a:
        return 0
    if not f.arch.startswith("sm_") or int(f.arch[3:]) < 80:
        return 0
    if f.family in ("deepseek_v3", "glm_moe_dsa"):
        fuses = f.routed == 256 and not f.two_batch and f.expert_format not in UNFUSED_EXPERT_FORMATS
        return 1 if fuses else 0
    return 1 if f.family == "glm5_next" else 0


# Largest batch (tokens) the FlashInfer all-reduce + residual RMSNorm fusion runs on; larger steps run the unfused
# all-reduce and norm (srt/layers/layer_boundary/residual/add_norm.py:139-158 FUSE_ALLREDUCE_MAX_BATCH_SIZE, read by
# flashinfer_ar_fusion_applies with the step's token count, srt/layers/layer_boundary/fusions/allreduce.py:95,146,160)
FUSION_MAX_TOKENS = 2048


def allreduce_rmsnorm_max_tokens(arch: str, world: int, row_bytes: int) -> int:
    """SGLang's fusion limit is a token count, whatever the arch, world or row size (FUSION_MAX_TOKENS)."""
    return FUSION_MAX_TOKENS


def fused_allreduce_path(arch: str, world: int, link: str) -> AllReducePath | None:
    """The kernel SGLang's fused all-reduce + RMSNorm calls (flashinfer_allreduce_residual_rmsnorm, no use_oneshot:
    srt/layers/layernorm.py:248-255; flashinfer allreduce_fusion, srt/layers/flashinfer_comm_fusion.py:833-921) on the
    backend `auto` resolves to on one node: mnnvl on the 10.x family, trtllm on sm_90
    (srt/layers/flashinfer_comm_fusion.py:61-71), each with FlashInfer's own one-shot rule
    (capability.flashinfer_comm). On P2P / SHM groups: none priced (the FlashInfer fusion over PCIe is left out)."""
    if link != "nvlink":
        return None
    return mnnvl_fused_path(world) if arch in ("sm_100", "sm_103") else trtllm_fused_path(world)


def gdn_flashinfer_prefill(arch: str, chunk_tokens: int, state_dtype: str) -> bool:
    """flashinfer_gdn_prefill_default (srt/layers/attention/linear/gdn_backend.py:191-236) with the linear-attention
    backends left at their defaults: sm_90 with an fp32 state pool and a static chunk of at most 32,768 tokens,
    sm_100 (CUDA 13: the wheel pins flashinfer_python[cu13]) with a bf16 state pool and at most 8,192; head dims
    128, which linear_attention.prefill_path checks. Else the Triton kernels."""
    if arch == "sm_90":
        return state_dtype == "fp32" and 1 <= chunk_tokens <= 32768
    return arch == "sm_100" and state_dtype == "bf16" and 1 <= chunk_tokens <= 8192


PROFILE = EngineProfile(
    engine="sglang",
    version=VERSION,
    install=f"pip install sglang=={VERSION}",
    server_command=("python3", "-m", "sglang.launch_server"),
    vendors=("nvidia",),  # the CUDA wheel (sglang/srt/utils: is_cuda); mi-tune emits CUDA plans only
    vendor_source="sglang/srt/utils/common.py:158 (is_cuda: the CUDA wheel)",
    visible_devices_env=CUDA_VISIBLE_DEVICES,
    rules=rules.RULES,
    default_batching=default_batching,
    mixed_prefill_chunks=False,  # --enable-mixed-chunk off by default (autotune/engines/flags/sglang-0.5.23.yaml)
    # the overlap scheduler is on unless pipeline parallel turns it off
    # (srt/arg_groups/overrides.py:1623-1628 `_pipeline_parallel_overlap_disable`)
    overlap_under_pp=False,
    # event_loop_overlap (srt/managers/scheduler.py:2061-2131): each pass reads new requests (:2078), schedules and
    # launches the next batch (:2084-2112), then processes the previous batch's result (:2118-2120), which waits for
    # that batch's GPU work. The pass that reads a request arriving during step k starts when step k ends and
    # schedules step k+2: one batch is already scheduled ahead. event_loop_normal (:2026-2058, with
    # --disable-overlap-schedule; pp > 1 runs event_loop_pp, :6225-6233) schedules the next step after the last one's
    # result: none ahead. The wait is copy_done.synchronize()
    # (srt/managers/scheduler_components/batch_result_processor.py:268, :958)
    overlap_scheduled_ahead=lambda pp: 1,  # event_loop_overlap runs at pp 1 only (overlap_under_pp)
    scheduler_cpu_ms=0.4,  # prior (the v1 figure)
    # total x mem_fraction_static - weights, mem_fraction_static = (total - reserved) / total
    # (srt/arg_groups/memory_hook.py:298-326; autotune/perf/memory.py)
    memory_budget="mem_fraction_static",
    # --tp-size = tp * dp with DP attention (attn_tp = tp_size // attn_dp_size: srt/runtime_context.py:73-76)
    tp_spans_dp=True,
    # DP attention: chunked_prefill_size // attn_dp_size per rank (srt/arg_groups/parallel_hook.py:326-331)
    chunk_split_over_dp=True,
    # --max-mamba-cache-size: a separate state pool (srt/mem_cache/kv_cache_configurator.py:3346-3356)
    separate_state_pool=True,
    states_per_request=rules.MAMBA_SLOTS_PER_RUNNING_REQUEST,
    # Gated DeltaNet prefill (srt/layers/attention/linear/gdn_backend.py forward_extend, :948-1215): the q / k / v
    # split (fused_qkv_split_gdn_prefill, :1085) and the gates (fused_gdn_gating, :943-946, :1165) on either path.
    # Triton: q and k L2-normalised (srt/layers/attention/linear/kernels/gdn_triton.py:203-214
    # use_qk_l2norm_in_kernel: two l2norm_fwd, sglang/kernels/ops/attention/fla/chunk.py:109-112), then the four
    # kernels of sglang/kernels/ops/attention/fla/chunk.py:49-82 (chunk_local_cumsum, the fused kkt + solve_tril +
    # w / u kernel of sglang/kernels/ops/attention/fla/chunk_fwd.py:341-393, chunk_gated_delta_rule_fwd_h updating the
    # pool's state in place, chunk_fwd_o): 4 + 4. FlashInfer (srt/layers/attention/linear/kernels/gdn_flashinfer.py
    # extend, :481-594): q / k / v prepared (gdn_prefill_qkv_prepare_fwd), the gate exponentiated, the slot indices
    # mapped (>=, where, int64), the states gathered, cu_seqlens cast, the kernel, the states index_copy_'d back:
    # 2 + 8 around the one kernel
    gdn_chain_kernels=4,
    gdn_prefill_side_launches=(4, 10),
    gdn_flashinfer_prefill=gdn_flashinfer_prefill,
    triton_mla_archs=(),
    # a prefill replayed in the breakable (or piecewise) CUDA graph keeps one attention path, the absorbed MLA method
    # over the latent KV (MHA one-shot / chunked-KV shapes vary with the KV length and are not captured): fa3,
    # flashinfer and flashmla (srt/models/deepseek_common/attention_backend_handler.py:108-113), trtllm_mla (:171-173),
    # triton (:233-235). A larger step replays eagerly and takes MHA (:115-133).
    mla_graph_prefill_absorbed=True,
    # DSA (DeepSeek-V3.2, GLM-5.x): a prompt batch runs MHA_ONE_SHOT, the dense MLA prefill, while its longest
    # sequence is at most SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD = 2048 tokens (srt/environ.py:1983) on sm_90
    # / sm_100 (srt/layers/attention/dsa_backend.py:4054-4078, read by handle_attention_dsa,
    # srt/models/deepseek_common/attention_backend_handler.py:200-211), else the absorbed (MLA) path over each row's
    # top-k: flashmla_sparse by default with a bf16 KV cache (the sm_90 default), trtllm with FP8 on sm_10x
    # (srt/arg_groups/overrides.py:491-545, :697-708)
    dsa_mha_prefill_max_kv=2048,
    # MHA_ONE_SHOT on SM90 / SM10x only (srt/layers/attention/dsa_backend.py:4064-4070)
    dsa_mha_prefill_archs=("sm_90", "sm_100"),
    # flashmla_sparse pads a rank's query heads to 64 on Hopper (srt/layers/attention/dsa_backend.py:2819-2836); on
    # sm_10x the default FP8 KV cache runs trtllm's kernel instead, whose padding is not read (none taken)
    dsa_sparse_prefill_head_tile=(("sm_90", 64),),
    # --kv-cache-dtype auto on a DeepSeek-family DSA model (architecture in _DEEPSEEK_FAMILY_ARCHS and an index_topk:
    # srt/arg_groups/overrides.py:491-499, 745-760; srt/configs/model_config.py:191-212) resolves to fp8_e4m3 on a
    # CUDA device of compute capability major >= 10 without learnable attention sinks
    # (srt/arg_groups/overrides.py:525-540; only HYV4 has sinks, no catalog model). The pool then holds the raw
    # 576-byte FP8 latent row (kv_lora + rope, no scales) under the sm_10x default trtllm backends
    # (srt/mem_cache/kv_cache_configurator.py:3412-3440), the indexer keys in FP8 + a 4-byte scale either way
    # (srt/mem_cache/memory_pool.py DSATokenToKVPool)
    dsa_fp8_kv_families=("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "glm5_next"),
    dsa_fp8_kv_archs=("sm_100", "sm_103", "sm_120", "sm_121"),
    # with that FP8 cache on sm_10x both DSA backends default to trtllm (srt/arg_groups/overrides.py:714-720), which
    # quantises the queries to FP8 beside the cache (srt/layers/attention/dsa_backend.py:3826-3865,
    # mla_quantize_and_rope_for_fp8) and runs FlashInfer's trtllm-gen sparse MLA on FP8 Q and KV (:3970-3985,
    # backend="trtllm-gen"): a prompt chunk's sparse prefill too (forward_extend, :2210-2211). On sm_12x GLM runs
    # flashinfer_sparse_mla (srt/arg_groups/overrides.py:637-675), not read
    dsa_fp8_sparse_mma_archs=("sm_100", "sm_103"),
    # the indexer scores with DeepGEMM's fp8_mqa_logits / fp8_paged_mqa_logits by default
    # (srt/layers/attention/dsa/utils.py:457-503; srt/layers/attention/dsv4/indexer.py:880); on sm_12x a V4 model
    # runs TileLang's FP8 indexer kernel instead (srt/arg_groups/model_hook.py:482-502 sets
    # SGLANG_OPT_USE_TILELANG_INDEXER; srt/layers/attention/dsv4/indexer.py:862-865), FP8 MMA too: its speed against
    # DeepGEMM's is not read (a prior: the same FP8 rate)
    dsa_indexer_fp8_archs=("sm_90", "sm_100", "sm_103", "sm_120", "sm_121"),
    # V4.1's candidate consumers score DeepGEMM's paged sparse table on SM100
    # (srt/layers/attention/dsv4/v41_indexer/__init__.py:78-123; DEEPGEMM_PAGED_SPARSE_MQA_LOGITS needs
    # DEEPGEMM_BLACKWELL, is_sm100: srt/layers/deep_gemm_wrapper/configurer.py:57-78), dense masked blocks elsewhere
    # (srt/layers/attention/dsv4/v41_indexer/dense_blocks.py:121-140) below major 10 only: sm_11x / sm_12x raise at
    # start-up (the engine rule in autotune/capability/sglang_0_5_23.py), so in practice sm_90
    dsa_candidate_sparse_archs=("sm_100", "sm_103"),
    # sm_90: the default backend of a non-MLA model is FA3 (srt/arg_groups/model_override_base.py:303-311) over a
    # KV cache paged by 1 token by default (srt/arg_groups/overrides.py:1341-1364); its prefill reads the cache
    # through page_table (srt/layers/attention/flashattention_backend.py forward_extend, :1704-1708, :1789-1793):
    # FA3's PagedKVNonTMA path (autotune tiles.FA3_PAGED_CTA_FIXED_US)
    fa3_paged_kv_non_tma_archs=("sm_90",),
    # NVFP4 (W4A4) linears on sm_10x: --fp4-gemm-backend auto (srt/arg_groups/fields/exec_.py:282-291) resolves to
    # flashinfer_cutedsl on SM100 (srt/layers/quantization/fp4_utils.py:149-162), and the ModelOpt FP4 linear calls
    # flashinfer mm_fp4 with backend "cute-dsl" (srt/layers/quantization/fp4_utils.py:128-144;
    # srt/layers/quantization/modelopt_quant.py:165-170): the same CuTe-DSL block-scaled GEMM as vLLM 0.34's
    # (autotune/capability/profiles/vllm_0_34_0.py)
    cute_dsl_fp4_tile_archs=("sm_100",),
    # sm_90: FA3 is also the default backend of an MLA model (srt/arg_groups/model_override_base.py:335-338); with
    # --kv-cache-dtype fp8 its prefill casts the queries to the cache dtype (head dim <= 256, FA3:
    # srt/layers/attention/flashattention_backend.py:1425-1439, called for every extend at :1572-1580) and an MLA
    # layer's MHA path casts its up-projected keys and values to the queries' dtype (:1918-1921; the keys are built
    # in the cache dtype, srt/models/deepseek_common/attention_forward_methods/forward_mha.py:733-742): FP8 FA3
    fp8_kv_prefill_attention_archs=("sm_90",),
    allreduce_paths=allreduce_paths,
    graph_caps=graph_caps,
    # _flashinfer_allreduce_fusion_auto_enable turns the fusion on (backend "auto") for the listed architectures on
    # SM90/SM10x with TP > 1, no attention DP and no a2a backend (arg_groups/overrides.py:954-1003): the conditions
    # of the fusion.allreduce_rmsnorm rules (autotune/capability/sglang_0_5_23.py)
    allreduce_rmsnorm_default=True,
    allreduce_rmsnorm_max_tokens=allreduce_rmsnorm_max_tokens,
    fused_allreduce_path=fused_allreduce_path,
    quantised_dp_dispatch=quantised_dp_dispatch,
    dp_gather=dp_gather,
    prefill_graph_sizes=prefill_graph_sizes,
    fused_shared_experts=fused_shared_experts,
    # --expert-balancedness-report-mode prometheus starts the recorder (srt/eplb/expert_distribution.py:232-237) and
    # exports sglang:eplb_balancedness (srt/observability/metrics_collector.py:1025-1030)
    expert_load_report="balancedness_metric",
    decode_graph_max_bs=decode_graph_max_bs,
    auto_moe_kernel=auto_moe_kernel,
    # the down projection takes TMA where its `_down` config says USE_TMA, the up projection's is opt-in and unset
    # (srt/layers/moe/moe_runner/triton_utils/fused_moe.py:485-499); the DeepSeek-shaped Hopper `_down` configs set
    # it at their largest token key, which serves every larger batch (the triton_3_5_1 E=257,N=256 files of
    # NVIDIA_H200 and NVIDIA_H20 in that folder's configs/; the nearest key and the newest folder holding the file:
    # srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py:95-140)
    triton_moe_tma_down=True,
    # srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py:37-52 get_config_file_name (spaces -> "_",
    # block_shape printed as a Python list, per_channel_quant, "_down"), 55-175 get_moe_configs
    # ($SGLANG_MOE_CONFIG_DIR/configs/triton_<X_Y_Z>/<name>; every key must parse as int); the shapes of fused shared
    # experts: fused_shared_experts
    moe_configs=MoeConfigFiles(
        module="sglang",
        dir_env="SGLANG_MOE_CONFIG_DIR",
        device_name_separators=" ",
        device_renames=(),
        block_shape_spaces=True,
        per_channel_quant_suffix=True,
        triton_version_folder=True,
        triton_version_key=False,
        down_file=True,
    ),
)
