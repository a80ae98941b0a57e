"""vLLM 0.34.0 (CUDA wheel): the engine profile (autotune/capability/engine_profile.py). Sources: the wheel's
source, paths relative to site-packages (the citation test opens each cited line)."""

from __future__ import annotations

from autotune.capability import vllm_0_34_0 as rules
from autotune.capability.engine_profile import CUDA_VISIBLE_DEVICES, EngineProfile, MoeConfigFiles
from autotune.specs import Batching

VERSION = "0.34.0"


def default_batching(memory_gib: float, gpu_name: str, arch: str) -> Batching:
    """Batch limits `vllm serve` (UsageContext.OPENAI_API_SERVER) picks when the user sets none,
    vllm/engine/arg_utils.py:2995-3045: device memory >= 160 GiB: 16384 batched tokens, 1024 seqs; >= 70 GiB and
    neither an A100 nor a GB10 (cc 12.1): 8192 / 1024; else (and when the memory is unknown) 2048 / 256."""
    if memory_gib >= 160:
        return Batching(max_running=1024, chunked_prefill_tokens=16384)
    if memory_gib >= 70 and "a100" not in gpu_name.lower() and arch != "sm_121":
        return Batching(max_running=1024, chunked_prefill_tokens=8192)
    return Batching(max_running=256, chunked_prefill_tokens=2048)


def auto_moe_kernel(expert_dtype: str, arch: str, deepep: bool, ep: int, expert_format: str = "") -> str:
    """kernels.moe = auto (the oracles in vllm/model_executor/layers/fused_moe/oracle/): block FP8 on SM90 Triton
    first for ep == 1 and FlashInfer CUTLASS for ep > 1 (vllm/model_executor/layers/fused_moe/oracle/fp8.py:127-139),
    on SM100 FlashInfer (TRT-LLM/CUTLASS), on SM120 DeepGEMM, else Triton. Per-tensor FP8 follows the activation
    scheme (nothing reorders the priority list for it: vllm/model_executor/layers/fused_moe/oracle/fp8.py:94-110,
    walked in order at :498-503): static scales (fp8_tensor) run FlashInfer on SM90/SM100/SM120 (TRT-LLM on SM100,
    vllm/model_executor/layers/fused_moe/experts/trtllm_fp8_moe.py:174-181,396-406; CUTLASS on cc 9.0/10.x/12.x,
    vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:135-168), Triton below; dynamic scales
    (fp8_tensor_dynamic, and online FP8 of a bf16/fp16 checkpoint,
    vllm/model_executor/layers/quantization/online/fp8.py:665-674) are refused by TRT-LLM, FlashInfer CUTLASS and
    DeepGEMM (vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py:178-188, which the DeepGEMM backend's
    class requires too: vllm/model_executor/layers/fused_moe/experts/fallback.py:81-89) and run Triton
    (vllm/model_executor/layers/fused_moe/experts/triton_moe.py:197-204) everywhere. MXFP4: DeepGEMM on SM100/SM120,
    else
    Marlin; NVFP4 (ModelOpt): the FlashInfer kernels first
    (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py:238-247; TRT-LLM and CuteDSL on the SM100 family only,
    vllm/model_executor/layers/fused_moe/experts/trtllm_nvfp4_moe.py:227-234; CUTLASS on SM90/100/120,
    vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:135-146), valued as flashinfer_cutlass
    (the TRT-LLM kernel has no value of its own here), Marlin below SM100; bf16: FlashInfer CUTLASS on SM100/SM120
    (vllm/model_executor/layers/fused_moe/oracle/unquantized.py:68-80), Triton on SM90 (FlashInfer moved back), SM89."""
    if expert_dtype == "fp8":
        if expert_format == "fp8_tensor":
            return "flashinfer_cutlass" if arch in ("sm_90", "sm_100", "sm_120") else "triton"
        if expert_format in ("fp8_tensor_dynamic", "bf16", "fp16"):
            return "triton"
        if arch == "sm_90":
            return "triton" if ep == 1 else "flashinfer_cutlass"
        return {"sm_100": "flashinfer_cutlass", "sm_120": "deep_gemm"}.get(arch, "triton")
    if expert_dtype == "fp4":
        blackwell = arch in ("sm_100", "sm_120")
        if expert_format == "nvfp4":
            return "flashinfer_cutlass" if blackwell else "marlin"
        return "deep_gemm" if blackwell else "marlin"
    return "flashinfer_cutlass" if arch in ("sm_100", "sm_120") else "triton"


