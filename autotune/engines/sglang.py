"""Plan -> `python3 -m sglang.launch_server` processes (SGLang 0.5.23), with sglang-router 0.3.2 in front."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.capability.profiles import profile
from autotune.capability.sglang_0_5_23 import MAMBA_SLOTS_PER_RUNNING_REQUEST
from autotune.engines.common import KernelFlags, assemble_launch, check_fusions, choose, kernel_args
from autotune.engines.flags import ENGINE_VERSIONS
from autotune.engines.layout import Instance, model_arg
from autotune.engines.routers import sglang_router
from autotune.specs.best import Launch
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import PhasePlan, Plan

ENGINE = "sglang"
VERSION = ENGINE_VERSIONS[ENGINE]
LABEL = f"{ENGINE} {VERSION}"
SERVER_COMMAND = list(profile(ENGINE).server_command)

# (plan kernels.attention, attention family) -> --attention-backend; both kernels also run MLA in SGLang
ATTENTION_BACKEND = {
    ("triton", "mha"): "triton",
    ("flashinfer", "mha"): "flashinfer",
    ("triton", "mla"): "triton",
    ("flashinfer", "mla"): "flashinfer",
}
MOE_RUNNER = {
    "triton": "triton",
    "cutlass": "cutlass",
    "marlin": "marlin",
    "deep_gemm": "deep_gemm",
    "flashinfer_cutlass": "flashinfer_cutlass",
    "flashinfer_mxfp4": "flashinfer_mxfp4",
}
FP8_GEMM_BACKEND = {"cutlass": "cutlass", "triton": "triton"}  # --fp8-gemm-backend
KV_CACHE_DTYPE = {"fp8": "fp8_e4m3"}
CUSTOM_ALLREDUCE_ARGS = {"nccl": ["--disable-custom-all-reduce"], "custom": [], "pcie_ipc": []}
# sglang/srt/environ.py: FlashInfer PCIe-IPC all-reduce for the TP group (pcie_ipc_ar.py)
PCIE_IPC_ENV = {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}
# --speculative-algorithm per plan speculative.method (NEXTN = the checkpoint's MTP layers)
SPECULATIVE_ALGORITHM = {"mtp": "NEXTN", "dspark": "DSPARK"}
A2A_BACKEND = {"allgather_reducescatter": None, "deepep": "deepep"}  # None = engine default (none)
# DeepEP kernels per phase: normal (throughput) for prefill, low_latency for decode, SGLang's per-batch auto for both
DEEPEP_MODE = {"both": "auto", "prefill": "normal", "decode": "low_latency"}
# FlashInfer all-reduce + RMSNorm fusion is on by default on SM90/SM10x; only "off" needs a flag
FUSION_ARGS = {"allreduce_rmsnorm": {True: [], False: ["--enforce-disable-flashinfer-allreduce-fusion"]}}
PD_TRANSFER_BACKEND = "nixl"
BOOTSTRAP_PORT_OFFSET = 1  # a prefill server's bootstrap port = its HTTP port + 1 (see layout.PORT_STRIDE)


KERNEL_FLAGS = KernelFlags(
    LABEL, ATTENTION_BACKEND, "--moe-runner-backend", MOE_RUNNER, KV_CACHE_DTYPE, "--fp8-gemm-backend", FP8_GEMM_BACKEND
)


@dataclass(frozen=True)
class _Ctx:
    plan: Plan
    model: ModelSpec
    inst: Instance
    phase: PhasePlan


def _parallel(ctx: _Ctx) -> list[str]:
    p = ctx.phase
    args = ["--tp-size", str(p.stage_ranks), "--pp-size", str(p.pp)]
    args += ["--attn-dp-size", str(p.dp)] if p.dp > 1 else []
    args += ["--ep-size", str(p.ep)] if p.ep > 1 else []
    args += ["--dcp-size", str(p.dcp)] if p.dcp > 1 else []
    args += ["--moe-dense-tp-size", "1"] if p.dense_dp else []
    args += ["--enable-dp-lm-head"] if p.dp_lm_head else []
    return args + (["--enable-eplb"] if p.eplb else [])


def _speculative(ctx: _Ctx) -> list[str]:
    spec = ctx.phase.speculative
    if spec.method == "none":
        return []
    algorithm = choose(SPECULATIVE_ALGORITHM, spec.method, f"speculative method {spec.method!r}", LABEL)
    # a chain of drafts (top-k 1): num_steps drafts, num_steps + 1 tokens verified per step; --enable-metrics
    # (off by default, flags/sglang-0.5.23.yaml) serves the verify-pass counters `measure` reads the acceptance
    # from (observability/metrics_collector.py:2109-2112; measure/acceptance.py)
    return [
        "--enable-metrics",
        "--speculative-algorithm",
        algorithm,
        "--speculative-num-steps",
        str(spec.draft_tokens),
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        str(spec.draft_tokens + 1),
    ]


def _kernels(ctx: _Ctx) -> list[str]:
    return kernel_args(ctx.model, ctx.phase, KERNEL_FLAGS)


def _fusion(ctx: _Ctx) -> list[str]:
    check_fusions(ctx.phase, FUSION_ARGS, LABEL)
    return [arg for name, on in ctx.phase.fusion.items() for arg in FUSION_ARGS[name][on]]


def _comm(ctx: _Ctx) -> list[str]:
    c = ctx.phase.comm
    args = list(choose(CUSTOM_ALLREDUCE_ARGS, c.allreduce, f"allreduce {c.allreduce}", LABEL))
    backend = choose(A2A_BACKEND, c.all2all, f"all2all {c.all2all!r}", LABEL)
    return args + (["--moe-a2a-backend", backend, "--deepep-mode", DEEPEP_MODE[ctx.inst.phase]] if backend else [])


def _overlap(ctx: _Ctx) -> list[str]:
    # what TBO needs (an a2a backend, or DP attention on V4 prefill; never V4.1) is a capability rule
    return ["--enable-two-batch-overlap"] if ctx.phase.overlap.two_batch else []


def _batching(ctx: _Ctx) -> list[str]:
    b = ctx.phase.batching
    args = ["--max-running-requests", str(b.max_running), "--chunked-prefill-size", str(b.chunked_prefill_tokens)]
    if ctx.model.is_hybrid:  # the linear-attention state pool sized for max_running requests, as perf/memory.py
        args += ["--max-mamba-cache-size", str(b.max_running * MAMBA_SLOTS_PER_RUNNING_REQUEST)]
    if b.cuda_graph_max_bs is not None:  # the decode graphs' max_bs (srt/arg_groups/cuda_graph_hook.py:72-73)
        args += ["--cuda-graph-max-bs-decode", str(b.cuda_graph_max_bs)]
    return args


def _disaggregation(ctx: _Ctx) -> list[str]:
    if ctx.plan.mode != "disaggregated":
        return []
    args = ["--disaggregation-mode", ctx.inst.phase, "--disaggregation-transfer-backend", PD_TRANSFER_BACKEND]
    return args + (
        ["--disaggregation-bootstrap-port", str(bootstrap_port(ctx.inst))] if ctx.inst.role == "prefill" else []
    )


ARG_BUILDERS = (_parallel, _kernels, _fusion, _comm, _overlap, _speculative, _batching, _disaggregation)


def bootstrap_port(inst: Instance) -> int:
    return inst.port + BOOTSTRAP_PORT_OFFSET


def build_launch(
    plan: Plan, model: ModelSpec, hardware: HardwareProfile, *, host: str = "127.0.0.1", port: int = 8000
) -> Launch:
    def server(inst: Instance, phase: PhasePlan, placed: tuple[Instance, ...]):
        ctx = _Ctx(plan, model, inst, phase)
        argv = [*SERVER_COMMAND, "--model-path", model_arg(model), "--host", inst.host, "--port", str(inst.port)]
        env = dict(PCIE_IPC_ENV) if phase.comm.allreduce == "pcie_ipc" else {}
        return argv + [arg for build in ARG_BUILDERS for arg in build(ctx)], env

    def front(placed: tuple[Instance, ...], front_host: str, front_port: int):
        return sglang_router(placed, front_host, front_port, bootstrap_port)

    return assemble_launch(ENGINE, VERSION, plan, model, hardware, host, port, server, front)
