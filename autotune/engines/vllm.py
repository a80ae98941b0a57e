"""Plan -> `vllm serve` processes (vLLM 0.34.0), with vllm-router in front of replicas or a P/D pair."""

from __future__ import annotations

import json
from dataclasses import dataclass

from autotune.capability.profiles import profile
from autotune.engines.common import KernelFlags, assemble_launch, check_fusions, choose, kernel_args
from autotune.engines.flags import ENGINE_VERSIONS
from autotune.engines.layout import Instance, model_arg
from autotune.engines.routers import vllm_router
from autotune.specs.best import Launch
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import PhasePlan, Plan

ENGINE = "vllm"
VERSION = ENGINE_VERSIONS[ENGINE]
LABEL = f"{ENGINE} {VERSION}"
SERVER_COMMAND = list(profile(ENGINE).server_command)

# (plan kernels.attention, attention family) -> --attention-backend (AttentionBackendEnum name)
ATTENTION_BACKEND = {
    ("triton", "mha"): "TRITON_ATTN",
    ("flashinfer", "mha"): "FLASHINFER",
    ("triton", "mla"): "TRITON_MLA",
    ("flashinfer", "mla"): "FLASHINFER_MLA",
}
MOE_BACKEND = {
    "triton": "triton",
    "cutlass": "cutlass",
    "marlin": "marlin",
    "deep_gemm": "deep_gemm",
    "flashinfer_cutlass": "flashinfer_cutlass",
    "b12x": "b12x",
}
LINEAR_BACKEND = {"cutlass": "cutlass", "triton": "triton"}  # --linear-backend
KV_CACHE_DTYPE = {"fp8": "fp8"}
CUSTOM_ALLREDUCE_ARGS = {"nccl": ["--disable-custom-all-reduce"], "custom": [], "pcie_ipc": []}
# vllm/envs.py: FlashInfer PCIe-IPC all-reduce, dispatched before the custom kernel (cuda_communicator.py:389-460)
PCIE_IPC_ENV = {"VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "1"}
# FlashInfer's all-reduce and torch symmetric memory run around the custom kernel on NVSwitch boxes
# (cuda_communicator.py:389-458), both on by default (vllm/envs.py:2066-2072) and not turned off by
# --disable-custom-all-reduce (cuda_communicator.py:64-72): an NCCL plan (the model prices NCCL alone) turns them off
NCCL_ONLY_ENV = {"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}
# --speculative-config method per plan speculative.method (vllm/config/speculative.py)
SPECULATIVE_METHOD = {"mtp": "mtp", "dspark": "dspark"}
# (plan comm.all2all, phase) -> --all2all-backend; None = the engine default (allgather_reducescatter)
ALL2ALL_BACKEND = {
    ("allgather_reducescatter", "both"): None,
    ("allgather_reducescatter", "prefill"): None,
    ("allgather_reducescatter", "decode"): None,
    ("deepep", "both"): "deepep_high_throughput",
    ("deepep", "prefill"): "deepep_high_throughput",
    ("deepep", "decode"): "deepep_low_latency",
}
FUSION_PASS = {"allreduce_rmsnorm": "fuse_allreduce_rms"}  # plan fusion -> compilation_config.pass_config key
# NIXL P/D recipe (docs/features/nixl_connector_usage.md): NixlConnector ignores the role, the router decides
NIXL_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_load_failure_policy": "fail"}
NIXL_SIDE_CHANNEL_BASE_PORT = 5600  # vLLM's default; an instance with dp ranks uses base .. base + dp - 1
UCX_ENV = {"UCX_NET_DEVICES": "all"}


# `--quantization fp8` on a bf16 checkpoint is deprecated in 0.34 and mapped to fp8_per_tensor with a warning
# (model_loader/weight_utils.py:381-389; quantization/fp8.py:103-109): name it directly
KERNEL_FLAGS = KernelFlags(
    LABEL,
    ATTENTION_BACKEND,
    "--moe-backend",
    MOE_BACKEND,
    KV_CACHE_DTYPE,
    "--linear-backend",
    LINEAR_BACKEND,
    online_fp8="fp8_per_tensor",
)


@dataclass(frozen=True)
class _Ctx:
    plan: Plan
    model: ModelSpec
    inst: Instance
    phase: PhasePlan
    placed: tuple[Instance, ...]


def _parallel(ctx: _Ctx) -> list[str]:
    p = ctx.phase
    args = ["-tp", str(p.tp), "-dp", str(p.dp), "-pp", str(p.pp)] + (["--enable-expert-parallel"] if p.ep > 1 else [])
    args += ["--decode-context-parallel-size", str(p.dcp)] if p.dcp > 1 else []
    return args + (["--enable-eplb"] if p.eplb else [])


def _speculative(ctx: _Ctx) -> list[str]:
    spec = ctx.phase.speculative
    if spec.method == "none":
        return []
    method = choose(SPECULATIVE_METHOD, spec.method, f"speculative method {spec.method!r}", LABEL)
    config = {"method": method, "num_speculative_tokens": spec.draft_tokens}
    return ["--speculative-config", json.dumps(config, separators=(",", ":"))]


def _kernels(ctx: _Ctx) -> list[str]:
    return kernel_args(ctx.model, ctx.phase, KERNEL_FLAGS)


def _fusion(ctx: _Ctx) -> list[str]:
    """One --compilation-config: the fusion passes and the decode CUDA graphs' largest request count
    (batching.cuda_graph_max_bs as max_decode_cudagraph_capture_requests, the key that sets it in 0.34:
    vllm/config/vllm.py:2655-2659; capability/profiles/vllm_0_34_0.py graph_caps)."""
    check_fusions(ctx.phase, FUSION_PASS, LABEL)
    passes = {FUSION_PASS[name]: on for name, on in ctx.phase.fusion.items()}
    config: dict = {"pass_config": passes} if passes else {}
    if ctx.phase.batching.cuda_graph_max_bs is not None:
        config["max_decode_cudagraph_capture_requests"] = ctx.phase.batching.cuda_graph_max_bs
    return ["--compilation-config", json.dumps(config, separators=(",", ":"))] if config else []


def _all2all_backend(ctx: _Ctx) -> str | None:
    c = ctx.phase.comm
    return choose(ALL2ALL_BACKEND, (c.all2all, ctx.inst.phase), f"all2all {c.all2all!r}", LABEL)


def _comm(ctx: _Ctx) -> list[str]:
    args = list(choose(CUSTOM_ALLREDUCE_ARGS, ctx.phase.comm.allreduce, f"allreduce {ctx.phase.comm.allreduce}", LABEL))
    backend = _all2all_backend(ctx)
    return args + (["--all2all-backend", backend] if backend else [])


def _overlap(ctx: _Ctx) -> list[str]:
    # what DBO needs (a DeepEP all2all backend, not V4.1) is a capability rule, checked before emitting
    return ["--enable-dbo"] if ctx.phase.overlap.two_batch else []


def _batching(ctx: _Ctx) -> list[str]:
    b = ctx.phase.batching
    return ["--max-num-seqs", str(b.max_running), "--max-num-batched-tokens", str(b.chunked_prefill_tokens)]


def _disaggregation(ctx: _Ctx) -> list[str]:
    if ctx.plan.mode != "disaggregated":
        return []
    return ["--kv-transfer-config", json.dumps(NIXL_KV_TRANSFER, separators=(",", ":"))]


ARG_BUILDERS = (_parallel, _kernels, _fusion, _comm, _overlap, _speculative, _batching, _disaggregation)


def _env(ctx: _Ctx) -> dict[str, str]:
    env = {"pcie_ipc": PCIE_IPC_ENV, "nccl": NCCL_ONLY_ENV}.get(ctx.phase.comm.allreduce, {})
    env = dict(env)
    if ctx.plan.mode != "disaggregated":
        return env
    ranks_before = sum(ctx.plan.phases[other.phase].dp for other in ctx.placed[: ctx.inst.index])
    return {**env, "VLLM_NIXL_SIDE_CHANNEL_PORT": str(NIXL_SIDE_CHANNEL_BASE_PORT + ranks_before), **UCX_ENV}


def build_launch(
    plan: Plan, model: ModelSpec, hardware: HardwareProfile, *, host: str = "127.0.0.1", port: int = 8000
) -> Launch:
    def server(inst: Instance, phase: PhasePlan, placed: tuple[Instance, ...]):
        ctx = _Ctx(plan, model, inst, phase, placed)
        argv = [*SERVER_COMMAND, model_arg(model), "--host", inst.host, "--port", str(inst.port)]
        return argv + [arg for build in ARG_BUILDERS for arg in build(ctx)], _env(ctx)

    def front(placed: tuple[Instance, ...], front_host: str, front_port: int):
        return vllm_router(placed, front_host, front_port)

    return assemble_launch(ENGINE, VERSION, plan, model, hardware, host, port, server, front)
