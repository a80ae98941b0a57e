"""The SGLang Diffusion launch of a video plan: `sglang serve` argv checked against the flag table extracted from
its real parser (engines/flags/sglang-diffusion-0.5.23.yaml), and the best.yaml document around it."""

from __future__ import annotations

from autotune.capability.rules import Violation
from autotune.engines.flags import validate_argv
from autotune.specs import HardwareProfile, MiTuneError
from autotune.specs.best import Launch, ProcessSpec
from autotune.video.catalog import DiTSpec
from autotune.video.plan import VideoPlan
from autotune.video.rules import ENGINE, VERSION
from autotune.video.workload import VideoWorkload

SCHEMA = "mi-tune/video-best/v1"


def server_argv(plan: VideoPlan, model: DiTSpec, host: str, port: int, model_path: str = "") -> list[str]:
    """Every degree is explicit, so SGLang's auto policies (auto CFG parallel, auto SP split, auto residency) do not
    override the plan (runtime/server_args/server_args.py:1680-1790; auto_tune.py:941-949)."""
    argv = [
        "sglang", "serve",
        "--model-path", model_path or model.hf_id,
        "--num-gpus", str(plan.gpus),
        "--dp-size", str(plan.replicas),
        "--tp-size", str(plan.tp),
        "--sp-degree", str(plan.sp),
        "--ulysses-degree", str(plan.ulysses),
        "--ring-degree", str(plan.ring),
        "--cfg-parallel-size", str(plan.cfg),
        "--attention-backend", plan.attention,
        "--dit-layerwise-offload", "true" if plan.dit_offload else "false",
        "--text-encoder-cpu-offload", "true" if plan.text_encoder_offload else "false",
        "--host", host,
        "--port", str(port),
    ]  # fmt: skip
    if plan.attention_config:
        argv += ["--attention-backend-config", plan.attention_config]
    return argv


def server_env(plan: VideoPlan) -> dict[str, str]:
    return {"SGLANG_CACHE_DIT_ENABLED": "true"} if plan.cache_dit else {}  # envs.py:73, :393


def build_launch(
    plan: VideoPlan, model: DiTSpec, hw: HardwareProfile, broken: list[Violation], host="127.0.0.1", port=8000
) -> Launch:
    """The launch; refuses a plan that breaks a capability rule or an argv the engine's parser would reject."""
    if broken:
        raise MiTuneError(f"plan breaks an engine rule: {broken[0]}")
    if plan.gpus > hw.num_gpus:
        raise MiTuneError(f"plan uses {plan.gpus} GPUs, the box has {hw.num_gpus}")
    argv = server_argv(plan, model, host, port)
    validate_argv(ENGINE, VERSION, argv)
    process = ProcessSpec(
        name="sglang-diffusion",
        role="server",
        argv=tuple(argv),
        env=server_env(plan),
        gpus=tuple(range(plan.gpus)),
        host=host,
        port=port,
    )
    return Launch(ENGINE, VERSION, f"http://{host}:{port}/v1/videos", (process,))


def best_document(model: DiTSpec, hw: HardwareProfile, work: VideoWorkload, chosen, default, exact, launch) -> dict:
    """best.yaml: the plan and its prediction, the engine default and the best exact plan beside it."""
    from autotune.specs.io import to_dict

    def row(o):
        if o is None:
            return None
        return {
            "plan": to_dict(o.plan),
            "label": o.plan.label(),
            "latency_s": round(o.cost.latency_s, 2),
            "p50_s": round(o.p50_s, 2),
            "p95_s": round(o.p95_s, 2) if o.p95_s != float("inf") else None,
            "videos_per_hour": round(o.videos_per_hour, 3),
            "videos_per_hour_per_gpu": round(o.videos_per_hour_per_gpu, 3),
            "memory_gib_per_gpu": round(o.cost.memory_gib, 1),
            "exact": o.exact,
            "changes_output": list(o.changes),
        }

    return {
        "schema": SCHEMA,
        "kind": "video",
        "engine": {"name": ENGINE, "version": VERSION},
        "model": {"name": model.name, "hf_id": model.hf_id},
        "hardware": {"name": hw.name, "fingerprint": hw.fingerprint, "profile": to_dict(hw)},
        "workload": to_dict(work),
        "best": row(chosen),
        "engine_default": row(default),
        "best_exact": row(exact),
        "launch": {
            "endpoint": launch.endpoint,
            "processes": [
                {"name": p.name, "argv": list(p.argv), "env": dict(p.env), "gpus": list(p.gpus)}
                for p in launch.processes
            ],
        },
    }
