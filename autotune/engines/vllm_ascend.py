"""Plan -> `vllm serve` processes on Huawei Ascend NPUs (vLLM 0.23.0 + vllm-ascend 0.23.0.post1).

The argv is vLLM 0.23's, checked against flags/vllm-ascend-0.23.0.post1.yaml: the table extracted from vLLM 0.23's
real parser plus the plugin's additions ('ascend' quantization, the --additional-config keys ascend_config.py reads).
HCCL settings travel in the environment; each server sees its NPUs through ASCEND_RT_VISIBLE_DEVICES (layout.py).
"""

from __future__ import annotations

import json

from autotune.capability.profiles import profile
from autotune.engines.common import assemble_launch, choose
from autotune.engines.flags import ENGINE_VERSIONS
from autotune.engines.layout import Instance, model_arg
from autotune.engines.routers import vllm_router
from autotune.specs.best import Launch
from autotune.specs.errors import MiTuneError
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import PhasePlan, Plan

ENGINE = "vllm-ascend"
VERSION = ENGINE_VERSIONS[ENGINE]
LABEL = f"{ENGINE} {VERSION}"
SERVER_COMMAND = list(profile(ENGINE).server_command)

# plan platform option -> (additional_config key, {plan value: config value})
ADDITIONAL_CONFIG = {
    "flashcomm1": ("enable_flashcomm1", {"on": True}),
    "multistream_shared_expert": ("multistream_overlap_shared_expert", {"on": True}),
    "weight_nz": ("weight_nz_mode", {"off": 0, "all": 2}),
}
# plan platform option -> (environment variable, {plan value: value}); HCCL's own variables (CANN HCCL docs,
# used in vllm-ascend docs/source/tutorials/models/Qwen3-235B-A22B.md:219,346-347)
HCCL_ENV = {
    "hccl_op_expansion": ("HCCL_OP_EXPANSION_MODE", {"AIV": "AIV"}),
    "hccl_buffsize_mb": ("HCCL_BUFFSIZE", {"512": "512", "1024": "1024"}),
}
# plan platform graph_mode -> --compilation-config cudagraph_mode (vLLM 0.23 CompilationConfig; the graph mode the
# vllm-ascend tutorials run, docs/source/tutorials/models/Qwen3-235B-A22B.md:239)
GRAPH_MODE = {"FULL_DECODE_ONLY": "FULL_DECODE_ONLY"}
# checkpoint format -> --quantization (msModelSlim checkpoints: the plugin's "ascend" method, platform.py:188-197;
# the tutorial passes it explicitly, docs/source/tutorials/models/Qwen3-235B-A22B.md:230)
QUANTIZATION = {"w8a8_modelslim": "ascend"}
ALL_OPTIONS = {*ADDITIONAL_CONFIG, *HCCL_ENV, "graph_mode"}


def additional_config(phase: PhasePlan) -> dict:
    """The plan's --additional-config object (empty when every option keeps the plugin default)."""
    for name in phase.platform:
        choose(dict.fromkeys(ALL_OPTIONS), name, f"platform option {name!r}", LABEL)
    config = {}
    for name, (key, values) in ADDITIONAL_CONFIG.items():
        if name in phase.platform:
            config[key] = choose(values, phase.platform[name], f"{name}={phase.platform[name]}", LABEL)
    return config  # its keys are checked against ascend_config.py's by the flag table (json_fields)


def _server_args(model: ModelSpec, phase: PhasePlan) -> list[str]:
    args = ["-tp", str(phase.tp), "-dp", str(phase.dp), "-pp", str(phase.pp)]
    args += ["--quantization", QUANTIZATION[model.dense_format]] if model.dense_format in QUANTIZATION else []
    args += ["--enable-expert-parallel"] if phase.ep > 1 else []
    args += ["--decode-context-parallel-size", str(phase.dcp)] if phase.dcp > 1 else []
    if phase.speculative.method == "mtp":
        spec = {"method": "mtp", "num_speculative_tokens": phase.speculative.draft_tokens}
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    if "graph_mode" in phase.platform:
        mode = choose(GRAPH_MODE, phase.platform["graph_mode"], f"graph_mode {phase.platform['graph_mode']}", LABEL)
        args += ["--compilation-config", json.dumps({"cudagraph_mode": mode}, separators=(",", ":"))]
    config = additional_config(phase)
    args += ["--additional-config", json.dumps(config, separators=(",", ":"))] if config else []
    b = phase.batching
    return args + ["--max-num-seqs", str(b.max_running), "--max-num-batched-tokens", str(b.chunked_prefill_tokens)]


def hccl_env(phase: PhasePlan) -> dict[str, str]:
    if phase.comm.nccl:
        raise MiTuneError(f"{LABEL}: NCCL settings do not apply on Ascend (HCCL): {', '.join(phase.comm.nccl)}")
    env = {}
    for name, (var, values) in HCCL_ENV.items():
        if name in phase.platform:
            env[var] = choose(values, phase.platform[name], f"{name}={phase.platform[name]}", LABEL)
    return env


def build_launch(
    plan: Plan, model: ModelSpec, hardware: HardwareProfile, *, host: str = "127.0.0.1", port: int = 8000
) -> Launch:
    if plan.mode != "aggregated":
        raise MiTuneError(f"{LABEL}: mi-tune emits aggregated plans only for Ascend (no Mooncake P/D launch yet)")

    def server(inst: Instance, phase: PhasePlan, placed: tuple[Instance, ...]):
        argv = [*SERVER_COMMAND, model_arg(model), "--host", inst.host, "--port", str(inst.port)]
        return argv + _server_args(model, phase), hccl_env(phase)

    def front(placed: tuple[Instance, ...], front_host: str, front_port: int):
        return vllm_router(placed, front_host, front_port)

    return assemble_launch(ENGINE, VERSION, plan, model, hardware, host, port, server, front)
