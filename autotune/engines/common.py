"""Helpers every emitter uses: plan-vocabulary lookups that fail with one line, and assembling a Launch."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from autotune import capability
from autotune.engines.flags import ENGINE_VERSIONS, validate_argv
from autotune.engines.layout import Instance, attention_family, gpu_env, instances, numa_node, url
from autotune.specs.best import Launch, ProcessSpec
from autotune.specs.errors import MiTuneError
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec
from autotune.specs.plan import PhasePlan, Plan

AUTO = "auto"
ONLINE_FP8_FROM = {"bf16", "fp16", "fp32"}  # checkpoint dtypes an engine can quantise to FP8 at load time
NATIVE_GEMM = {"fp8": {"fp8"}}  # gemm_dtype -> checkpoint dtypes that already are it


def choose(table: Mapping, key, what: str, label: str):
    """table[key], or a one-line MiTuneError saying `label` cannot express `what`."""
    if key not in table:
        raise MiTuneError(f"{label} cannot express {what} (supported: {', '.join(map(str, table))})")
    return table[key]


def online_quantization(model: ModelSpec, gemm_dtype: str, label: str) -> str | None:
    """The GEMM dtype to quantise to at load time, None when the checkpoint already is it (or 'auto')."""
    if gemm_dtype == AUTO or model.dense_dtype in NATIVE_GEMM.get(gemm_dtype, ()):
        return None
    if gemm_dtype == "fp8" and model.dense_dtype in ONLINE_FP8_FROM:
        return "fp8"
    raise MiTuneError(
        f"{label} cannot serve the {model.dense_dtype} checkpoint of {model.name} with {gemm_dtype} GEMMs"
    )


@dataclass(frozen=True)
class KernelFlags:
    """How one engine spells the plan's kernel choices: flag names and value tables."""

    label: str
    attention: Mapping  # (variant, attention family) -> backend name
    moe_flag: str
    moe: Mapping  # variant -> backend name
    kv_cache: Mapping  # plan kv dtype -> engine kv dtype
    linear_flag: str  # dense GEMM kernel flag
    linear: Mapping  # plan kernels.linear -> backend name
    online_fp8: str = "fp8"  # --quantization value that quantises a bf16/fp16 checkpoint to FP8 at load time


def kernel_args(model: ModelSpec, phase: PhasePlan, flags: KernelFlags) -> list[str]:
    """--attention-backend / MoE backend / --quantization / --kv-cache-dtype for the plan's kernel choices."""
    k, args = phase.kernels, []
    if k.attention != AUTO:
        key = (k.attention, attention_family(model))
        args += ["--attention-backend", choose(flags.attention, key, f"attention {key[0]} on {key[1]}", flags.label)]
    if k.moe != AUTO and model.is_moe:
        args += [flags.moe_flag, choose(flags.moe, k.moe, f"moe kernel {k.moe!r}", flags.label)]
    if k.linear != AUTO:
        args += [flags.linear_flag, choose(flags.linear, k.linear, f"linear kernel {k.linear!r}", flags.label)]
    if online_quantization(model, k.gemm_dtype, flags.label):
        args += ["--quantization", flags.online_fp8]
    if k.kv_cache_dtype != AUTO:
        what = f"kv cache {k.kv_cache_dtype}"
        args += ["--kv-cache-dtype", choose(flags.kv_cache, k.kv_cache_dtype, what, flags.label)]
    return args


def check_fusions(phase: PhasePlan, known: Mapping[str, object], label: str) -> None:
    for name in phase.fusion:
        choose(known, name, f"fusion {name!r}", label)


# server_process(instance, phase plan, all instances) -> (argv, engine-specific env)
ServerFn = Callable[[Instance, PhasePlan, tuple[Instance, ...]], tuple[list[str], dict[str, str]]]
# front_process(instances, host, port) -> (argv, flag table to check it against or None) of the router
FrontFn = Callable[[tuple[Instance, ...], str, int], tuple[list[str], str | None]]


def assemble_launch(
    engine: str,
    version: str,
    plan: Plan,
    model: ModelSpec,
    hardware: HardwareProfile,
    host: str,
    port: int,
    server: ServerFn,
    front: FrontFn,
) -> Launch:
    """Engine servers (validated against the pinned flag table), then a router when there are several.
    A plan that breaks one of the engine version's capability rules is refused before anything is built."""
    if plan.engine != engine:
        raise MiTuneError(f"plan is for {plan.engine}, not {engine}")
    rules = capability.table(engine)
    if rules.version != version:
        raise MiTuneError(f"{engine} {version}: capability rules are for {rules.version}; pin one version")
    capability.require_plan(plan, model, hardware)
    placed = instances(plan, host, port)
    processes = []
    for inst in placed:
        phase = plan.phases[inst.phase]
        argv, env = server(inst, phase, placed)
        validate_argv(engine, version, argv)
        processes.append(
            ProcessSpec(
                name=inst.name,
                role=inst.role,
                argv=tuple(argv),
                env={**gpu_env(inst, phase, engine), **env},
                gpus=inst.gpus,
                host=inst.host,
                port=inst.port,
                numa_node=numa_node(hardware, inst.gpus),
            )
        )
    if len(placed) > 1:
        argv, table = front(placed, host, port)
        if table:
            validate_argv(table, ENGINE_VERSIONS[table], argv)
        processes.append(ProcessSpec(name="router", role="router", argv=tuple(argv), host=host, port=port))
    return Launch(engine=engine, engine_version=version, endpoint=url(host, port), processes=tuple(processes))