PROFILE = EngineProfile(
    engine="vllm",
    version=VERSION,
    install=f"pip install vllm=={VERSION}",
    server_command=("vllm", "serve"),
    vendors=("nvidia",),  # the CUDA wheel (vllm/platforms/cuda.py); ROCm/XPU builds are separate wheels
    vendor_source="vllm/platforms/__init__.py:57 (cuda_platform_plugin: the CUDA wheel, NVML)",
    visible_devices_env=CUDA_VISIBLE_DEVICES,
    rules=rules.RULES,
    default_batching=default_batching,
    # chunked prefill: prefill chunks share the step token budget with the running decodes (vllm/v1/core/sched)
    mixed_prefill_chunks=True,
    # async scheduling is on by default with the uniproc and multiproc executors, PP included
    # (vllm/config/vllm.py:1610-1637; vllm/v1/executor/multiproc_executor.py:700)
    overlap_under_pp=True,
    scheduler_cpu_ms=0.5,  # prior (the v1 figure)
    # vllm/v1/worker/utils.py:742-743 requested = total x utilization (autotune/perf/memory.py)
    memory_budget="gpu_memory_utilization",
    # DP ranks are separate engines each with its own TP group; only MoE layers span tp*dp
    # (vllm/config/parallel.py:155-157; vllm/model_executor/models/deepseek_v2.py:1339-1345)
    tp_spans_dp=False,
    separate_state_pool=False,  # hybrid states come from the shared KV pool per request
    states_per_request=rules.MAMBA_STATES_PER_REQUEST,
    # MLA on sm_12x: TRITON_MLA first (vllm/platforms/cuda.py:131-135); on sm_8x (FLASH_ATTN_MLA and FLASHMLA need
    # sm_90, FLASHINFER_MLA sm_100) TRITON_MLA is what remains of the list at vllm/platforms/cuda.py:146-151
    triton_mla_archs=("sm_120", "sm_89", "sm_80"),
    # sm_90: FLASH_ATTN (FA3, vllm/v1/attention/backends/fa_utils.py:99-101) for GQA and FLASH_ATTN_MLA for MLA lead
    # the lists (vllm/platforms/cuda.py:146-150, :167-179); both cap a captured batch's KV splits at
    # flash_attn_max_num_splits_for_cuda_graph = 32 (vllm/config/attention.py:66;
    # vllm/v1/attention/backends/flash_attn.py:773-779, vllm/v1/attention/backends/mla/flashattn_mla.py:155-175)
    fa3_graph_split_cap_archs=("sm_90",),
    # forward_mha copies the prefill attention output into the layer output
    # (vllm/model_executor/layers/attention/mla_attention.py:3521-3526)
    mla_prefill_output_copy=True,
    auto_moe_kernel=auto_moe_kernel,
    # vllm/model_executor/layers/fused_moe/fused_moe.py:1178-1191 get_config_file_name (block_shape without spaces,
    # the H200 family renamed NVIDIA_H200), 1194-1256 get_moe_configs ($VLLM_TUNED_CONFIG_FOLDER/<name>; the
    # "triton_version" key is dropped, 1245); vllm/utils/platform_utils.py:73-78 (whitespace and "/" -> "_")
    moe_configs=MoeConfigFiles(
        module="vllm",
        dir_env="VLLM_TUNED_CONFIG_FOLDER",
        device_name_separators=r"[\s/]+",
        device_renames=(("H200", "NVIDIA_H200"),),
        block_shape_spaces=False,
        per_channel_quant_suffix=False,
        triton_version_folder=False,
        triton_version_key=True,
        down_file=False,
        fuses_shared_experts=False,
    ),
)
