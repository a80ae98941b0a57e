"""What the attention backend a plan runs implies on its arch, read from the engine profile once per Context
(opcore.context): the decode kernel's KV-split cap, the MLA prefill rows and graphed steps that take the absorbed
path, the MLA decode query's concat, a DSA layer's FP8 sparse prefill speed and indexer dtype."""

from __future__ import annotations

from autotune.capability import kv_cache_dtype_on
from autotune.capability.profiles import profile
from autotune.perf import efficiency as eff
from autotune.perf import tiles
from autotune.perf.layers import dsa_top_k
from autotune.perf.rates import RatesTable
from autotune.specs import HardwareProfile, ModelSpec, PhasePlan


def decode_split_cap(engine: str, arch: str, attention_kernel: str) -> int:
    """The KV-split cap of the decode attention kernel a plan runs: the engine's `auto` kernel on the archs its
    profile names (fa3_graph_split_cap_archs: vLLM's FA3 on sm_90, tiles.FA3_GRAPH_MAX_SPLITS); 0 for the kernels
    that split to fill the SMs (FlashInfer, FlashMLA, FA2, SGLang's FA3 with num_splits=0: sglang
    srt/layers/attention/flashattention_backend.py:338-342)."""
    if attention_kernel == "auto" and arch in profile(engine).fa3_graph_split_cap_archs:
        return tiles.FA3_GRAPH_MAX_SPLITS
    return 0


def mla_absorbed_prefill_rows(engine: str, arch: str, attention_kernel: str) -> int:
    """The most query rows per sequence a prefill may have and still run on the `auto` MLA backend's absorbed
    (decode) path (the engine profile's mla_absorbed_prefill_rows for the arch: vLLM's FLASH_ATTN_MLA on sm_90;
    its mla_absorbed_prefill_rows_default on other archs and for a kernel the plan names); 0 where every prefill
    takes the MHA path."""
    p = profile(engine)
    if attention_kernel == "auto":
        return next((rows for a, rows in p.mla_absorbed_prefill_rows if a == arch), p.mla_absorbed_prefill_rows_default)
    return p.mla_absorbed_prefill_rows_default


def mla_graph_absorbed_tokens(
    engine: str, model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, graph_tokens: float | None
) -> float:
    """The instance's step tokens up to which a prompt-carrying step runs its dense MLA layers' prompts on the
    absorbed path because it replays the engine's prefill CUDA graph (profile mla_graph_prefill_absorbed): the
    graph's cap, `graph_tokens` (step_fn's caps) or else the engine's (efficiency.graph_caps); 0 where the engine
    does not, or the model has no absorbed-MLA layer."""
    if not profile(engine).mla_graph_prefill_absorbed or not model.latent_kv:
        return 0.0
    return eff.graph_caps(model, phase, engine, hw, 1)[1] if graph_tokens is None else graph_tokens


def mla_query_concat(engine: str, arch: str, attention_kernel: str) -> bool:
    """Whether the MLA decode backend a plan runs concatenates the latent query with its rope part (the engine
    profile's mla_decode_query_concat), which the `auto` backend on mla_split_query_archs does not."""
    p = profile(engine)
    return p.mla_decode_query_concat and not (attention_kernel == "auto" and arch in p.mla_split_query_archs)


def dsa_fp8_sparse_speed(model: ModelSpec, phase: PhasePlan, hw: HardwareProfile, engine: str) -> float:
    """Speed of a DSA layer's sparse prefill kernel on FP8 MMA against the BF16 one it is priced as: where the
    engine runs it on FP8 queries and an FP8 KV cache (the plan's or the engine's default, kv_cache_dtype_on) on
    an arch its profile names (dsa_fp8_sparse_mma_archs), the part's FP8 / BF16 dense peak ratio; 1 elsewhere. The
    ratio is a prior: the FP8 kernel taken to reach the same fraction of the FP8 peak as the BF16 sparse kernel of
    the BF16 one (no public figure of trtllm-gen's FP8 sparse MLA rate; TensorRT-LLM's DeepSeek README says its FP8
    MLA kernels are "accelerated by FP8 arithmetic", NVIDIA/TensorRT-LLM#9141)."""
    arch = hw.gpu.arch
    if arch not in profile(engine).dsa_fp8_sparse_mma_archs or not dsa_top_k(model):
        return 1.0
    if kv_cache_dtype_on(engine, phase, model, arch) != "fp8":
        return 1.0
    bf16, fp8 = hw.gpu.peak_tflops.get("bf16", 0.0), hw.gpu.peak_tflops.get("fp8", 0.0)
    return fp8 / bf16 if bf16 > 0 and fp8 > bf16 else 1.0


def dsa_indexer_dtype(arch: str, fp8_archs: tuple[str, ...], table: RatesTable) -> str:
    """The indexer's logits GEMM dtype: fp8 on the profile's FP8-indexer archs with an FP8 GEMM rate, else bf16."""
    return "fp8" if arch in fp8_archs and ("gemm", "fp8", "m>1024") in table.entries else "bf16"
