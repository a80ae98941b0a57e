"""What the attention backend a plan runs implies on its arch, read from the engine profile once per Context
(opcore.context): the decode kernel's KV-split cap, the MLA prefill rows that take the absorbed path, the MLA
decode query's concat."""

from __future__ import annotations

from autotune.capability.profiles import profile
from autotune.perf import efficiency as eff
from autotune.perf import tiles
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
