"""Plan -> `vllm serve` processes (vLLM 0.34.0), with vllm-router in front of replicas or a P/D pair."""

from __future__ import annotations

import json
from dataclasses import dataclass

from autotune.engines.common import KernelFlags, assemble_launch, check_fusions, choose, kernel_args
from autotune.engines.flags import ENGINE_VERSIONS
from autotune.engines.layout import Instance, model_arg
from autotune.engines.routers import vllm_router
from autotune.specs.best import Launch
from autotune.specs.errors import MiTuneError
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import PhasePlan, Plan

ENGINE = "vllm"
VERSION = ENGINE_VERSIONS[ENGINE]
LABEL = f"{ENGINE} {VERSION}"

# (plan kernels.attention, attention family) -> --attention-backend (AttentionBackendEnum name)
ATTENTION_BACKEND = {
    ("triton", "mha"): "TRITON_ATTN",
    ("flashinfer", "mha"): "FLASHINFER",
    ("triton", "mla"): "TRITON_MLA",
    ("flashinfer", "mla"): "FLASHINFER_MLA",
}
MOE_BACKEND = {"triton": "triton", "cutlass": "cutlass", "marlin": "marlin", "deep_gemm": "deep_gemm"}
KV_CACHE_DTYPE = {"fp8": "fp8"}
CUSTOM_ALLREDUCE_ARGS = {"nccl": ["--disable-custom-all-reduce"], "custom": []}
# (plan comm.all2all, phase) -> --all2all-backend; None = the engine default (allgather_reducescatter)
ALL2ALL_BACKEND = {
    ("allgather_reducescatter", "both"): None,
    ("allgather_reducescatter", "prefill"): None,
    ("allgather_reducescatter", "decode"): None,
    ("deepep", "both"): "deepep_high_throughput",
    ("deepep", "prefill"): "deepep_high_throughput",
    ("deepep", "decode"): "deepep_low_latency",
}
# config/vllm.py asserts micro-batching (DBO) runs on one of these all-to-all backends
DBO_ALL2ALL = {"deepep_high_throughput", "deepep_low_latency", "nixl_ep"}
FUSION_PASS = {"allreduce_rmsnorm": "fuse_allreduce_rms"}  # plan fusion -> compilation_config.pass_config key
# NIXL P/D recipe (docs/features/nixl_connector_usage.md): NixlConnector ignores the role, the router decides
NIXL_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_load_failure_policy": "fail"}
NIXL_SIDE_CHANNEL_BASE_PORT = 5600  # vLLM's default; an instance with dp ranks uses base .. base + dp - 1
UCX_ENV = {"UCX_NET_DEVICES": "all"}


KERNEL_FLAGS = KernelFlags(LABEL, ATTENTION_BACKEND, "--moe-backend", MOE_BACKEND, KV_CACHE_DTYPE)


@dataclass(frozen=True)
class _Ctx:
    plan: Plan
    model: ModelSpec
    inst: Instance
    phase: PhasePlan
    placed: tuple[Instance, ...]


def _parallel(ctx: _Ctx) -> list[str]:
    p = ctx.phase
    return ["-tp", str(p.tp), "-dp", str(p.dp), "-pp", str(p.pp)] + (["--enable-expert-parallel"] if p.ep > 1 else [])


def _kernels(ctx: _Ctx) -> list[str]:
    return kernel_args(ctx.model, ctx.phase, KERNEL_FLAGS)


def _fusion(ctx: _Ctx) -> list[str]:
    check_fusions(ctx.phase, FUSION_PASS, LABEL)
    passes = {FUSION_PASS[name]: on for name, on in ctx.phase.fusion.items()}
    return ["--compilation-config", json.dumps({"pass_config": passes}, separators=(",", ":"))] if passes else []


def _all2all_backend(ctx: _Ctx) -> str | None:
    c = ctx.phase.comm
    backend = choose(ALL2ALL_BACKEND, (c.all2all, ctx.inst.phase), f"all2all {c.all2all!r}", LABEL)
    if backend and ctx.phase.ep == 1:
        raise MiTuneError(f"{LABEL}: all2all {c.all2all!r} needs expert parallelism (ep > 1), the plan has ep=1")
    return backend


def _comm(ctx: _Ctx) -> list[str]:
    args = list(choose(CUSTOM_ALLREDUCE_ARGS, ctx.phase.comm.allreduce, f"allreduce {ctx.phase.comm.allreduce}", LABEL))
    backend = _all2all_backend(ctx)
    return args + (["--all2all-backend", backend] if backend else [])


def _overlap(ctx: _Ctx) -> list[str]:
    if not ctx.phase.overlap.two_batch:
        return []
    if _all2all_backend(ctx) not in DBO_ALL2ALL:
        raise MiTuneError(
            f"{LABEL}: two-batch overlap (--enable-dbo) needs a DeepEP all2all backend; "
            f"the {ctx.inst.phase} phase uses {ctx.phase.comm.all2all!r}"
        )
    return ["--enable-dbo"]


def _batching(ctx: _Ctx) -> list[str]:
    b = ctx.phase.batching
    return ["--max-num-seqs", str(b.max_running), "--max-num-batched-tokens", str(b.chunked_prefill_tokens)]


def _disaggregation(ctx: _Ctx) -> list[str]:
    if ctx.plan.mode != "disaggregated":
        return []
    return ["--kv-transfer-config", json.dumps(NIXL_KV_TRANSFER, separators=(",", ":"))]


ARG_BUILDERS = (_parallel, _kernels, _fusion, _comm, _overlap, _batching, _disaggregation)


def _env(ctx: _Ctx) -> dict[str, str]:
    if ctx.plan.mode != "disaggregated":
        return {}
    ranks_before = sum(ctx.plan.phases[other.phase].dp for other in ctx.placed[: ctx.inst.index])
    return {"VLLM_NIXL_SIDE_CHANNEL_PORT": str(NIXL_SIDE_CHANNEL_BASE_PORT + ranks_before), **UCX_ENV}


def build_launch(
    plan: Plan, model: ModelSpec, hardware: HardwareProfile, *, host: str = "127.0.0.1", port: int = 8000
) -> Launch:
    def server(inst: Instance, phase: PhasePlan, placed: tuple[Instance, ...]):
        ctx = _Ctx(plan, model, inst, phase, placed)
        argv = ["vllm", "serve", model_arg(model), "--host", inst.host, "--port", str(inst.port)]
        return argv + [arg for build in ARG_BUILDERS for arg in build(ctx)], _env(ctx)

    def front(placed: tuple[Instance, ...], front_host: str, front_port: int):
        return vllm_router(placed, front_host, front_port)

    return assemble_launch(ENGINE, VERSION, plan, hardware, host, port, server, front)
