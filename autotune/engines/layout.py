"""Where each engine instance of a plan runs: its GPUs, port, NUMA node and base environment (shared by emitters)."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.capability.engine_profile import CUDA_VISIBLE_DEVICES
from autotune.capability.profiles import profile
from autotune.specs.errors import MiTuneError
from autotune.specs.hardware import HardwareProfile
from autotune.specs.plan import PhasePlan, Plan, nccl_problem

# Engine instances behind a router listen on port + PORT_STRIDE * (k + 1). SGLang with DP attention also binds
# its own port + 233 .. + 240 (server_args.py ZMQ_TCP_PORT_DELTA), and each SGLang prefill server binds a
# bootstrap port at its port + 1: a stride of 10 keeps all of these apart for up to 24 instances.
PORT_STRIDE = 10
MAX_PORT = 65535
PHASE_ROLE = {"both": "server", "prefill": "prefill", "decode": "decode"}
PHASE_ORDER = ("both", "prefill", "decode")
WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # bound everywhere -> reach at loopback


@dataclass(frozen=True)
class Instance:
    """One engine server process of a plan."""

    name: str  # e.g. "prefill-0"
    role: str  # server | prefill | decode
    phase: str  # both | prefill | decode
    replica: int  # index within its phase
    index: int  # index over all instances of the plan, in launch order
    gpus: tuple[int, ...]
    host: str
    port: int

    @property
    def url(self) -> str:
        return url(self.host, self.port)


def reach_host(host: str) -> str:
    """The address a local client (router, readiness check) connects to for a server bound to `host`."""
    return WILDCARD_HOSTS.get(host, host)


def url(host: str, port: int) -> str:
    host = reach_host(host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def model_arg(model) -> str:
    """What an engine server loads: the local directory the model was given as, else its Hugging Face id."""
    arg = model.checkpoint_dir or model.hf_id
    if not arg:
        raise MiTuneError(
            f"model '{model.name}' has no Hugging Face id and no local directory for the engine to load; "
            "pass --model as a catalog name, a model directory or its config.json"
        )
    return arg


def instances(plan: Plan, host: str, port: int) -> tuple[Instance, ...]:
    """Every engine instance, all bound to `host`; a lone one serves on `port`, several sit behind a front process
    there and listen on the ports after it (the front reaches them at `host`, or at loopback for a wildcard)."""
    slots = [(phase, r) for phase in PHASE_ORDER if phase in plan.phases for r in range(plan.phases[phase].replicas)]
    alone = len(slots) == 1
    last_port = port + PORT_STRIDE * len(slots) + 1
    if last_port > MAX_PORT:
        raise MiTuneError(f"--port {port}: {len(slots)} engine instances need ports up to {last_port} (> {MAX_PORT})")
    return tuple(
        Instance(
            name=f"{PHASE_ROLE[phase]}-{replica}",
            role=PHASE_ROLE[phase],
            phase=phase,
            replica=replica,
            index=k,
            gpus=plan.phases[phase].replica_gpus(replica),
            host=host,
            port=port if alone else port + PORT_STRIDE * (k + 1),
        )
        for k, (phase, replica) in enumerate(slots)
    )


CUDA_VISIBLE = dict(CUDA_VISIBLE_DEVICES)  # an engine's own selection is its profile's `visible_devices_env`


def gpu_env(instance: Instance, phase: PhasePlan, engine: str = "") -> dict[str, str]:
    """Device selection (CUDA's in NVML / nvidia-smi order, or the engine's runtime variable such as Ascend's
    ASCEND_RT_VISIBLE_DEVICES) plus the plan's NCCL variables."""
    for name, value in phase.comm.nccl.items():  # Comm checks too; again where it becomes a process environment
        if problem := nccl_problem(name, value):
            raise MiTuneError(f"phases.{instance.phase}.comm.nccl: {problem}")
    gpus = ",".join(str(g) for g in instance.gpus)
    selection = dict(profile(engine).visible_devices_env) if engine else CUDA_VISIBLE
    visible = {k: v.format(gpus=gpus) for k, v in selection.items()}
    return {**visible, **{str(k): str(v) for k, v in phase.comm.nccl.items()}}


def numa_node(hardware: HardwareProfile, gpus: tuple[int, ...]) -> int:
    """The NUMA node all of `gpus` sit on, or -1 when they span nodes (or none are given)."""
    by_index = {a.index: a.numa_node for a in hardware.accelerators}
    missing = [g for g in gpus if g not in by_index]
    if missing:
        raise MiTuneError(f"gpus: {missing} not on this box (GPUs {sorted(by_index)} of {hardware.name})")
    nodes = {by_index[g] for g in gpus}
    return nodes.pop() if len(nodes) == 1 else -1


def attention_family(model) -> str:
    return model.attention_family
