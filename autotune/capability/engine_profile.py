"""EngineProfile: how one engine version behaves where that is not a yes/no rule (capability/rules.py holds those).

One profile per engine version, in `capability/profiles/<engine>_<version>.py`, registered in
`capability/profiles/__init__.py`; every module that used to branch on the engine name reads its profile instead.
Each field that is an engine rule cites the engine's source (`file:line`) in the profile that sets it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

from autotune.capability.rules import RuleTable
from autotune.specs import Batching, ModelSpec, PhasePlan

# How the engine sizes its KV pool (perf/memory.py reads it):
# - "gpu_memory_utilization": vLLM, a share of TOTAL memory, activations and a reserve inside it
# - "mem_fraction_static": SGLang, total less a reserved share that holds activations and CUDA graphs
MemoryBudget = Literal["gpu_memory_utilization", "mem_fraction_static"]
# CUDA's device selection, in NVML / nvidia-smi order
CUDA_VISIBLE_DEVICES = (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("CUDA_VISIBLE_DEVICES", "{gpus}"))
# EngineProfile.dsa_mha_prefill_max_kv: the model's indexer top-k (index_topk) is the limit
DSA_MHA_PREFILL_TOPK = -1
# ... and on an arch without the dense MHA path, a limit of one token: every prompt row on the sparse path
DSA_SPARSE_ONLY_KV = 1


@dataclass(frozen=True)
class MoeConfigFiles:
    """How the engine names and finds tuned fused-MoE Triton config files (kernels/moe_configs.py)."""

    module: str  # the installed package whose fused MoE the tuner calls and benchmarks against
    dir_env: str  # the environment variable that points the engine at a folder of tuned files
    device_name_separators: str  # regex: runs of these characters in the device name become "_"
    device_renames: tuple[tuple[str, str], ...]  # a "_"-separated device-name token -> the whole device name
    block_shape_spaces: bool  # block_shape printed as a Python list "[128, 128]" (else "[128,128]")
    per_channel_quant_suffix: bool  # ",per_channel_quant=True" in the name of per-channel files
    triton_version_folder: bool  # files under <dir>/configs/triton_X_Y_Z/ (else <dir>/ flat)
    triton_version_key: bool  # the file carries a "triton_version" key (else batch keys only)
    down_file: bool  # a separate `_down` file for the second GEMM


@dataclass(frozen=True)
class AllReducePath:
    """One path of the engine's tensor-parallel all-reduce dispatch (perf/comm.py costs it): the engine takes it for
    a message of at most `max_bytes`; it runs one-shot (every rank reads every peer's whole buffer) up to
    `one_shot_max_bytes`, else two-shot (reduce-scatter + all-gather); each synchronised round costs the P2P kernels'
    fixed time once (comm_rates.engine_ar_latency_us): `one_shot_syncs` / `two_shot_syncs` rounds. `copies`: device
    copies of the whole message around the kernel (into and out of a registered buffer), each one more kernel;
    `in_kernel_copies`: copies of the whole message the kernel itself makes before its first barrier (memory time, no
    launch: TensorRT-LLM's kernels with COPY_INPUT, copying the input into the shared buffer outside CUDA graphs).
    `two_stage_grid_bytes`: the two-shot is a reduce-scatter round, a grid-wide barrier, then an all-gather round
    reading the peers' reduced parts (vLLM's cross_device_reduce_2stage), whose fixed grid covers this many bytes of a
    rank's 1/p part per pass (blocks x threads x bytes per thread); each pass takes at least
    comm_rates.CUSTOM_TWO_STAGE_WAVE_US (perf/p2p_allreduce.py _two_stage_wire_s). 0: a one-round two-shot.
    `two_shot_norm_kernel`, for a fused all-reduce + RMSNorm kernel (EngineProfile.fused_allreduce_path): its two-shot
    leaves the norm to a kernel of its own (FlashInfer's mnnvl backend, capability/flashinfer_comm.py)."""

    name: str  # reported as allreduce:<name>: custom, flashinfer, symm_mem
    max_bytes: float  # largest message, inclusive
    one_shot_max_bytes: float  # largest one-shot message, inclusive
    two_shot_syncs: int = 1
    one_shot_syncs: int = 1
    copies: int = 0
    two_stage_grid_bytes: int = 0
    in_kernel_copies: int = 0
    two_shot_norm_kernel: bool = False


# (arch, world size, transport of the group: nvlink / p2p / shm, comm.transport) -> the engine's P2P all-reduce
# paths in dispatch order; a message no path takes goes to NCCL
AllReduceDispatch = Callable[[str, int, str], tuple[AllReducePath, ...]]
GraphCaps = Callable[[str, float, ModelSpec, PhasePlan, int], tuple[int, int]]
FusionMaxTokens = Callable[[str, int, int], int]
# (arch, world size, transport of the group) -> the fused all-reduce + RMSNorm kernel the engine calls (None: none)
FusedAllReduceDispatch = Callable[[str, int, str], "AllReducePath | None"]


class DpStep(NamedTuple):
    """What an engine's attention-DP gather rule (EngineProfile.dp_gather) reads of one step (perf/dp_gather.dp_gather
    builds it)."""

    prompt: bool  # some DP rank runs prompt tokens (an extend or mixed batch)
    verify: bool  # the decodes verify draft tokens (speculative decoding)
    graph: bool  # the step replays a CUDA graph: a prompt step the prompt-carrying one (every rank's rows fit it), else
    # the decode one
    dep: bool  # attention TP 1 and the experts spread over exactly the DP ranks
    a2a: bool  # an a2a MoE backend (comm.all2all deepep)
    idle: bool  # some DP rank has no rows (fewer decode rows than ranks)
    sparse: bool  # the ranks' rows sum to under half of the longest rank's x ranks (only with idle ranks)
    link: str  # transport of the stage's GPUs (nvlink / p2p / shm: perf/topology.transport)
    world: int  # the stage's GPUs (the gather's group: tp x dp)
    sum_bytes: float  # bytes of a buffer of every rank's rows (the step's rows x one hidden row)
    family: str  # the model's family (ModelSpec.family: its HF model_type), where the return differs by model
    two_batch: bool  # two-batch overlap (overlap.two_batch)


class SharedFusionFacts(NamedTuple):
    """What an engine's shared-expert fusion rule (EngineProfile.fused_shared_experts) reads of a plan's MoE layers
    (perf/sharding.fused_shared_experts builds it)."""

    family: str  # the model's family (ModelSpec.family: its HF model_type)
    routed: int  # routed experts of a MoE layer
    shared: int  # shared experts of a MoE layer (its shared parameters over one routed expert's)
    ep: int  # expert-parallel size
    arch: str  # the GPU's arch ("sm_90")
    a2a: bool  # an a2a MoE backend (comm.all2all deepep)
    two_batch: bool  # two-batch overlap (overlap.two_batch)
    moe_kernel: str  # kernels.moe as the plan sets it ("auto": the engine's pick)
    expert_format: str  # the checkpoint's routed-expert format (ModelSpec.expert_format)


# a DpStep -> (the gather before the FFN: "allgather" of every rank's rows padded to the longest (MAX_LEN) or
# "allreduce" of a buffer of all ranks' rows, each rank's at its offset and zeros elsewhere (SUM_LEN); the return after
# it: "reducescatter" or "allreduce" of that buffer, then this rank's slice)
DpGatherRule = Callable[[DpStep], tuple[str, str]]


@dataclass(frozen=True)
class EngineProfile:
    """One engine version: what it is, how it starts, and the behaviour the model, simulator and search read."""

    engine: str  # Plan.engine
    version: str  # the pinned version: flag table engines/flags/<engine>-<version>.yaml, install command
    install: str  # how to get it (supervisor's hint when its executable or module is missing)
    server_command: tuple[str, ...]  # argv before the model: ("vllm", "serve") / ("python3", "-m", ...)
    vendors: tuple[str, ...]  # HardwareProfile accelerator vendors it drives
    vendor_source: str  # where the engine says so
    visible_devices_env: tuple[tuple[str, str], ...]  # the device selection its runtime reads ("{gpus}": indices)
    rules: RuleTable  # its capability rule table
    # ---- default batching: Batching(max_running, chunked_prefill_tokens) from (GPU memory GiB, GPU name, arch)
    default_batching: Callable[[float, str, str], Batching]
    # ---- scheduler
    mixed_prefill_chunks: bool  # prefill chunks ride in decode steps (else prefill-only steps)
    overlap_under_pp: bool  # CPU scheduling overlaps the GPU step with pipeline parallel too (else only at pp 1)
    # pp -> batches the event loop has already scheduled, beyond the pp micro-batches the GPUs run, when it reads a
    # new request while its scheduling overlaps the GPU (efficiency.scheduler_overlapped): that request's first step
    # comes after them (efficiency.pickup_lag_steps; the simulator's admission and the screen's TTFT). 0: it joins
    # the next step
    overlap_scheduled_ahead: Callable[[int], int]
    scheduler_cpu_ms: float  # per-step CPU scheduling time, ms (a prior: perf/efficiency.py)
    # ---- memory and sharding
    memory_budget: MemoryBudget
    tp_spans_dp: bool  # the TP group spans the DP-attention ranks (--tp-size = tp * dp): all-reduce world, dense
    # MLP over all ranks, LM head over tp*dp without --enable-dp-lm-head, shared experts over tp*dp
    # under attention DP each rank prefills its own requests with chunked_prefill_tokens / dp of them per step (else
    # each rank's scheduler takes up to the whole chunk): sim/serve.py, perf/serving.py
    chunk_split_over_dp: bool
    separate_state_pool: bool  # hybrid models: linear-attention states in their own pool (else per request, in KV)
    states_per_request: int  # linear-attention state copies a running request pins (before speculative tokens)
    # ---- automatic kernel choices
    triton_mla_archs: tuple[str, ...]  # archs where `auto` attention on an MLA model is the Triton MLA kernel
    # (expert dtype, arch, deepep, ep, checkpoint expert format) -> kernels.moe value
    auto_moe_kernel: Callable[[str, str, bool, int, str], str]
    moe_configs: MoeConfigFiles | None  # None: the engine reads no tuned fused-MoE Triton files
    # vllm-ascend's NPU platform: HCCL collectives, ACL-graph decode launches and the platform options perf/ascend.py
    # models (PhasePlan.platform)
    ascend_platform: bool = False
    # packages the server's Python must import besides the one that owns its executable (a platform plugin that the
    # engine discovers by entry point: without it `vllm serve` starts on the wrong platform or none)
    plugin_modules: tuple[str, ...] = ()
    # archs where the `auto` decode attention is FA3 run in CUDA graphs with its KV splits capped
    # (perf/tiles.py FA3_GRAPH_MAX_SPLITS): few (sequence, KV head) tiles then leave SMs idle
    fa3_graph_split_cap_archs: tuple[str, ...] = ()
    # archs where the `auto` decode attention of a non-latent layer is FlashAttention-2 over the paged KV cache,
    # which splits the KV only for one-token GQA batches and runs everything else one CTA per (sequence, query head)
    # (perf/tiles.py fa2_decode_streams)
    fa2_decode_archs: tuple[str, ...] = ()
    # archs where the `auto` prefill attention of a layer with a paged KV cache is FA3 on pages shorter than its KV
    # block: the PagedKVNonTMA path (perf/tiles.py FA3_PAGED_CTA_FIXED_US, rates.FA3_PAGED_KV_PREFILL_SPEED)
    fa3_paged_kv_non_tma_archs: tuple[str, ...] = ()
    # archs where the `auto` prefill attention over an FP8 KV cache runs FA3 on FP8 queries, keys and values (the
    # dense-prefix varlen prefill, an MLA layer's MHA path included): fractions.fp8_prefill_speed
    fp8_kv_prefill_attention_archs: tuple[str, ...] = ()
    mla_prefill_output_copy: bool = False  # an MLA prefill copies its attention output once more (perf/mla.py)
    # archs where a per-tensor FP8 linear runs vLLM's CUTLASS scaled-mm, one CTA per output tile over the whole K
    # (perf/tiles.py cutlass_fp8_tile): a GEMM of few tiles and a long K is bound by one CTA's K loop
    cutlass_fp8_tile_archs: tuple[str, ...] = ()
    # archs where an NVFP4 (W4A4) linear runs FlashInfer's CuTe-DSL block-scaled GEMM, one CTA per output tile over
    # the whole K at any tactic (perf/tiles.py CUTE_DSL_FP4_MIN_TILE): a GEMM of few tiles and a long K is bound by
    # one CTA's K loop
    cute_dsl_fp4_tile_archs: tuple[str, ...] = ()
    # the tensor-parallel all-reduce dispatch (AllReduceDispatch); None: NCCL only (no P2P all-reduce kernel)
    allreduce_paths: AllReduceDispatch | None = None
    # CUDA graphs at the engine's default capture sizes, GraphCaps: (arch, GPU memory GiB, model, phase, decode
    # query length) -> (the largest decode batch, in requests, and the largest prompt-carrying step, in tokens,
    # that replay a graph on one engine rank); a larger step runs without one (perf/efficiency.py graph_caps).
    # None: every step replays a graph
    graph_caps: GraphCaps | None = None
    # (GPU memory GiB, phase) -> the decode CUDA graphs' largest batch per rank as the engine resolves it (the plan's
    # batching.cuda_graph_max_bs, else its default), where the engine sizes its KV budget's graph reserve from it
    # (perf/memory.py); None: the reserve does not follow it
    decode_graph_max_bs: Callable[[float, PhasePlan], int] | None = None
    # (arch, query rows) where the `auto` MLA backend runs a prefill of at most that many query rows per sequence
    # on its absorbed (decode) path instead of the MHA prefill path (perf/mla_ops.py absorbed_prefill), and the
    # rows every other MLA backend does so for (0: none)
    mla_absorbed_prefill_rows: tuple[tuple[str, int], ...] = ()
    mla_absorbed_prefill_rows_default: int = 0
    # the engine runs a dense MLA layer's prompts on its absorbed path in every prompt-carrying step it replays in
    # its prefill CUDA graph (graph_caps' step tokens), whatever their length (perf/mla_ops.py absorbed_prefill)
    mla_graph_prefill_absorbed: bool = False
    # KV tokens per split of the Triton MLA decode kernel (power-of-two splits, at most 2 per SM), whose fp32
    # partial outputs are written and read back once more (perf/mla.py triton_scratch_bytes); 0: not modelled
    triton_mla_split_tokens: int = 0
    # the MLA decode backends concatenate the latent query with its rope part in a kernel of their own before the
    # attention kernel (perf/mla.py query_concat_bytes), except the `auto` backend on these archs, which takes the
    # two parts apart
    mla_decode_query_concat: bool = False
    # an MLA prefill on the MHA path with a cached prefix gathers the prefix's latent KV, up-projects it through
    # kv_b, builds its keys and merges the prefix's attention output with the new tokens' (perf/mla.py)
    mla_prefill_prefix_up_projection: bool = False
    mla_split_query_archs: tuple[str, ...] = ()
    # a DSA layer's prompt rows (absorbed MLA over the indexer's top-k: DeepSeek-V3.2, GLM-5.x) run the dense MHA
    # prefill while a sequence's KV is at most this many tokens (DSA_MHA_PREFILL_TOPK: the model's top-k) and the
    # sparse absorbed path over the top-k beyond it (perf/mla_ops.py sparse_prefill); 0: every DSA prompt on the MHA
    # path (not read for the engine)
    dsa_mha_prefill_max_kv: int = 0
    # the archs where the engine has that dense MHA path for DSA prompts; elsewhere every prompt takes the sparse path
    dsa_mha_prefill_archs: tuple[str, ...] = ()
    # (arch, heads) the sparse prefill kernel pads a rank's query heads to a multiple of (perf/mla_ops.py)
    dsa_sparse_prefill_head_tile: tuple[tuple[str, int], ...] = ()
    # a DSA model's (perf/layers.py dsa_top_k above 0) `kernels.kv_cache_dtype: auto` is an FP8 KV cache where its
    # family (HF model_type) is in dsa_fp8_kv_families and the GPU's arch in dsa_fp8_kv_archs: the engine's default
    # (capability.kv_cache_dtype_on); elsewhere `auto` is the checkpoint's KV dtype
    dsa_fp8_kv_families: tuple[str, ...] = ()
    dsa_fp8_kv_archs: tuple[str, ...] = ()
    # archs where the DSA sparse prefill kernel over an FP8 KV cache runs FP8 MMA on FP8 queries and keys
    # (perf/attention_choice.py dsa_fp8_sparse_speed)
    dsa_fp8_sparse_mma_archs: tuple[str, ...] = ()
    # archs where the DSA / V4 lightning indexer scores on FP8 tensor cores (DeepGEMM's fp8_mqa_logits /
    # fp8_paged_mqa_logits or a TileLang FP8 kernel): its logits op is priced at the FP8 GEMM rate there, BF16
    # elsewhere (perf/mla_ops.py indexer_ops)
    dsa_indexer_fp8_archs: tuple[str, ...] = ()
    # archs where a DeepSeek-V4.1 candidate consumer's indexer scores only the candidate blocks (DeepGEMM's sparse
    # MQA logits, without decode context parallelism); elsewhere it scores every entry and masks (perf/layers.py
    # indexer_scored, Context.dsa_candidate_sparse)
    dsa_candidate_sparse_archs: tuple[str, ...] = ()
    # the Triton fused MoE's down projection of a block-FP8 checkpoint loads its tiles by TMA at prefill sizes (its
    # tuned `_down` config sets USE_TMA), which takes away the fixed time per wave of tiles the pointer-gathered
    # kernel pays (perf/oplist.py _moe_waves)
    triton_moe_tma_down: bool = False
    # the fused all-reduce + residual add + RMSNorm (plan field fusion.allreduce_rmsnorm): on by default where the
    # engine's rules admit it (capability.allreduce_rmsnorm_on resolves a plan that leaves the field unset), and the
    # largest step it fuses, FusionMaxTokens: (arch, all-reduce world, bytes of one hidden row) -> rows per rank
    # (0: none; a larger step runs the unfused all-reduce and norm)
    allreduce_rmsnorm_default: bool = False
    allreduce_rmsnorm_max_tokens: FusionMaxTokens | None = None
    # the kernel a fused all-reduce + RMSNorm runs (FusedAllReduceDispatch, perf/comm_fused.py prices it); None: the
    # engine's all-reduce with the norm's work folded in
    fused_allreduce_path: FusedAllReduceDispatch | None = None
    # (kernels.moe, checkpoint expert format, ep, dp) -> whether attention DP's all-gather dispatch of an EP MoE layer
    # moves the rows quantised for the expert GEMMs (with the routing's ids and weights) rather than bf16 hidden
    # states (perf/sharding.dispatch_act_bytes); None: bf16 rows
    quantised_dp_dispatch: Callable[[str, str, int, int], bool] | None = None
    # attention DP's gather before the FFN and return after it, by step (DpGatherRule; perf/dp_gather.dp_gather); None:
    # an all-gather of the ranks' rows and a reduce-scatter back on every step
    dp_gather: DpGatherRule | None = None
    # the breakable prefill graph's capture sizes up to a token cap (perf/dp_gather.py buckets, perf/memory.py reserve);
    # None: the engine captures no prompt graph of bucketed sizes
    prefill_graph_sizes: Callable[[int], tuple[int, ...]] | None = None
    # shared experts the engine fuses into the routed fused-MoE kernel as more experts every token picks (top-k + n,
    # their weights sharded as a routed expert's; perf/ffn_shape.py), by plan (SharedFusionFacts -> n); None: none
    fused_shared_experts: Callable[[SharedFusionFacts], int] | None = None
    # how the engine reports its ranks' expert loads to `measure` (measure/expert_load.py): "balancedness_metric" (a
    # Prometheus summary of each pass's mean / max rank load, with its recorder flags), "eplb_log" (EPLB's logged
    # per-step loads: only where the plan runs EPLB), "" (none)
    expert_load_report: str = ""
    # a Gated DeltaNet layer's prompt-token kernels besides its convolution and gated norm (perf/linear_attention.py
    # prefill_path): the kernels of the FLA Triton chunked chain the engine vendors, and the launches around the scan
    # (q / k / v preparation, gates, state gather / scatter) on that chain and on FlashInfer's one-kernel GDN prefill;
    # gdn_flashinfer_prefill: (arch, chunked-prefill tokens, state dtype) -> whether the engine runs FlashInfer's
    # kernel (None: never). gdn_chain_kernels 0: not listed, the layer's scan is one op at the prior (vllm-ascend)
    gdn_chain_kernels: int = 0
    gdn_prefill_side_launches: tuple[int, int] = (0, 0)
    gdn_flashinfer_prefill: Callable[[str, int, str], bool] | None = None

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"

    def dsa_prefill(self, arch: str, top_k: int) -> tuple[int, int]:
        """(dsa_mha_prefill_max_kv in tokens, DSA_MHA_PREFILL_TOPK read as the model's `top_k`; the sparse prefill's
        query-head tile on `arch`, 0 none) for perf's Context; DSA_SPARSE_ONLY_KV on an arch outside
        dsa_mha_prefill_archs; (0, 0) for a model without DSA layers (`top_k` 0)."""
        if not top_k:
            return 0, 0
        limit = top_k if self.dsa_mha_prefill_max_kv == DSA_MHA_PREFILL_TOPK else self.dsa_mha_prefill_max_kv
        if limit and arch not in self.dsa_mha_prefill_archs:
            limit = DSA_SPARSE_ONLY_KV
        return limit, dict(self.dsa_sparse_prefill_head_tile).get(arch, 0)
