"""Plan: one point of the search space (the core of best.yaml).

Parallel layout of one engine instance of a phase: `tp * dp * pp` GPUs. Attention and dense layers are
tensor-parallel over `tp` and data-parallel over `dp` (dp > 1 is DP attention); MoE layers spread over
the `tp * dp` GPUs of a pipeline stage either as experts (`ep == tp * dp`) or tensor-sharded (`ep == 1`).
`replicas` independent instances share the phase's GPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autotune.specs.model import DTYPE_BYTES

MODES = ("aggregated", "disaggregated")
# the engine profiles (capability/profiles/) are the list; specs, below capability, keeps this copy for Plan's
# check (tests/capability/test_profiles.py holds them equal). vllm-ascend: vLLM 0.23 + the Huawei Ascend plugin
ENGINES = ("vllm", "sglang", "vllm-ascend")
ALLREDUCE = ("custom", "nccl", "pcie_ipc")  # what both engines' emitters express (engines/vllm.py, sglang.py)
ALL2ALL = ("allgather_reducescatter", "deepep")
SPECULATIVE_METHODS = ("none", "mtp", "dspark", "eagle")  # perf/efficiency.py DRAFT_ACCEPTANCE, engine emitters
# comm.nccl is the one free-form part of a plan that reaches a process (engines/layout.py gpu_env checks it again):
# only NCCL's own variables with plain values, so a hand-edited plan cannot carry LD_PRELOAD or shell text
NCCL_NAME = re.compile(r"NCCL_[A-Z0-9_]+")
NCCL_VALUE = re.compile(r"[A-Za-z0-9_.,:+-]{1,64}")


def nccl_problem(name: object, value: object) -> str:
    """Why `name=value` is not an NCCL variable with a plain value ('' when it is). comm.nccl is the one free-form
    part of a plan that reaches a process: only NCCL's own variables with plain values pass, so a hand-edited
    best.yaml cannot smuggle LD_PRELOAD or a shell fragment into serve."""
    if NCCL_NAME.fullmatch(str(name)) and NCCL_VALUE.fullmatch(str(value)):
        return ""
    expected = "expected NCCL_<NAME>: letters, digits, . , : + -"
    return f"{name}={value!r} is not an NCCL variable with a plain value ({expected})"


@dataclass(frozen=True)
class Kernels:
    attention: str = "auto"
    moe: str = "auto"
    gemm_dtype: str = "auto"  # auto = the checkpoint's dtype; fp8 quantises a bf16 checkpoint online
    kv_cache_dtype: str = "auto"
    linear: str = "auto"  # dense GEMM kernel: vLLM --linear-backend, SGLang --fp8-gemm-backend

    def __post_init__(self) -> None:
        for name in ("gemm_dtype", "kv_cache_dtype"):
            value = getattr(self, name)
            if value != "auto" and value not in DTYPE_BYTES:
                raise ValueError(f"{name}: expected auto or one of {', '.join(DTYPE_BYTES)}, got {value!r}")


@dataclass(frozen=True)
class Comm:
    # custom = engine default (its P2P kernel where it applies, else NCCL) | nccl (forced) |
    # pcie_ipc = the engines' FlashInfer PCIe-IPC all-reduce (env switch), NCCL above its size limit
    allreduce: str = "custom"
    all2all: str = "allgather_reducescatter"
    nccl: dict[str, str] = field(default_factory=dict)  # NCCL_* environment for every worker

    def __post_init__(self) -> None:
        for name, allowed in (("allreduce", ALLREDUCE), ("all2all", ALL2ALL)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}: expected one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        for name, value in self.nccl.items():
            if problem := nccl_problem(name, value):
                raise ValueError(f"nccl: {problem}")


@dataclass(frozen=True)
class Overlap:
    two_batch: bool = False


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: `method` none | mtp (DeepSeek-V3/GLM-5 MTP heads) | dspark (V4.1) | eagle;
    `draft_tokens` proposed per step (0 with none)."""

    method: str = "none"
    draft_tokens: int = 0

    def __post_init__(self) -> None:
        if self.method not in SPECULATIVE_METHODS:
            raise ValueError(f"method: expected one of {', '.join(SPECULATIVE_METHODS)}, got {self.method!r}")
        if (self.method == "none") != (self.draft_tokens == 0) or self.draft_tokens < 0:
            raise ValueError(f"speculative: method {self.method!r} with draft_tokens={self.draft_tokens}")


