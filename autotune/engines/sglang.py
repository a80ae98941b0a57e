"""Plan -> `python3 -m sglang.launch_server` processes (SGLang 0.5.23), with sglang-router 0.3.2 in front."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.engines.common import KernelFlags, assemble_launch, check_fusions, choose, kernel_args
from autotune.engines.flags import ENGINE_VERSIONS
from autotune.engines.layout import Instance, model_arg
from autotune.engines.routers import sglang_router
from autotune.specs.best import Launch
from autotune.specs.errors import MiTuneError
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import PhasePlan, Plan

ENGINE = "sglang"
VERSION = ENGINE_VERSIONS[ENGINE]
LABEL = f"{ENGINE} {VERSION}"
SERVER_COMMAND = ["python3", "-m", "sglang.launch_server"]

# (plan kernels.attention, attention family) -> --attention-backend; both kernels also run MLA in SGLang
ATTENTION_BACKEND = {
    ("triton", "mha"): "triton",
    ("flashinfer", "mha"): "flashinfer",
    ("triton", "mla"): "triton",
    ("flashinfer", "mla"): "flashinfer",
}
MOE_RUNNER = {"triton": "triton", "cutlass": "cutlass", "marlin": "marlin", "deep_gemm": "deep_gemm"}
KV_CACHE_DTYPE = {"fp8": "fp8_e4m3"}
CUSTOM_ALLREDUCE_ARGS = {"nccl": ["--disable-custom-all-reduce"], "custom": []}
A2A_BACKEND = {"allgather_reducescatter": None, "deepep": "deepep"}  # None = engine default (none)
# DeepEP kernels per phase: normal (throughput) for prefill, low_latency for decode, SGLang's per-batch auto for both
DEEPEP_MODE = {"both": "auto", "prefill": "normal", "decode": "low_latency"}
# FlashInfer all-reduce + RMSNorm fusion is on by default on SM90/SM10x; only "off" needs a flag
FUSION_ARGS = {"allreduce_rmsnorm": {True: [], False: ["--enforce-disable-flashinfer-allreduce-fusion"]}}
PD_TRANSFER_BACKEND = "nixl"
BOOTSTRAP_PORT_OFFSET = 1  # a prefill server's bootstrap port = its HTTP port + 1 (see layout.PORT_STRIDE)


KERNEL_FLAGS = KernelFlags(LABEL, ATTENTION_BACKEND, "--moe-runner-backend", MOE_RUNNER, KV_CACHE_DTYPE)


@dataclass(frozen=True)
class _Ctx:
    plan: Plan
    model: ModelSpec
    inst: Instance
    phase: PhasePlan


def _parallel(ctx: _Ctx) -> list[str]:
    p = ctx.phase
    args = ["--tp-size", str(p.tp * p.dp), "--pp-size", str(p.pp)]
    args += ["--attn-dp-size", str(p.dp)] if p.dp > 1 else []
    return args + (["--ep-size", str(p.ep)] if p.ep > 1 else [])


def _kernels(ctx: _Ctx) -> list[str]:
    return kernel_args(ctx.model, ctx.phase, KERNEL_FLAGS)


def _fusion(ctx: _Ctx) -> list[str]:
    check_fusions(ctx.phase, FUSION_ARGS, LABEL)
    return [arg for name, on in ctx.phase.fusion.items() for arg in FUSION_ARGS[name][on]]


def _a2a_backend(ctx: _Ctx) -> str | None:
    c = ctx.phase.comm
    backend = choose(A2A_BACKEND, c.all2all, f"all2all {c.all2all!r}", LABEL)
    if backend and ctx.phase.ep == 1:
        raise MiTuneError(f"{LABEL}: all2all {c.all2all!r} needs expert parallelism (ep > 1), the plan has ep=1")
    return backend


def _comm(ctx: _Ctx) -> list[str]:
    args = list(choose(CUSTOM_ALLREDUCE_ARGS, ctx.phase.comm.allreduce, f"allreduce {ctx.phase.comm.allreduce}", LABEL))
    backend = _a2a_backend(ctx)
    return args + (["--moe-a2a-backend", backend, "--deepep-mode", DEEPEP_MODE[ctx.inst.phase]] if backend else [])


def _overlap(ctx: _Ctx) -> list[str]:
    if not ctx.phase.overlap.two_batch:
        return []
    # server_args.check_two_batch_overlap: without an EP all-to-all backend TBO needs DP attention
    if _a2a_backend(ctx) is None and ctx.phase.dp == 1:
        raise MiTuneError(f"{LABEL}: two-batch overlap needs the deepep all2all or dp > 1 (DP attention)")
    return ["--enable-two-batch-overlap"]


def _batching(ctx: _Ctx) -> list[str]:
    b = ctx.phase.batching
    return ["--max-running-requests", str(b.max_running), "--chunked-prefill-size", str(b.chunked_prefill_tokens)]


def _disaggregation(ctx: _Ctx) -> list[str]:
    if ctx.plan.mode != "disaggregated":
        return []
    args = ["--disaggregation-mode", ctx.inst.phase, "--disaggregation-transfer-backend", PD_TRANSFER_BACKEND]
    return args + (
        ["--disaggregation-bootstrap-port", str(bootstrap_port(ctx.inst))] if ctx.inst.role == "prefill" else []
    )


ARG_BUILDERS = (_parallel, _kernels, _fusion, _comm, _overlap, _batching, _disaggregation)


def bootstrap_port(inst: Instance) -> int:
    return inst.port + BOOTSTRAP_PORT_OFFSET


def build_launch(
    plan: Plan, model: ModelSpec, hardware: HardwareProfile, *, host: str = "127.0.0.1", port: int = 8000
) -> Launch:
    def server(inst: Instance, phase: PhasePlan, placed: tuple[Instance, ...]):
        ctx = _Ctx(plan, model, inst, phase)
        argv = [*SERVER_COMMAND, "--model-path", model_arg(model), "--host", inst.host, "--port", str(inst.port)]
        return argv + [arg for build in ARG_BUILDERS for arg in build(ctx)], {}

    def front(placed: tuple[Instance, ...], front_host: str, front_port: int):
        return sglang_router(placed, front_host, front_port, bootstrap_port)

    return assemble_launch(ENGINE, VERSION, plan, hardware, host, port, server, front)