@dataclass(frozen=True)
class Batching:
    max_running: int = 256
    chunked_prefill_tokens: int = 8192
    # the largest decode batch, in requests per engine rank, that the engine captures a CUDA graph for (SGLang
    # --cuda-graph-max-bs-decode, vLLM compilation_config max_decode_cudagraph_capture_requests); None = the
    # engine's default (capability/profiles graph_caps)
    cuda_graph_max_bs: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_running", "chunked_prefill_tokens", "cuda_graph_max_bs"):
            value = getattr(self, name)
            if value is None and name == "cuda_graph_max_bs":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")


def expert_parallel_size(tp: int, dp: int, expert_parallel: bool) -> int:
    """The rule for ep, stated once: the experts spread over every tp x dp rank of a stage, else tensor-sharded (1)."""
    return tp * dp if expert_parallel else 1


@dataclass(frozen=True)
class PhasePlan:
    gpus: tuple[int, ...]
    replicas: int = 1
    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp: int = 1
    dp_attention: bool = False
    kernels: Kernels = field(default_factory=Kernels)
    fusion: dict[str, bool] = field(default_factory=dict)
    comm: Comm = field(default_factory=Comm)
    overlap: Overlap = field(default_factory=Overlap)
    batching: Batching = field(default_factory=Batching)
    speculative: Speculative = field(default_factory=Speculative)
    dcp: int = 1  # decode context parallel: KV of a sequence sharded over dcp of the tp ranks (MLA)
    eplb: bool = False  # expert-parallel load balancer (redundant experts, rebalanced placement)
    dense_dp: bool = False  # SGLang --moe-dense-tp-size 1: dense MLP layers data-parallel over DP-attention ranks
    dp_lm_head: bool = False  # SGLang --enable-dp-lm-head: vocab-parallel LM head over the DP-attention group
    # engine-platform options by mi-tune name (vllm-ascend additional_config and HCCL env: engines/vllm_ascend.py);
    # an absent name leaves the platform's default
    platform: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("replicas", "tp", "ep", "pp", "dp", "dcp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if any(g < 0 for g in self.gpus):
            raise ValueError(f"gpus: expected GPU indices >= 0, got {list(self.gpus)}")
        if len(set(self.gpus)) != len(self.gpus):
            raise ValueError(f"gpus: duplicate GPU index in {list(self.gpus)}")
        if len(self.gpus) != self.replicas * self.gpus_per_replica:
            raise ValueError(
                f"gpus: {len(self.gpus)} GPUs but replicas*tp*dp*pp = "
                f"{self.replicas}*{self.tp}*{self.dp}*{self.pp} = {self.replicas * self.gpus_per_replica}"
            )
        if self.ep not in (1, expert_parallel_size(self.tp, self.dp, True)):
            raise ValueError(f"ep: expected 1 or tp*dp = {self.stage_ranks}, got {self.ep}")
        if self.dp_attention != (self.dp > 1):
            raise ValueError("dp_attention: must be true exactly when dp > 1")
        if self.tp % self.dcp:
            raise ValueError(f"dcp: expected a divisor of tp={self.tp}, got {self.dcp}")

    @property
    def stage_ranks(self) -> int:
        """GPUs of one pipeline stage, tp x dp: the ranks the MoE layers span (`ep` is this when the experts are
        spread over them, `expert_parallel_size`) and SGLang's --tp-size."""
        return self.tp * self.dp

    @property
    def gpus_per_replica(self) -> int:
        return self.stage_ranks * self.pp

    def replica_gpus(self, replica: int) -> tuple[int, ...]:
        n = self.gpus_per_replica
        return self.gpus[replica * n : (replica + 1) * n]


@dataclass(frozen=True)
class Plan:
    engine: str
    mode: str
    phases: dict[str, PhasePlan]  # aggregated: {"both": ...}; disaggregated: {"prefill": ..., "decode": ...}
    schema: str = "mi-tune/plan/v1"

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        want = ("both",) if self.mode == "aggregated" else ("prefill", "decode")
        if tuple(sorted(self.phases)) != tuple(sorted(want)):
            raise ValueError(f"phases: {self.mode} plans need phases {', '.join(want)}, got {', '.join(self.phases)}")
        used = [g for p in self.phases.values() for g in p.gpus]
        if len(used) != len(set(used)):
            raise ValueError("phases: a GPU is assigned to more than one phase")

    @property
    def num_gpus(self) -> int:
        return sum(len(p.gpus) for p in self.phases.values())

    @property
    def decoding(self) -> PhasePlan:
        """The phase that runs decode steps (and so the speculative decoding): decode, or both when aggregated."""
        return self.phases["decode" if self.mode == "disaggregated" else "both"]

    def describe(self) -> str:
        """Short human label, e.g. 'sglang disagg P[2x tp1 dp4 ep4 fp8/kv:auto b64/c8192] D[tp8 ...]'. Every
        setting that differs from the plan default shows, so two different plans never share a label."""
        parts = []
        for name, p in self.phases.items():
            label = {"both": "", "prefill": "P", "decode": "D"}[name]
            dims = [f"tp{p.tp}"] + [f"{k}{v}" for k, v in (("dp", p.dp), ("ep", p.ep), ("pp", p.pp)) if v > 1]
            rep = f"{p.replicas}x " if p.replicas > 1 else ""
            dtypes = f"{p.kernels.gemm_dtype}/kv:{p.kernels.kv_cache_dtype}"
            batch = f"b{p.batching.max_running}/c{p.batching.chunked_prefill_tokens}"
            extra = "".join(f" {x}" for x in _settings(p))
            parts.append(f"{label}[{rep}{' '.join(dims)} {dtypes} {batch}{extra}]")
        mode = "agg" if self.mode == "aggregated" else "disagg"
        return f"{self.engine} {mode} " + " ".join(parts)


def _settings(p: PhasePlan) -> list[str]:
    """The phase's non-default settings beyond layout, dtypes and batching, in a fixed order."""
    k, c = p.kernels, p.comm
    out = [f"{kind}:{v}" for kind, v in (("attn", k.attention), ("moe", k.moe), ("gemm", k.linear)) if v != "auto"]
    out += [f"dcp{p.dcp}"] if p.dcp > 1 else []
    out += [f"graph-bs{p.batching.cuda_graph_max_bs}"] if p.batching.cuda_graph_max_bs is not None else []
    out += [f"ar:{c.allreduce}"] if c.allreduce != "custom" else []
    out += [f"a2a:{c.all2all}"] if c.all2all != "allgather_reducescatter" else []
    out += [f"{k.removeprefix('NCCL_').lower()}={v}" for k, v in sorted(c.nccl.items())]
    out += ["tbo"] if p.overlap.two_batch else []
    out += [f"spec:{p.speculative.method}/{p.speculative.draft_tokens}"] if p.speculative.method != "none" else []
    out += [flag for flag, on in (("eplb", p.eplb), ("dense-dp", p.dense_dp), ("dp-head", p.dp_lm_head)) if on]
    out += [f"fuse:{name}={'on' if on else 'off'}" for name, on in sorted(p.fusion.items())]
    out += [f"{name}={value}" for name, value in sorted(p.platform.items())]
    return out
