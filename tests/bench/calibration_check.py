"""Predicted vs measured for every expressible entry of shared/reference/calibration.yaml and of the project's
autotune/catalog/calibration.yaml, with the median |error| and a leave-one-source-out median.

Run: `.venv/bin/python tests/bench/calibration_check.py` (add `--markdown` for README-ready table rows).

Each row is one public figure expressed as a plan (catalog model or shipped config, checkpoint dtype as published:
NVFP4 rows run as 4-bit, FP8 rows as FP8; box from a preset) or as one call of the collective model. Entries the
model cannot express (other GPUs without a preset, multi-node, models without a config) are listed with why.
Medians are printed over all rows and per row class (serving / collective / kernel / speculative / load balance).
Rows a source contradicts itself or a better-grounded source on are shown apart with the reason (APART), neither
fitted nor counted.

Leave-one-source-out (LOSO): the constants in FITTED were set from these public rows. For each row, every fitted
constant is refitted (1-D grid search, the others at their shipped values, minimising the mean
|log(predicted/measured)|: see `fit_error`) on the rows it sets that come from OTHER sources (no row of the checked
row's calibration entry takes part). A constant sets a row when its elasticity on the row is at least DOMINANT_SHARE of
the largest any fitted constant has there (a latency row does not set a bandwidth efficiency). A constant no other
row sets falls back to its prior: a datasheet or NCCL tuning-table figure (efficiency 1.0, no imbalance, no minimum
kernel time, NCCL's LL latencies), or another fitted constant's value. The row is then predicted with all refitted
values at once. Constants are patched by module attribute name (setattr), so the table survives the model's
internal restructuring; a name no module holds is reported and left out. The checkout this file sits in is put
first on sys.path, so a worktree measures its own code.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, partial
from importlib.resources import files
from pathlib import Path

# this checkout's autotune, not the one the venv installed: run as a file from a worktree, the checkout is not on
# sys.path, and the check would silently measure the venv's checkout (/work/main) instead
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.capability.engine_profile import AllReducePath  # noqa: E402
from autotune.capability.profiles import profile  # noqa: E402
from autotune.capability.profiles.vllm_0_34_0 import SYMM_MEM_TWO_SHOT_SYNCS  # noqa: E402
from autotune.catalog import load_preset  # noqa: E402
from autotune.catalog.devices import DEVICES_BY_KEY  # noqa: E402
from autotune.catalog.models import model_from_config  # noqa: E402
from autotune.inputs import restrict_gpus  # noqa: E402
from autotune.perf import comm, comm_fused, ep_balance, opcore, oplist, predict, rates  # noqa: E402
from autotune.perf.ops import cost_ops, step_fn  # noqa: E402
from autotune.perf.serving import prefill_pool  # noqa: E402
from autotune.sim.engine import simulate  # noqa: E402
from autotune.sim.serve import deployment  # noqa: E402
from autotune.sim.trace import make_trace  # noqa: E402
from autotune.specs import Batching, Comm, Kernels, PhasePlan, Plan, Speculative, Workload  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "fixtures"
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
EIGHT = tuple(range(8))

# --- the constants fitted to public rows: (name, attribute path, grid of candidate values, prior) ---------------
# The prior is the value a constant takes when no row outside the held-out source is left to fit it: a datasheet
# or NCCL tuning-table figure, or the path of another FITTED constant (listed before it) whose fitted value it takes.
# The attribute path is looked up in PERF_MODULES in order: "NAME", "NAME.field" (a dataclass field) or
# "NAME[key]" (a dict entry); "A|B" tries A, then B (the rates table's name, then the older one). Grids are
# absolute values; the shipped value is always added. CACHES: module-level dicts cleared after a change.
PERF_MODULES = ("autotune.perf.efficiency", "autotune.perf.rates", "autotune.perf.comm_rates", "autotune.perf.ops")
EFF = (0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)
FITTED = [
    ("gemm_compute", "LARGE_GEMM_FRACTION[sm_89]|DEFAULT_EFFICIENCY.gemm_compute", EFF, 1.0),  # kernel-l20-hgemm-cublas
    (
        "attention_compute",
        "ATTENTION_PREFILL_FRACTION|DEFAULT_EFFICIENCY.attention_compute",
        EFF,
        1.0,
    ),  # kernel-flashmla-h800-decode
    (
        "attention_memory",
        "ATTENTION_DECODE_FRACTION|DEFAULT_EFFICIENCY.attention_memory",
        EFF,
        1.0,
    ),  # kernel-flashmla-h800-decode
    ("pcie_collective", "PCIE_COLLECTIVE_EFFICIENCY", EFF, 1.0),  # pcie-rtx6kpro-nccl-allreduce-8gpu
    ("shm_vs_p2p", "NCCL_SHM_VS_P2P", EFF, 1.0),  # rtx6kpro-asus-nccl-p2p-level
    ("shm_step_us", "NCCL_SHM_STEP_EXTRA_US", (0.0, 0.2, 0.4, 0.57, 0.8, 1.2, 1.6, 2.4), 0.0),  # same
    # rtx6kpro-asus 8-GPU 4-256 KB (NCCL Simple on its fallback ring); prior: NCCL's tuner figure (tuning.cc:165)
    ("simple_step_us", "NCCL_PCIE_SIMPLE_STEP_US", (2.0, 2.5, 3.0, 3.5, 3.7, 4.0, 4.5, 5.0, 5.7), 5.7),
    ("cross_socket", "NCCL_CROSS_SOCKET_DEFAULT_FRACTION", EFF, 1.0),  # pcie-rtx6kpro / nccl-allreduce-channels
    # sglang-pcie-ipc; prior: the per-GPU share of the link when every GPU reads from all peers at once on a
    # switchless dual-socket host (p2pmark dense interconnect, comm_rates.PCIE_ALL_PAIRS_P2P_FRACTION)
    ("ipc_eff", "PCIE_IPC_EFFICIENCY", (0.2, 0.25, 0.3, 0.343, 0.4, 0.5, 0.62, 0.8), "PCIE_ALL_PAIRS_P2P_FRACTION"),
    ("copy_eff", "PCIE_COPY_EFFICIENCY", EFF, 1.0),  # hardware.md 5.1 (Gen4 24-26 / 31.5) / pcie-rtx6kpro p2p
    ("nvlink_eff", "NVLINK_COLLECTIVE_EFFICIENCY", EFF, 1.0),  # sglang2904 / vllm24111 / vllm24532 one-stage rows
    # vLLM's two-stage custom kernel's time per pass of its grid (vllm24111 / vllm24532 ca_2stage rows); prior 0: the
    # link rate alone
    ("two_stage_wave_us", "CUSTOM_TWO_STAGE_WAVE_US", (0.0, 4.0, 6.0, 7.0, 7.5, 8.0, 8.5, 9.0, 10.0, 12.0), 0.0),
    # the engines' P2P all-reduce latency, base + per peer x (p - 1) (comm_rates.engine_ar_latency_us); priors:
    # NCCL's ring LL base latency and NVLink LL per-step latency (nccl src/graph/tuning.cc:151, :159)
    ("engine_ar_base_us", "ENGINE_AR_BASE_US", (2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0), 6.6),
    ("engine_ar_peer_us", "ENGINE_AR_PEER_US", (0.1, 0.2, 0.3, 0.35, 0.45, 0.6, 0.8, 1.0), 0.6),
    ("expert_load_cv", "EXPERT_LOAD_CV", (0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0, 1.4, 2.0, 2.2), 0.0),  # eplb-*
    ("eplb_residual", "EPLB_RESIDUAL_IMBALANCE", (0.0, 0.05, 0.1, 0.15, 0.2, 0.3), 0.0),  # eplb-trtllm / kimi
    ("elementwise_us", "MIN_US[norm]", (0.0, 1.0, 2.0, 2.9, 4.0, 5.0, 5.5), 0.0),  # kernel-min-time-rmsnorm-decode
    # the fused residual add + RMSNorm (kernel-min-time-rmsnorm-decode's fused row, vllm36899); prior: a plain RMSNorm
    ("fused_norm_us", "FUSED_ADD_NORM_MIN_US", (2.9, 3.5, 4.0, 4.5, 5.0, 5.17, 5.5, 6.0), "MIN_US[norm]"),
    ("mtp_accept", "DRAFT_ACCEPTANCE[mtp]", (0.6, 0.7, 0.8, 0.85, 0.9, 0.95), 0.0),  # mtp-deepseek-v3-report
    ("dspark_accept", "DRAFT_ACCEPTANCE[dspark]", (0.5, 0.6, 0.65, 0.68, 0.7, 0.75, 0.8), 0.0),  # dspark-*
    # eager-host-time-vllm45709-4090d and -l20, vllm-awq-qwen3-14b-a100-eager; prior: SGLang's eager DeepSeek-V3
    # forward (sglang#12160: 980 us a layer, efficiency.py) over the op list's 24.7 kernels of its decode layer
    ("eager_launch_us", "EAGER_HOST_US_PER_LAUNCH", (20.0, 30.0, 40.0, 45.0, 48.0, 50.0, 52.0, 55.0, 60.0, 70.0), 40.0),
    # kernel-marlin-dense-w4a16-h100-humming2 / -h200-tileops (q4c23); prior: the fused Marlin MoE's per-SM figure
    # (kernel-marlin-moe-h20-dsv3)
    (
        "marlin_dense_gbs",
        "MARLIN_DENSE_PER_SM_STREAM_GBS",
        (8.0, 10.0, 11.3, 12.8, 14.4, 16.0, 18.0),
        "MARLIN_PER_SM_STREAM_GBS",
    ),
    # the fused all-reduce + RMSNorm kernel's epilogue fixed time (fused-allreduce-rmsnorm-h100-tp2-flaggems773, arn25);
    # prior 0: the epilogue's memory time alone
    ("fused_epilogue_us", "FUSED_NORM_EPILOGUE_US", (0.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0), 0.0),
]


CACHES = ("_TABLES", "_GROUPS")


def _perf_modules() -> list:
    mods = []
    for name in PERF_MODULES + tuple(n for n in sys.modules if n.startswith("autotune.perf.")):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if mod not in mods:
            mods.append(mod)
    return mods


def _split(path: str) -> tuple[str, str, str | int]:
    """'A.b' -> (A, field b, ''); 'A[k]' -> (A, '', k) (an integer key for digits: 'A[8]'); 'A' -> (A, '', '')."""
    if "[" in path:
        name, key = path[:-1].split("[")
        return name, "", int(key) if key.isdigit() else key
    name, _, fld = path.partition(".")
    return name, fld, ""


def resolve(paths: str) -> str | None:
    """The first of the '|'-separated attribute paths some perf module holds."""
    for path in paths.split("|"):
        name, fld, key = _split(path)
        for mod in _perf_modules():
            obj = getattr(mod, name, None)
            if obj is not None and (not fld or hasattr(obj, fld)) and (key == "" or key in obj):
                return path
    return None


def read_constant(paths: str):
    path = resolve(paths)
    if path is None:
        return None
    name, fld, key = _split(path)
    obj = next(getattr(m, name) for m in _perf_modules() if hasattr(m, name))
    return getattr(obj, fld) if fld else obj[key] if key != "" else obj


def _clear_caches() -> None:
    for mod in _perf_modules():
        for obj in vars(mod).values():
            is_cache = callable(getattr(obj, "cache_clear", None)) and not isinstance(obj, type)  # not a class
            if is_cache and getattr(obj, "__module__", "").startswith("autotune.perf"):
                obj.cache_clear()
        for name in CACHES:
            if isinstance(getattr(mod, name, None), dict):
                getattr(mod, name).clear()


@contextmanager
def overrides(values: dict[str, float]):
    """Set fitted constants (by FITTED path) on every perf module holding them, restore on exit. Function default
    arguments bound to the old object (e.g. `p2p_eff=eff.PCIE_COLLECTIVE_EFFICIENCY`) are rebound too."""
    undo: list[Callable[[], None]] = []
    try:
        for path, value in values.items():
            name, fld, key = _split(path)
            holders = [m for m in _perf_modules() if hasattr(m, name)]
            if not holders:
                continue
            old = getattr(holders[0], name)
            new = dataclasses.replace(old, **{fld: value}) if fld else {**old, key: value} if key != "" else value
            for mod in holders:
                if getattr(mod, name) is old:
                    setattr(mod, name, new)
                    undo.append(lambda m=mod, n=name, o=old: setattr(m, n, o))
                for fn in vars(mod).values():
                    defaults = getattr(getattr(fn, "__wrapped__", fn), "__defaults__", None)
                    if defaults and any(d is old for d in defaults):
                        target = getattr(fn, "__wrapped__", fn)
                        target.__defaults__ = tuple(new if d is old else d for d in defaults)
                        undo.append(lambda t=target, d=defaults: setattr(t, "__defaults__", d))
        _clear_caches()
        yield
    finally:
        for step in reversed(undo):
            step()
        _clear_caches()


# --- models and boxes ------------------------------------------------------------------------------------------


def _config(name: str) -> dict:
    if name == "qwen3-30b-a3b":
        return json.loads((FIXTURES / "qwen3-30b-a3b" / "config.json").read_text())
    return json.loads((files("autotune.catalog") / "models" / f"{name}.json").read_text())


NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
FP8_TENSOR = {"quant_method": "fp8"}


@cache
def model(name: str, quant: str = ""):
    """A catalog/fixture config, optionally with the published checkpoint's quantization_config instead."""
    quant_config = {"nvfp4": NVFP4, "fp8": FP8_TENSOR, "nvfp4_moe_only": NVFP4_MOE_ONLY}[quant] if quant else None
    return quantized(name, quant_config, f"{name}{'-' + quant if quant else ''}")


def quantized(name: str, quant_config: dict | None, label: str, config: dict | None = None):
    """The catalog/fixture config `name` (or `config`) with `quant_config` as its quantization_config (None: its
    own), loaded as the model `label`."""
    config = _config(name) if config is None else config
    if quant_config is not None:
        config["quantization_config"] = quant_config
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / label / "config.json"
        path.parent.mkdir()
        config.setdefault("_mi_tune", {})["name"] = path.parent.name
        path.write_text(json.dumps(config))
        return model_from_config(path)


@cache
def box(preset: str, gpus: int = 0):
    return restrict_gpus(dataclasses.replace(load_preset(preset), measured=None), gpus)  # the model, not a curve


@cache
def switchless_host():
    """sglang-pcie-ipc-allreduce-8x-sm120's host: the SM120 preset's GPUs, one root port each, GPUs 0-3 / 4-7
    on two NUMA nodes, no PCIe switches (the entry's setup)."""
    links = tuple(tuple("X" if i == j else "NODE" if i // 4 == j // 4 else "SYS" for j in range(8)) for i in range(8))
    return dataclasses.replace(box("rtx-pro-6000-x8"), links=links, pcie_switch_uplink_gbs=0.0)


@cache
def b200_box():
    """8x B200 on NVSwitch: the H200 preset's box with catalog.devices "b200" GPUs (arch sm_100, NVLink5)."""
    spec = DEVICES_BY_KEY["b200"]
    gpus = tuple(
        dataclasses.replace(a, name=spec.name, arch=spec.arch, nvlink_gbs=spec.nvlink_gbs)
        for a in box("h200-x8").accelerators
    )
    return dataclasses.replace(box("h200-x8"), accelerators=gpus)


@cache
def tinybox():
    """tinygrad/open-gpu-kernel-modules README's box (the "tinybox green"): 6x RTX 4090 (the rtx-4090-x8 preset's
    GPUs, PCIe Gen4 x16), peer access on through that repository's patched driver, each GPU on a root port of its
    own (bus ids 01 42 81 82 c1 c2: no switch between any two) and all in one socket's bus space 00-ff, so every
    pair is NODE (one socket: an assumption from the bus ids; the README names no CPU)."""
    hw = box("rtx-4090-x8", 6)
    n = hw.num_gpus
    links = tuple(tuple("X" if i == j else "NODE" for j in range(n)) for i in range(n))
    gpus = tuple(dataclasses.replace(a, numa_node=0) for a in hw.accelerators)
    host = dataclasses.replace(hw.host, sockets=1, numa_nodes=1)
    p2p = tuple((True,) * n for _ in range(n))
    return dataclasses.replace(hw, accelerators=gpus, host=host, links=links, p2p=p2p, pcie_switch_uplink_gbs=0.0)


@cache
def wrx90_cpayne():
    """voipmonitor/rtx6kpro hardware/wrx90-cpayne-8gpu-root-topology-comparison.md, its Group A: 8 RTX PRO 6000
    Blackwell (the rtx-pro-6000-x8 preset's GPUs, Gen5 x16) behind two c-payne Gen5 switches of 4 GPUs each, each
    switch on a Gen5 x16 root port of its own quadrant of one Threadripper Pro 7955WX (one socket): PIX inside a
    switch, NODE across, the preset's 63 GB/s switch uplink."""
    hw = box("rtx-pro-6000-x8")
    n = hw.num_gpus
    links = tuple(tuple("X" if i == j else "PIX" if i // 4 == j // 4 else "NODE" for j in range(n)) for i in range(n))
    gpus = tuple(dataclasses.replace(a, numa_node=0) for a in hw.accelerators)
    return dataclasses.replace(hw, accelerators=gpus, host=dataclasses.replace(hw.host, sockets=1), links=links)


# --- rows -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    entry: str
    label: str
    unit: str
    measured: float
    predict: Callable[[], float]

    @property
    def kind(self) -> str:
        """Row class for the per-class medians: serving / collective / kernel / speculative / load balance."""
        if self.unit in SERVING_UNITS or self.label.startswith("Qwen3.5"):
            return "serving"
        prefix = self.entry.split("-")[0]
        return {"kernel": "kernel", "mtp": "speculative", "dspark": "speculative", "eplb": "load balance"}.get(
            prefix, "collective"
        )


def serving(m, preset, gpus, isl, osl, kv="fp8", **layout) -> Callable[[], float]:
    """Offline max-throughput (trtllm-bench): output tok/s/GPU at the engine's batch limits."""

    def run() -> float:
        hw = box(preset, gpus)
        batching = Batching(max_running=1024, chunked_prefill_tokens=8192)
        # TRT-LLM's generation attention (XQA / masked MHA in multi-block mode: a sequence's KV split over CTAs,
        # nvidia.github.io/TensorRT-LLM/advanced/gpt-attention.html) is not the vLLM proxy's FA2 on the archs where
        # vLLM runs FA2 (its one-token-GQA-only splits, perf/tiles.py fa2_decode_streams): a kernel that splits to
        # fill the SMs there (fa2-26)
        attention = "flashinfer" if hw.gpu.arch in profile("vllm").fa2_decode_archs else "auto"
        kernels = Kernels(kv_cache_dtype=kv, attention=attention)
        phase = PhasePlan(gpus=tuple(range(gpus)), kernels=kernels, batching=batching, **layout)
        p = predict(Plan("vllm", "aggregated", {"both": phase}), m(), hw, Workload(isl=isl, osl=osl))
        return p.output_tok_s_per_gpu if p.feasible else float("nan")

    return run


# trtllm-bench throughput without --max_batch_size / --max_num_tokens (the perf-overview R1 FP8 DEP8 H200 rows give
# neither): it sets them from its own KV estimate (NVIDIA/TensorRT-LLM tensorrt_llm/bench/benchmark/utils/general.py
# get_settings -> bench/build/build.py get_benchmark_engine_settings -> bench/build/tuning.py calc_engine_setting /
# finetune_setting, the versions of that era; re-derived here, not copied). Its KV estimate is the generic
# 2 x layers x max(tp, kv heads) x head size bytes per token, which for MLA counts R1's 128 "kv heads" x 56
# (hidden 7168 / 128 heads: the checkpoint's remote-code config has no head_dim) = 874 KB/token, ~20x MLA's real
# cache, so it caps the batch far below what the cache holds (a later version counts MLA's one latent per token and,
# with attention DP, sizes the batch per rank: bench/tuning/heuristics.py; 1k/1k admits all 3,000 requests either
# way). The limits are per rank ("--max_batch_size: Max batch size in each rank", the same engine's DeepSeek-R1
# blog, Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md), so the attention-DP replica runs 8x them. Prompts
# are not chunked (enable_chunked_prefill off; Hopper has no MLA chunked context) and the token budget is raised to
# max ISL + batch when it is smaller (general.py).
TRTLLM_BENCH_KV_FRACTION = 0.90  # --kv_cache_free_gpu_mem_fraction default (perf-overview.md: "default 0.90")
H200_NVML_GIB = 143771 / 1024  # nvidia-smi total of an H200 SXM 141 GB: 143,771 MiB (a prior: the heuristic's input)
R1_PARAMS = 685e9  # deepseek-ai/DeepSeek-R1-0528 safetensors parameter count (model card: 685B params)


def _band_round(x: float, floor: int, bands: tuple[tuple[float, int], ...]) -> int:
    """`x` rounded up to the step of the first (limit, step) band it is under, at least `floor` (tuning.py's
    finetune_setting rounding of the batch size and the token budget)."""
    step = next(step for limit, step in bands if x < limit)
    return max(floor, step * math.ceil(x / step))


def trtllm_bench_limits(isl: int, osl: int, tp: int = 8, layers: int = 61, kv_heads: int = 128, head: int = 56,
                        params: float = R1_PARAMS, fp8: bool = True) -> tuple[int, int]:  # fmt: skip
    """trtllm-bench's (max_batch_size, max_num_tokens) per rank for an FP8-block checkpoint with FP8 KV (1 byte per
    weight and per KV element) on `tp` H200s: calc_engine_setting then finetune_setting (tuning.py)."""
    gib = 1024**3
    bytes_per_elem = 1.0 if fp8 else 2.0
    per_token_gib = 2 * layers * max(tp, kv_heads) * head * bytes_per_elem / gib
    cache_gib = (H200_NVML_GIB * tp - params * bytes_per_elem / gib) * TRTLLM_BENCH_KV_FRACTION
    raw_bs = min(cache_gib / (per_token_gib * (isl + osl)), 4096)
    raw_tokens = min(raw_bs * (1 + isl / osl), 32768)
    bs = _band_round(raw_bs, 64, ((256, 32), (1024, 128), (math.inf, 256)))
    tokens = _band_round(raw_tokens, 2048, ((4096, 256), (8192, 512), (math.inf, 1024)))
    return bs, max(tokens, isl + bs)  # no chunked prefill: the budget holds the longest prompt and a full batch


def trtllm_bench(
    m, preset, gpus, isl, osl, requests, kv="fp8", limits=None, concurrency=0, **layout
) -> Callable[[], float]:
    """trtllm-bench throughput: `requests` fixed-length requests, all queued at t=0 (perf-overview.md's table of
    num_requests per ISL/OSL) or kept `concurrency` in flight (--concurrency), its Per GPU Output Throughput: every
    output token over the time the last request finished (its Total Latency; bench/dataclasses/reporting.py), from
    the simulator. Per-rank (max_batch_size, max_num_tokens): `limits` when the command gives them, else what
    trtllm_bench_limits derives; times the attention-DP ranks, each of which admits prompts whole under its own
    budget, its decoding requests first (InstanceSpec.whole_prompt_ranks). What stays unexpressed: TRT-LLM's KV
    sizing (free memory after load x the fraction; the plan keeps the model's engine memory fit) and its
    attention-DP balancing of prompts across ranks (enable_balance)."""

    def run() -> float:
        bs, tokens = limits or trtllm_bench_limits(isl, osl, tp=gpus)
        dp = layout.get("dp", 1)
        batching = Batching(max_running=bs * dp, chunked_prefill_tokens=tokens * dp)
        phase = PhasePlan(gpus=tuple(range(gpus)), kernels=Kernels(kv_cache_dtype=kv), batching=batching, **layout)
        plan = Plan("vllm", "aggregated", {"both": phase})
        load = dict(concurrency=concurrency) if concurrency else dict(burst=requests)
        w = Workload(isl=isl, osl=osl, **load)
        hw = box(preset, gpus)
        base = predict(plan, m(), hw, w)
        if not base.feasible:
            return float("nan")
        dep_ = deployment(plan, m(), hw, w, base)
        # each attention-DP rank schedules its own prompts whole under its own max_num_tokens (no chunked prefill)
        dep_ = dataclasses.replace(dep_, instance=dataclasses.replace(dep_.instance, whole_prompt_ranks=dp))
        out = simulate(dep_, make_trace(w, requests), concurrency)
        return sum(out.osl) / (max(out.done_ms) / 1e3) / gpus

    return run


def dep(n: int, pp: int = 1) -> dict:
    return dict(tp=1, dp=n, ep=n, pp=pp, dp_attention=n > 1)


def busbw(hw, group, nbytes, setting) -> float:
    p = len(group)
    return nbytes * 2 * (p - 1) / p / comm.all_reduce_s(hw, group, nbytes, setting, 1e12) / 1e9


def nccl(**env) -> Comm:
    return Comm("nccl", nccl=env)


def sweep_busbw(hw, group, setting) -> float:
    """nccl-tests -b 8M -e 2G -f 2: mean bus bandwidth over the sweep."""
    return statistics.mean(busbw(hw, group, 8 * MIB << k, setting) for k in range(9))


def copy_gbs(pairs, hw: Callable = lambda: box("rtx-pro-6000-x8")) -> Callable[[], float]:
    """Model's point-to-point copy rate between GPUs 0 and 1 (on the rtx-pro-6000-x8 box: same switch): uni- or
    bidirectional, at the DMA copy efficiency (p2pBandwidthLatencyTest times cudaMemcpyPeerAsync)."""

    def run() -> float:
        topo = comm.topology(hw())
        traffic = {pair: float(GIB) for pair in pairs}
        copy_eff = read_constant("PCIE_COPY_EFFICIENCY")  # cudaMemcpyPeer runs on the copy engines, not NCCL's SMs
        return len(pairs) * GIB / comm.transfer_s(topo, traffic, p2p_eff=copy_eff) / 1e9

    return run


def us(hw, group, nbytes, setting, engine: str = "vllm") -> Callable[[], float]:
    return lambda: comm.all_reduce_s(hw(), group, nbytes, setting, 1e12, engine) * 1e6


# vllm-project/vllm#24111 (TP=6, TP=4) and #24532 (TP=4), H100 SXM, benchmark_device_communicators.py, hidden 8192 bf16:
# (entry, ranks, ca_1stage, ca_2stage, symm_mem_multimem) in us at 0.5 / 1 / 1.5 / 2 / 3 / 4 MiB
VLLM_AR_SIZES = tuple((int(mib * MIB), f"{mib:g} MiB") for mib in (0.5, 1, 1.5, 2, 3, 4))
VLLM_AR_TABLES = (
    ("custom-allreduce-h100-tp6-vllm24111", 6, (13, 21, 30, 38, 53, 70), (15, 17, 20, 26, 29, 37),
     (13, 16, 18, 21, 25, 31)),
    ("custom-allreduce-h100-tp6-vllm24111", 4, (10, 15, 19, 22, 30, 38), (17, 18, 27, 27, 35, 43),
     (16, 18, 21, 23, 28, 33)),
    ("custom-allreduce-h100-tp4-vllm24532", 4, (10, 14, 19, 23, 30, 38), (17, 18, 25, 26, 35, 42),
     (15, 18, 21, 23, 28)),  # the multimem column of the 4 MB row is cut off in the stored text
)  # fmt: skip
# The same benchmark's symm_mem_two_shot column (torch two_shot_all_reduce_ behind vLLM's copies in and out, forced at
# every world size): (entry, box, ranks, us at 0.5 / 1 / 1.5 / ... MiB). H100 rows as above; vllm-project/vllm#42324
# "SM 10.0 / B200, World Size = 2" (only its first three rows are in the stored text).
VLLM_SYMM_TWO_SHOT = (
    ("custom-allreduce-h100-tp6-vllm24111", "h200", 6, (17, 21, 24, 29, 35, 41)),
    ("custom-allreduce-h100-tp6-vllm24111", "h200", 4, (18, 19, 19, 23, 25, 29)),
    ("custom-allreduce-h100-tp4-vllm24532", "h200", 4, (16, 19, 19, 23, 25)),  # 4 MB cut off in the stored text
    ("symm-mem-allreduce-vllm42324", "b200", 2, (17, 20, 21)),
)  # fmt: skip


# sgl-project/sglang#2904 (H100 SXM, no CUDA graph), its kernel column at 512 / 32768 / 262144 / 524288 / 1048576:
# element counts of a float32 tensor, not bytes. The PR times `python3 tests/test_trt_reduce.py`, whose performance
# test builds `torch.randint(1, 16, (sz,), dtype=torch.float32)` for each test size sz (sgl-kernel/tests/
# test_trt_reduce.py, sgl-project/sglang 01fe99e; its successor test_custom_allreduce.py keeps sz as the element
# count). Read so, the same table's vLLM column (20.6 / 26.9 / 40.2 us at 4 GPUs = 1 / 2 / 4 MiB) matches vLLM's own
# CUDA-graph timing of that kernel at those sizes (vllm#24111 / #24532 ca_2stage, 18 / 26-27 / 42-43 us, the path
# vLLM takes there); read as bytes it is 1.6-2.7x them.
SGLANG2904_NUMEL = (512, 32768, 262144, 524288, 1048576)
SGLANG2904_US = ((2, (3.7, 4.5, 7.9, 12.5, 19.9)), (4, (4.8, 4.8, 13.9, 20.2, 31.1)), (8, (5.9, 7.8, 16.7, 22.1, 33.8)))


def sglang2904_us(hw, group, nbytes: float) -> Callable[[], float]:
    """The kernel sglang#2904 timed: sgl-kernel's TensorRT-LLM-derived custom all-reduce (trt_reduce_internal.cu,
    sgl-project/sglang 06d5300; replaced by vLLM's kernel in sglang#5079, by the JIT v2 kernel SGLang 0.5.23 runs in
    sglang#19880). One-shot below SelectImplementation's limits (trt_reduce_internal.cuh: always at 2 ranks, below
    1,000,000 bytes at <= 4 ranks, below 500,000 bytes above), else two-shot, whose blocks wait at two block_barrier
    rounds (before the reduce-scatter and before the all-gather): two fixed times, one for one-shot. Timed outside
    CUDA graphs, the kernel runs with COPY_INPUT (invokeOneOrTwoShotAllReduceKernel: `is_capturing` false), whose
    blocks first copy the whole message from the input into the shared IPC buffer and only then enter the first
    barrier (oneShotAllReduceKernel / twoShotAllReduceKernel): one in-kernel copy, at memory bandwidth."""
    n = len(group)
    one_shot_max = math.inf if n <= 2 else (1e6 if n <= 4 else 5e5) - 1
    path = AllReducePath("custom", math.inf, one_shot_max, two_shot_syncs=2, in_kernel_copies=1)
    return lambda: comm.path_s(hw(), group, path, nbytes) * 1e6


def vllm_path_us(hw, group, nbytes, name: str, stages: int = 0, syncs: int = 0) -> Callable[[], float]:
    """One path of vLLM's all-reduce dispatch benchmarked alone (benchmark_device_communicators.py): the vLLM
    profile's `name` path on the box at any size, its custom kernel forced one- or two-stage by `stages`
    (ca_1stage / ca_2stage; 0: the path's own split), its two-shot fixed times `syncs` where given (a kernel forced
    at a world size vLLM's dispatch gives another), whatever vLLM's dispatch would run at that size."""

    def run() -> float:
        h = hw()
        paths = profile("vllm").allreduce_paths(h.gpu.arch, len(group), comm.transport(comm.topology(h), group))
        path = dataclasses.replace(next(p for p in paths if p.name == name), max_bytes=math.inf)
        if stages:
            path = dataclasses.replace(path, one_shot_max_bytes=math.inf if stages == 1 else 0.0)
        if syncs:
            path = dataclasses.replace(path, two_shot_syncs=syncs)
        return comm.path_s(h, group, path, nbytes) * 1e6

    return run


def efficiency_rate(fitted_name: str, datasheet: float) -> Callable[[], float]:
    paths = next(paths for name, paths, _, _ in FITTED if name == fitted_name)
    return lambda: datasheet * read_constant(paths)


def table_tflops(hw, op_class: str, bucket: str, dtype: str = "bf16") -> float:
    """The compute rate the model's rates table gives a box's GPU for one op class and bucket."""
    return rates.rates_table(hw).get(op_class, dtype, bucket).tflops


def prefill_tflops(preset: str, head_dim: int) -> float:
    """The model's prefill attention rate for a head dimension on the preset's GPU (rates table x head-dim speed)."""
    table = rates.rates_table(box(preset))
    speed = rates.prefill_head_dim_speed(table.arch, head_dim, False, table.tensor_rate_ratio)
    return table.get("attention", "bf16", "prefill").tflops * speed


def mla_decode_us(preset: str, heads: int, tokens: int, ctx: int, seqs: int = 128) -> float:
    """The model's MLA decode attention kernel time (DeepSeek-V3 latent attention, bf16 KV, `heads` query heads a
    rank, `tokens` query tokens a sequence) for a batch of `seqs` sequences at context `ctx`, microseconds."""
    m, hw = model("deepseek-v3"), box(preset)
    tp = m.layers[-1].attention.num_heads // heads
    phase = PhasePlan(gpus=tuple(range(tp)), tp=tp)
    c = opcore.context(m, phase, "vllm", hw, phase.gpus)
    x = opcore.StepInput(decode_seqs=float(seqs), decode_ctx=float(ctx), decode_width=tokens)
    ops = [op for op in oplist.attention_ops(c, m.layers[-1].attention, x) if op.kind == "attention"]
    return cost_ops(c, ops).time_s * 1e6


def accepted_tokens(method: str, k: int) -> Callable[[], float]:
    def run() -> float:
        a = read_constant(f"DRAFT_ACCEPTANCE[{method}]")
        return (1 - a ** (k + 1)) / (1 - a)

    return run


def imbalance(ep: int, slots: int, top_k: int, tokens: float, eplb: bool) -> Callable[[], float]:
    """Most-loaded / mean expert rank load the model applies under EP (perf/ep_balance.py): `slots` expert slots
    over `ep` ranks, a step of `tokens` tokens (math.inf: a long window, the popularity skew alone)."""
    return lambda: ep_balance.busiest_rank_load(ep, slots, top_k, tokens, eplb)


def mtp_speedup() -> float:
    """Single-stream decode speed-up of one MTP draft token, DeepSeek-V3 TP8 on 8x H200."""
    m, hw, w = model("deepseek-v3"), box("h200-x8"), Workload(isl=1000, osl=1000, concurrency=1)

    def tpot(spec: Speculative) -> float:
        phase = PhasePlan(gpus=EIGHT, tp=8, speculative=spec)
        return predict(Plan("sglang", "aggregated", {"both": phase}), m, hw, w).tpot_ms["mean"]

    return tpot(Speculative()) / tpot(Speculative("mtp", 1))


def p2p_level_speedup(concurrency: int) -> float:
    """rtx6kpro-asus-nccl-p2p-level decode: output tok/s with NCCL_P2P_LEVEL=SYS over NCCL defaults, Qwen3.5-397B
    NVFP4 TP4 with MTP on GPUs 0-3 of the rtx-pro-6000-x8 box (SGLang). The page states neither the draft count
    nor the prompt lengths: 3 drafts, 1k/1k and max_running 64 are this row's assumptions (the ratio, the
    quantity the source varies, moves little with them; the absolute rates are not compared)."""
    m, hw = model("qwen3.5-397b-a17b", "nvfp4"), box("rtx-pro-6000-x8")
    w = Workload(isl=1000, osl=1000, concurrency=concurrency)

    def rate(env: dict) -> float:
        phase = PhasePlan(
            gpus=(0, 1, 2, 3),
            tp=4,
            speculative=Speculative("mtp", 3),
            batching=Batching(max_running=64),
            comm=nccl(**env),
        )
        p = predict(Plan("sglang", "aggregated", {"both": phase}), m, hw, w)
        return p.output_tok_s_per_gpu if p.feasible else float("nan")

    return rate({"NCCL_P2P_LEVEL": "SYS"}) / rate({})


def rows() -> list[Row]:
    qwen = lambda: model("qwen3-30b-a3b", "nvfp4")  # noqa: E731  nvidia/Qwen3-30B-A3B-FP4
    llama = lambda: model("llama-3.1-70b", "nvfp4")  # noqa: E731  Llama-3.3-70B: same architecture as 3.1-70B
    llama_fp8 = lambda: model("llama-3.1-70b", "fp8")  # noqa: E731
    r1 = lambda: model("deepseek-v3")  # noqa: E731  DeepSeek-R1-0528: DeepSeek-V3 architecture, FP8 block
    pro, host = lambda: box("rtx-pro-6000-x8"), switchless_host
    q, ll = "pcie-trtllm-qwen3-30b-a3b-fp4-rtx6000pro", "pcie-trtllm-llama33-70b-fp4-rtx6000pro"
    sh, asus, ch = (
        "pcie-rtx6kpro-nccl-allreduce-8gpu",
        "rtx6kpro-asus-nccl-p2p-level",
        "rtx6kpro-nccl-allreduce-channels",
    )
    ipc, tok = "sglang-pcie-ipc-allreduce-8x-sm120", "out tok/s/GPU"
    out = [
        Row(q, "Qwen3-30B-A3B NVFP4 TP1 1k/1k", tok, 9938, serving(qwen, "rtx-pro-6000-x8", 1, 1000, 1000)),
        Row(q, "Qwen3-30B-A3B NVFP4 DEP2 1k/1k", tok, 8409, serving(qwen, "rtx-pro-6000-x8", 2, 1000, 1000, **dep(2))),
        Row(
            q,
            "Qwen3-30B-A3B NVFP4 DEP2 PP2 1k/1k",
            tok,
            7059,
            serving(qwen, "rtx-pro-6000-x8", 4, 1000, 1000, **dep(2, 2)),
        ),
        Row(q, "Qwen3-30B-A3B NVFP4 DEP8 1k/1k", tok, 3985, serving(qwen, "rtx-pro-6000-x8", 8, 1000, 1000, **dep(8))),
        Row(q, "Qwen3-30B-A3B NVFP4 DEP8 1k/8k", tok, 2406, serving(qwen, "rtx-pro-6000-x8", 8, 1024, 8192, **dep(8))),
        Row(q, "Qwen3-30B-A3B NVFP4 TP1 8k/1k", tok, 1914, serving(qwen, "rtx-pro-6000-x8", 1, 8192, 1024)),
        Row(ll, "Llama-3.3-70B NVFP4 TP1 1k/1k", tok, 1724, serving(llama, "rtx-pro-6000-x8", 1, 1000, 1000)),
        Row(ll, "Llama-3.3-70B NVFP4 TP1 8k/1k", tok, 296, serving(llama, "rtx-pro-6000-x8", 1, 8192, 1024)),
        Row(ll, "Llama-3.3-70B NVFP4 PP2 1k/1k", tok, 1901, serving(llama, "rtx-pro-6000-x8", 2, 1000, 1000, pp=2)),
        Row(ll, "Llama-3.3-70B NVFP4 PP2 8k/1k", tok, 327, serving(llama, "rtx-pro-6000-x8", 2, 8192, 1024, pp=2)),
        Row(ll, "Llama-3.3-70B NVFP4 PP2 32k/1k", tok, 67, serving(llama, "rtx-pro-6000-x8", 2, 32768, 1024, pp=2)),
        Row(ll, "Llama-3.3-70B FP8 TP2 2xH200 1k/1k", tok, 2587, serving(llama_fp8, "h200-x8", 2, 1000, 1000, tp=2)),
    ]
    r1id = "nvl-trtllm-deepseek-r1-fp8-8xh200"
    # perf-overview.md's num_requests per ISL/OSL: 3000 (1k/1k), 1500 (1k/8k), 1000 (1k/32k)
    for isl, osl, n, value in ((1000, 1000, 3000, 1627), (1024, 1024, 3000, 1620), (1024, 8192, 1500, 1218),
                               (1024, 32768, 1000, 438)):  # fmt: skip
        label = f"DeepSeek-R1 FP8 DEP8 8xH200 {isl}/{osl}"
        out.append(Row(r1id, label, tok, value, trtllm_bench(r1, "h200-x8", 8, isl, osl, n, **dep(8))))
    # the same engine's DeepSeek-R1 blog, "H200 max-throughput": its limits given (128 / 1151 per rank), 1024 kept in
    # flight, 5120 requests of 1k/2k, BF16 KV (no kv dtype given: the FP8-block checkpoint's default)
    blog = trtllm_bench(r1, "h200-x8", 8, 1024, 2048, 5120, kv="auto", limits=(128, 1151), concurrency=1024, **dep(8))
    out.append(Row("trtllm-blog-deepseek-r1-fp8-8xh200-max-throughput", "DeepSeek-R1 FP8 DEP8 8xH200 1k/2k c=1024",
                   tok, 1436.2, blog))  # fmt: skip
    out += [
        Row(
            sh,
            "AR 8 GPU busbw 8M-2G, MIN_NCHANNELS=8 (dual socket)",
            "GB/s",
            37.6,
            lambda: sweep_busbw(pro(), EIGHT, nccl(NCCL_MIN_NCHANNELS="8")),
        ),
        Row(
            sh,
            "AR 8 GPU busbw 32 MB, NCCL defaults (dual socket)",
            "GB/s",
            22.2,
            lambda: busbw(pro(), EIGHT, 32 * MIB, nccl()),
        ),
        Row(sh, "AR 8 GPU latency 256 B, NCCL", "us", 24.5, us(pro, EIGHT, 256, nccl())),
        Row(
            sh,
            "AR 8 GPU latency 1 KB, custom PCIe kernel (PCIe-IPC)",
            "us",
            7.5,
            us(pro, EIGHT, 1024, Comm("pcie_ipc")),
        ),
        Row(sh, "P2P copy unidirectional, same switch", "GB/s", 54.5, copy_gbs([(0, 1)])),
        Row(sh, "P2P copy bidirectional, same switch", "GB/s", 107.0, copy_gbs([(0, 1), (1, 0)])),
        Row(
            asus,
            "AR 4 GPU busbw 32 MB, NCCL defaults",
            "GB/s",
            30.3,
            lambda: busbw(pro(), (0, 1, 2, 3), 32 * MIB, nccl()),
        ),
        Row(
            asus,
            "AR 4 GPU busbw 32 MB, NCCL_P2P_LEVEL=SYS",
            "GB/s",
            39.3,
            lambda: busbw(pro(), (0, 1, 2, 3), 32 * MIB, nccl(NCCL_P2P_LEVEL="SYS")),
        ),
    ]
    for size, label, value in ((256, "256 B", 28.6), (4 * KIB, "4 KB", 65.6), (8 * KIB, "8 KB", 70.8),
                               (16 * KIB, "16 KB", 69.3), (64 * KIB, "64 KB", 79.5), (256 * KIB, "256 KB", 86.2),
                               (32 * MIB, "32 MB", 2976.0)):  # fmt: skip
        out.append(Row(asus, f"AR 8 GPU {label}, NCCL defaults", "us", value, us(pro, EIGHT, size, nccl())))
    for c, value in ((1, 69.7 / 67.3), (64, 1381.1 / 1283.1)):
        label = f"Qwen3.5-397B NVFP4 TP4 MTP decode c={c}: P2P_LEVEL=SYS / defaults"
        out.append(Row(asus, label, "x", value, lambda c=c: p2p_level_speedup(c)))
    seven = lambda: busbw(box("rtx-pro-6000-x8", 7), tuple(range(7)), 4 * GIB, nccl(NCCL_P2P_LEVEL="SYS"))  # noqa: E731
    out.append(Row(ch, "AR 7 GPU busbw 4 GB, NCCL_P2P_LEVEL=SYS (dual socket)", "GB/s", 41.5, seven))
    ipc_rows = (
        (12 * KIB, "12 KiB", 5.3),
        (96 * KIB, "96 KiB", 15.3),
        (384 * KIB, "384 KiB", 34.6),
        (100 * MIB, "100 MiB", 8500.0),
    )  # fmt: skip  (the NCCL column: apart_rows)
    for size, label, t_ipc in ipc_rows:
        out.append(
            Row(ipc, f"AR 8 GPU {label} PCIe-IPC, no switches", "us", t_ipc, us(host, EIGHT, size, Comm("pcie_ipc")))
        )
    car, h200 = "custom-allreduce-h100-nvlink-sglang2904", lambda: box("h200-x8")  # NVLink 900 GB/s, as H100 SXM
    for n, times in SGLANG2904_US:
        group = tuple(range(n))
        for numel, t in zip(SGLANG2904_NUMEL, times, strict=True):
            label = f"{numel} fp32 ({numel * 4 // KIB} KiB)"
            out.append(Row(car, f"custom AR {n} GPU NVLink {label}", "us", t, sglang2904_us(h200, group, numel * 4)))
    # vLLM's custom all-reduce forced one-stage (ca_1stage) / two-stage (ca_2stage), hidden 8192 bf16, H100 SXM:
    # vllm-project/vllm#24111 at TP=6 and TP=4, vllm-project/vllm#24532 at TP=4 (the same benchmark script)
    for entry, n, one_stage, two_stage, _ in VLLM_AR_TABLES:
        group = tuple(range(n))
        for stages, kind, times in ((1, "one-stage", one_stage), (2, "two-stage", two_stage)):
            for (size, label), t in zip(VLLM_AR_SIZES, times, strict=True):
                row = vllm_path_us(h200, group, size, "custom", stages)
                out.append(Row(entry, f"vLLM custom AR {n} GPU NVLink {label} {kind}", "us", float(t), row))
    out += [
        Row(
            "kernel-l20-hgemm-cublas",
            "L20 large FP16 GEMM",
            "TFLOPS",
            110.0,
            lambda: table_tflops(box("l20-x8"), "gemm", "m>1024"),
        ),
        Row(
            "kernel-flashmla-h800-decode",
            "H800 MLA decode, memory bound",
            "GB/s",
            3000.0,
            efficiency_rate("attention_memory", 3350.0),
        ),
        Row(
            "kernel-flashmla-h800-decode",
            "H800 MLA decode, compute bound",
            "TFLOPS",
            660.0,
            efficiency_rate("attention_compute", 989.0),
        ),
        # export parts: the model's rates table on the H20 (perf/fractions.py per_sm_fraction)
        Row(
            "kernel-flashmla-h20-decode",
            "H20 MLA decode, compute bound (FlashMLA)",
            "TFLOPS",
            128.0,
            lambda: table_tflops(box("h20-x8"), "attention", "decode"),
        ),
        Row(
            "kernel-flashmla-h20-decode",
            "H20 MLA decode 16 heads x 1 token, b=128, 4k (FlashMLA)",
            "us",
            601.0,
            lambda: mla_decode_us("h20-x8", 16, 1, 4096),
        ),
        Row(
            "kernel-flashmla-h20-decode",
            "H20 MLA decode 16 heads x 5 tokens, b=128, 4k (FlashMLA)",
            "us",
            1168.0,
            lambda: mla_decode_us("h20-x8", 16, 5, 4096),
        ),
        Row(
            "kernel-fa3-h20-fwd",
            "H20 FA3 forward hd128 seqlen 2k non-causal",
            "TFLOPS",
            126.2,
            lambda: prefill_tflops("h20-x8", 128),
        ),
        Row(
            "kernel-fa3-h20-fwd",
            "H20 FA3 forward hd64 seqlen 2k non-causal",
            "TFLOPS",
            120.1,
            lambda: prefill_tflops("h20-x8", 64),
        ),
        Row(
            "kernel-min-time-rmsnorm-decode",
            "decode RMSNorm kernel",
            "us",
            2.9,
            lambda: read_constant("MIN_US[norm]"),
        ),
        Row(
            "kernel-min-time-rmsnorm-decode",
            "decode fused add+RMSNorm kernel",
            "us",
            4.11,
            lambda: read_constant("FUSED_ADD_NORM_MIN_US"),
        ),
        Row(
            "kernel-min-time-add-rmsnorm-vllm36899",
            "decode add+RMSNorm, h 7168, torch.compile (vLLM)",
            "us",
            5.53,
            lambda: read_constant("FUSED_ADD_NORM_MIN_US"),
        ),
        Row(
            "kernel-min-time-add-rmsnorm-vllm36899",
            "decode add+RMSNorm, h 7168, FlashInfer (SGLang)",
            "us",
            5.17,
            lambda: read_constant("FUSED_ADD_NORM_MIN_US"),
        ),
        Row("mtp-deepseek-v3-report", "MTP 2nd-token acceptance", "", 0.875, lambda: accepted_tokens("mtp", 1)() - 1),
        Row("mtp-deepseek-v3-report", "MTP decode speed-up, V3 TP8 8xH200 c=1", "x", 1.8, mtp_speedup),
        Row("mtp-sglang-deepseek-v3-nextn", "MTP acceptance length k=1", "tok", 1.9, accepted_tokens("mtp", 1)),
        Row("dspark-vllm-v4-flash-0731", "DSpark acceptance length k=5", "tok", 2.74, accepted_tokens("dspark", 5)),
        Row("dspark-vllm-v41-flash-gsm8k", "DSpark acceptance length k=5", "tok", 2.82, accepted_tokens("dspark", 5)),
        # DeepSeek-R1: 256 routed experts top-8; 1,024 routed rows per rank (the blog's Table 1 "By rank: Average
        # 1024", 128 by expert slot x 8 slots), so 128 tokens per rank at top-8; EP36 with EPLB: 288 slots (32
        # redundant). The per-iteration figures of a machine-translation dataset (blog4, "Offline EP Load Balancer")
        Row(
            "eplb-trtllm-deepseek-r1-ep32",
            "EP32 max/mean rank load, no EPLB",
            "",
            2.564,
            imbalance(32, 256, 8, 32 * 1024 / 8, False),
        ),
        Row(
            "eplb-trtllm-deepseek-r1-ep32",
            "EP36 max/mean rank load, EPLB",
            "",
            1.115,
            imbalance(36, 288, 8, 36 * 1024 / 8, True),
        ),
        # Kimi K3: expert count not stated, Kimi K2's 384 top-8 assumed; loads summed over the EPLB window
        Row(
            "eplb-vllm-kimi-k3-ep16",
            "EP16 max/mean rank load, no EPLB",
            "",
            1.069,
            imbalance(16, 384, 8, math.inf, False),
        ),
        Row(
            "eplb-vllm-kimi-k3-ep16", "EP16 max/mean rank load, EPLB", "", 1.008, imbalance(16, 384, 8, math.inf, True)
        ),
        # one rank's 16 experts, accumulated counts: their spread is the popularity CV itself (sample std, n - 1)
        Row(
            "eplb-sglang-deepseek-expert-counts",
            "expert popularity CV, 16 experts of one layer",
            "",
            0.72,
            lambda: read_constant("EXPERT_LOAD_CV"),
        ),
    ]
    out += kernel_source_rows()  # src22b
    out += four_bit_rows()  # q4c23
    out += h20p23_rows()
    out += pf24_rows()
    out += sm80_rows()  # sm80-25
    out += arn25_rows()
    out += op28_rows()
    out += sgmla28_rows()
    out += b200moe29_rows()
    out += gdnwalk36_rows()
    out += dsa29_rows()
    out += q35rtx36_rows()
    out += hopper36_rows()
    out += dsaidx36_rows()
    return out + concurrency_rows() + pcie_source_rows() + graphless_rows() + b200_nvfp4_rows()  # fp4b23


# --- src22b: second public sources for the kernel-level fitted constants -----------------------------------------
# zzc0721/torch-performance-test-data database.md: torch.mm of two square bf16 matrices, 1,024-10,240, the best size
# (test.py: 30 calls between two synchronisations, wall clock). Per preset: the contributors' bf16 figures (several
# RTX 4090 24 GB rows: their median). Its other parts have no preset (NOT_EXPRESSIBLE).
TORCH_MM_BF16_TFLOPS = {
    "l40s-x8": (269.15,),
    "rtx-4090-x8": (170.06, 173.31, 162.39, 163.09),
    "h200-x8": (790.29,),
    "h20-x8": (141.86,),
    "rtx-pro-6000-x8": (409.42,),
    "b200": (1696.03,),
}
# ai-bot-pro/achatbot#123 (the same run as deepseek-ai/FlashMLA#19): FlashMLA's tests/test_flash_mla.py on a Modal
# H100, b=128, mean_sk 4096, fixed lengths (varlen off): the memory-bound cases (h_q 16 / 32 / 64, s_q 1-2), GB/s
FLASHMLA_H100_MEMORY_GBS = (2826.0, 2812.0, 2813.0, 2788.0, 2789.0)


def with_device(hw, key: str, *fields: str):
    """`hw` with each GPU's `fields` taken from catalog.devices entry `key` (its datasheet figures)."""
    spec = DEVICES_BY_KEY[key]
    values = {f: dict(v) if isinstance(v := getattr(spec, f), dict) else v for f in fields}
    return dataclasses.replace(hw, accelerators=tuple(dataclasses.replace(a, **values) for a in hw.accelerators))


@cache
def b200_compute_box():
    """b200_box with the B200's own datasheet rates (peak TFLOPS, memory bandwidth) on its GPUs, for a rate row."""
    return with_device(b200_box(), "b200", "peak_tflops", "mem_bw_gbs")


def dsa29_rows() -> list[Row]:
    """kernel-flashmla-sparse-prefill (dsa29): FlashMLA's README, the DSA sparse prefill kernel's best forward rate,
    against the prefill attention rate perf/mla_ops.py sparse_prefill_ops prices that kernel at."""
    e = "kernel-flashmla-sparse-prefill"
    return [
        Row(e, "H800 SXM5 DSA sparse MLA prefill, compute bound", "TFLOPS", 640.0,
            efficiency_rate("attention_compute", 989.0)),
        Row(e, "B200 DSA sparse MLA prefill, compute bound", "TFLOPS", 1450.0,
            lambda: table_tflops(b200_compute_box(), "attention", "prefill")),
    ]  # fmt: skip


def kernel_source_rows() -> list[Row]:
    """Second public sources for the kernel-level fitted constants (src22b): the large-GEMM fraction
    (LARGE_GEMM_FRACTION[sm_89] on the L40S and RTX 4090, and the other archs' priors), the MLA decode kernel's
    memory fraction (ATTENTION_DECODE_FRACTION) on an H100, the decode norms' minimum times on an RTX 5090."""
    mm = "kernel-torch-mm-bf16-crowd"
    out = []
    for preset, figures in TORCH_MM_BF16_TFLOPS.items():
        hw = b200_compute_box if preset == "b200" else (lambda p=preset: box(p))
        label = f"{preset.removesuffix('-x8')} torch.mm bf16 square, best of 1k-10k"
        rate = lambda hw=hw: table_tflops(hw(), "gemm", "m>1024")  # noqa: E731
        out.append(Row(mm, label, "TFLOPS", statistics.median(figures), rate))
    h100_sxm_gbs = 3350.0  # H100 SXM5 HBM3 (datasheet); 2.8 TB/s measured rules out the PCIe card's 2.0 TB/s
    out.append(
        Row(
            "kernel-flashmla-h100-decode-achatbot",
            "H100 MLA decode, memory bound (FlashMLA, b=128, 4k)",
            "GB/s",
            statistics.median(FLASHMLA_H100_MEMORY_GBS),
            efficiency_rate("attention_memory", h100_sxm_gbs),
        )
    )
    # vllm-project/vllm#55329 (RTX 5090, bf16, hidden 5120, one token): the Inductor-compiled native norms vLLM runs
    # by default (one kernel each, the PR's profile); a one-token norm takes its minimum time (rates.MIN_US)
    norm = "kernel-min-time-rmsnorm-rtx5090-vllm55329"
    out.append(Row(norm, "RMSNorm 1 token h 5120, compiled (vLLM)", "us", 1.54, lambda: read_constant("MIN_US[norm]")))
    fused = lambda: read_constant("FUSED_ADD_NORM_MIN_US")  # noqa: E731
    out.append(Row(norm, "add+RMSNorm 1 token h 5120, compiled (vLLM)", "us", 1.92, fused))
    return out


# --- end-to-end rows at a fixed concurrency (issue 16, e2e16) ---------------------------------------------------
# nvidia/Qwen3.5-397B-A17B-NVFP4 (V1): NVFP4 on the MoE blocks' linear operators only (the card, as quoted in
# SemiAnalysisAI/InferenceX#2205); the ignore list is reconstructed from that description, not copied.
NVFP4_MOE_ONLY = dict(NVFP4, ignore=["lm_head", "*self_attn*", "*linear_attn*", "*mlp.gate", "mtp*"])
SERVING_UNITS = ("out tok/s/GPU", "decode tok/s", "TPOT ms", "in tok/s/node")


def at_concurrency(m, preset, gpus, engine, isl, osl, c, metric, **layout) -> Callable[[], float]:
    """Steady-state prediction of a closed loop of `c` requests on `gpus` GPUs of a preset (by name) or of a box
    built here (a function returning it): output tok/s/GPU, aggregate decode tok/s (c sequences over the mean TPOT)
    or the mean TPOT (ms)."""

    def run() -> float:
        plan = Plan(engine, "aggregated", {"both": PhasePlan(gpus=tuple(range(gpus)), **layout)})
        hw = preset() if callable(preset) else box(preset, 0)
        p = predict(plan, m(), hw, Workload(isl=isl, osl=osl, concurrency=c))
        if not p.feasible:
            return float("nan")
        tpot = p.tpot_ms["mean"]
        return {"out": p.output_tok_s_per_gpu, "decode": c * 1e3 / tpot, "tpot": tpot}[metric]

    return run


# InferenceX's launch of that run (SemiAnalysisAI/InferenceX 962bd4c3d, benchmarks/single_node/dsr1_fp8_h200.sh, 1k/1k
# branch): --attention-backend flashinfer --chunked-prefill-size 32768 --max-running-requests 512; its client draws
# each prompt and output length uniformly from [int(0.8 L), L] (utils/bench_serving/benchmark_serving.py
# sample_uniform, RANDOM_RANGE_RATIO 0.8 in .github/workflows/benchmark-tmpl.yml): L = 1024 -> mean 921.5 tokens.
INFERENCEX_R1_H200_LEN = 922
INFERENCEX_R1_H200_LAYOUT = dict(
    tp=8, kernels=Kernels(attention="flashinfer"), batching=Batching(max_running=512, chunked_prefill_tokens=32768)
)


def inferencex_c4(isl: int, osl: int, metric: str) -> Callable[[], float]:
    """InferenceX's SGLang DeepSeek-R1 H200 run at concurrency 4 (10 x 4 prompts, each from the length's uniform
    0.8-1.0 band), the launch's non-1k/1k branch (256 running, chunk 32768, flashinfer), through the
    simulator's closed loop so the first four prompts arrive together as the client sends them: mean TTFT or mean
    TPOT, ms."""

    def run() -> float:
        lay = dict(INFERENCEX_R1_H200_LAYOUT, batching=Batching(max_running=256, chunked_prefill_tokens=32768))
        plan = Plan("sglang", "aggregated", {"both": PhasePlan(gpus=EIGHT, **lay)})
        # the client's uniform band as a normal of its mean and standard deviation (0.2 x nominal / sqrt(12))
        std = dict(isl_std=isl / 0.9 * 0.2 / math.sqrt(12), osl_std=osl / 0.9 * 0.2 / math.sqrt(12))
        w = Workload(isl=isl, osl=osl, concurrency=4, length_dist="normal", **std)
        m, hw = model("deepseek-v3"), box("h200-x8")
        out = simulate(deployment(plan, m, hw, w, predict(plan, m, hw, w)), make_trace(w, 40), 4)
        n = range(len(out.osl))
        if metric == "ttft":
            return statistics.fmean(out.first_ms[i] - out.arrival_ms[i] for i in n)
        return statistics.fmean((out.done_ms[i] - out.first_ms[i]) / (out.osl[i] - 1) for i in n)

    return run


def graphless_decode_ms(preset: str) -> Callable[[], float]:
    """vLLM's decode step of Qwen3-30B-A3B (BF16) at TP4 over 8 sequences at the mean context of a 3500 / 1500
    request (3500 + 750), priced with no CUDA graph (step_fn's caps (0, 0)), ms."""

    def run() -> float:
        phase = PhasePlan(gpus=(0, 1, 2, 3), tp=4)
        step = step_fn(model("qwen3-30b-a3b"), phase, "vllm", box(preset, 4), phase.gpus, "decode", caps=(0.0, 0.0))
        return step(opcore.StepInput(decode_seqs=8.0, decode_ctx=4250.0)).step_ms

    return run


def graphless_rows() -> list[Row]:
    """Decode steps without CUDA graphs: host-bound (efficiency.EAGER_HOST_US_PER_LAUNCH, perf/eager_host.py)."""
    d, l20 = "eager-host-time-vllm45709-4090d", "eager-host-time-vllm45709-l20"
    return [
        Row(d, "Qwen3-30B-A3B TP4 c=8 decode, eager (4x 4090D)", "TPOT ms", 33.92, graphless_decode_ms("rtx-4090-x8")),
        Row(
            d,
            "Qwen3-30B-A3B TP4 c=8 decode, compiled, no graph (4x 4090D)",
            "TPOT ms",
            35.20,
            graphless_decode_ms("rtx-4090-x8"),
        ),  # fmt: skip
        Row(
            l20,
            "Qwen3-30B-A3B TP4 c=8 decode, compiled, no graph (4x L20)",
            "TPOT ms",
            34.4,
            graphless_decode_ms("l20-x8"),
        ),  # fmt: skip
    ]


def concurrency_rows() -> list[Row]:
    r1, ix = (lambda: model("deepseek-v3")), "inferencex-sglang-r1-fp8-h200-tp8-conc"  # noqa: E731
    n, lay = INFERENCEX_R1_H200_LEN, INFERENCEX_R1_H200_LAYOUT
    out = []
    for c, tok_s, tpot in ((8, 74.6, 12.8), (16, 111.9, 17.2), (32, 151.1, 25.6), (64, 223.6, 34.6)):
        label = f"DeepSeek-R1 FP8 TP8 8xH200 SGLang 1k/1k c={c}"
        out.append(Row(ix, label, "out tok/s/GPU", tok_s, at_concurrency(r1, "h200-x8", 8, "sglang", n, n, c, "out",
                                                                          **lay)))  # fmt: skip
        out.append(Row(ix, label + " TPOT", "TPOT ms", tpot, at_concurrency(r1, "h200-x8", 8, "sglang", n, n, c,
                                                                              "tpot", **lay)))  # fmt: skip
    # ctx=0 decode, MTP off: a 64-token prompt and the page's 512 output tokens; TP4 on GPUs 0-3, fp8 KV off
    rtx, kv = "rtx6kpro-vllm-qwen35-397b-awq-nvfp4-decode", Kernels(kv_cache_dtype="auto")
    awq = lambda: model("qwen3.5-397b-a17b-awq")  # noqa: E731
    nvfp4 = lambda: model("qwen3.5-397b-a17b", "nvfp4_moe_only")  # noqa: E731
    for name, m, values in (("AWQ", awq, (104, 509, 1272, 2796)), ("NVFP4 (MoE only)", nvfp4, (79, 406, 987, 2294))):
        for c, value in zip((1, 8, 32, 128), values, strict=True):
            run = at_concurrency(m, "rtx-pro-6000-x8", 4, "vllm", 64, 512, c, "decode", tp=4, kernels=kv,
                                 batching=Batching(max_running=128, chunked_prefill_tokens=8192))  # fmt: skip
            out.append(Row(rtx, f"Qwen3.5-397B {name} TP4 vLLM decode c={c}", "decode tok/s", value, run))
    h20 = "lmsys-sglang-r1-h20-prefill-tp8"
    out.append(Row(h20, "DeepSeek-R1 FP8 prefill TP8 8xH20 SGLang 4k prompts", "in tok/s/node", 16500, h20_prefill))
    c4, pre, dec = "inferencex-sglang-r1-fp8-h200-tp8-c4", (7373, 922), (922, 7373)  # 0.9 x 8192, 0.9 x 1024
    return out + [
        Row(c4, "DeepSeek-R1 FP8 TP8 8xH200 SGLang 8k/1k c=4 TTFT", "TTFT ms", 474.3, inferencex_c4(*pre, "ttft")),
        Row(c4, "DeepSeek-R1 FP8 TP8 8xH200 SGLang 8k/1k c=4 TPOT", "TPOT ms", 12.05, inferencex_c4(*pre, "tpot")),
        Row(c4, "DeepSeek-R1 FP8 TP8 8xH200 SGLang 1k/8k c=4 TPOT", "TPOT ms", 10.93, inferencex_c4(*dec, "tpot")),
    ]


def pcie_source_rows() -> list[Row]:
    """Second sources for the PCIe collective and copy constants (src22a), each from a box other than the
    rtx6kpro pages' (see autotune/catalog/calibration.yaml, the src22a block)."""
    tiny, six = "pcie-tinybox-4090-p2p-readme", tuple(range(6))
    # the README's all_reduce_perf -g 6 (32 MB, float, out-of-place busbw), April 2024: NCCL before 2.23.4 kept P2P
    # on every PCIe path of an AMD host (PATH_SYS; PXB since, comm_rates.NCCL_DEFAULT_P2P_LEVEL), and the bus ids
    # are an EPYC's four root complexes; 0.78 of the link is beyond the model's SHM path, so P2P_LEVEL=SYS
    p2p_sys = nccl(NCCL_P2P_LEVEL="SYS")
    ring = lambda: busbw(tinybox(), six, 32 * MIB, p2p_sys)  # noqa: E731
    # the WRX90 page's Group A: NCCL 2.27.5 with NCCL_P2P_LEVEL=SYS (P2P on every pair); its asymptotic busbw, and
    # single-pair / two-flow cross-switch 256 MB writes (section 1 and 4)
    wrx, eight = "rtx6kpro-wrx90-cpayne-8gpu", tuple(range(8))
    wrx_ring = lambda: busbw(wrx90_cpayne(), eight, GIB, p2p_sys)  # noqa: E731
    return [
        Row(tiny, "P2P copy 4090 Gen4 cudaMemcpyPeer (simpleP2P)", "GB/s", 24.44, copy_gbs([(0, 1)], tinybox)),
        Row(tiny, "P2P copy 4090 Gen4 bidirectional", "GB/s", 50.6, copy_gbs([(0, 1), (1, 0)], tinybox)),
        Row(tiny, "AR 6 GPU 4090 Gen4 busbw 32 MB, P2P", "GB/s", 24.58, ring),
        Row(wrx, "P2P copy Gen5 same switch, one pair", "GB/s", 56.29, copy_gbs([(0, 1)], wrx90_cpayne)),
        Row(wrx, "P2P copy Gen5 across switches, both ways", "GB/s", 109.26, copy_gbs([(0, 4), (5, 1)], wrx90_cpayne)),
        Row(wrx, "AR 8 GPU 2 switches busbw 1 GB, P2P_LEVEL=SYS", "GB/s", 46.44, wrx_ring),
    ]


def h20_prefill() -> float:
    """Input tok/s of one SGLang prefill instance (TP8 on 8x H20, R1 FP8 block, FP8 KV as the entry's FlashMLA-FP8)
    saturated with 4,096-token prompts at the published 16,384-token chunk (the blog's reproduction,
    antgroup/sglang#4: --chunked-prefill-size 16384 --attention-backend fa3 --kv-cache-dtype fp8_e4m3, which the
    plan's `auto` attention on sm_90 and FP8 KV are: FA3's prefill in FP8; serving.prefill_pool). Not expressed: the
    reproduction's --page-size 64 (an MLA prefill attends its up-projected keys, not the pages)."""
    m, hw = model("deepseek-v3"), box("h20-x8")
    phase = PhasePlan(
        gpus=EIGHT, tp=8, kernels=Kernels(kv_cache_dtype="fp8"), batching=Batching(chunked_prefill_tokens=16384)
    )
    step = step_fn(m, phase, "sglang", hw, EIGHT, "prefill")
    return prefill_pool(step, 1, Workload(isl=4096, osl=1), 16384, 1).requests_per_s * 4096


def triton_moe_down_ms(preset: str, tokens: int) -> Callable[[], float]:
    """The model's routed-expert grouped GEMM for DeepSeek-R1's down projection alone (FP8 block, SGLang TP8: each
    rank all 256 experts' 7168 x 256 slices, `tokens` x top-8 routed rows), at the op list's grouped-MoE rate and
    SGLang's auto MoE kernel (Triton) speed, milliseconds."""

    def run() -> float:
        from autotune.perf import costing

        m, gpus = model("deepseek-v3"), tuple(range(8))
        c = opcore.context(m, PhasePlan(gpus=gpus, tp=8), "sglang", box(preset), gpus)
        ffn = m.layers[-1].ffn
        inter = ffn.expert_params / m.hidden_size / 3 / 8  # one rank's intermediate columns of an expert
        per_expert = tokens * ffn.experts_per_token / ffn.num_experts
        flops = 2.0 * tokens * ffn.experts_per_token * inter * m.hidden_size
        nbytes = ffn.num_experts * inter * m.hidden_size * c.expert_bytes
        op = opcore.Op("grouped_moe", c.expert_dtype, rates.m_bucket(per_expert), per_expert, m.hidden_size, inter,
                       flops, nbytes, 1.0, "down", c.moe_speed)  # fmt: skip
        return costing.cost_ops(c, [op]).time_s * 1e3

    return run


def h20p23_rows() -> list[Row]:
    """h20p23: the kernels of the LMSYS H20 prefill instance (lmsys-sglang-r1-h20-prefill-tp8)."""
    moe = "kernel-triton-moe-h20-down-tma"
    down = triton_moe_down_ms("h20-x8", 8192)
    return [Row(moe, "H20 Triton fused MoE down proj, R1 TP8, 8K tokens", "ms", 1.435, down)]


def triton_moe_down_gathered_ms(preset: str, tokens: int) -> Callable[[], float]:
    """triton_moe_down_ms plus the tile waves of a down projection whose tiles are gathered by pointer, not TMA
    (perf/oplist.py _moe_waves: waves of 128 x 128 output tiles beyond the first, tiles.GEMM_WAVE_FIXED_US), ms."""
    grouped = triton_moe_down_ms(preset, tokens)

    def run() -> float:
        from autotune.perf import costing

        m, gpus = model("deepseek-v3"), tuple(range(8))
        c = opcore.context(m, PhasePlan(gpus=gpus, tp=8), "sglang", box(preset), gpus)
        ops: list = []
        opcore._gemm_waves(ops, c, c.expert_dtype, tokens * m.layers[-1].ffn.experts_per_token, m.hidden_size, 1.0, "")
        return grouped() + costing.cost_ops(c, ops).time_s * 1e3

    return run


def pf24_rows() -> list[Row]:
    """pf24: the same H20 kernel before its TMA change (sgl-project/sglang#10567's 'before', pointer-gathered)."""
    moe, down = "kernel-triton-moe-h20-down-tma", triton_moe_down_gathered_ms("h20-x8", 8192)
    return [Row(moe, "H20 Triton fused MoE down proj without TMA, R1 TP8, 8K tokens", "ms", 2.430, down)]


def fa3_paged_prefill_us(batch: int, seqlen: int, heads: int, kv_heads: int, head_dim: int) -> Callable[[], float]:
    """vLLM's FA3 prefill attention kernel alone (the op list's attention ops, no KV-cache write) over `batch` whole
    prompts of `seqlen` tokens on one GPU of the H200 preset (132 SMs, the compute of an H100 / H800 SXM)."""

    def run() -> float:
        from autotune.perf import costing, opcore, oplist

        spec = model("llama-3.1-70b")
        att = dataclasses.replace(
            spec.layers[0].attention, num_heads=heads, num_kv_heads=kv_heads, score_dim=2 * head_dim,
            kv_elems_per_token=2 * kv_heads * head_dim, kv_read_elems_per_token=2 * kv_heads * head_dim,
        )  # fmt: skip
        c = opcore.context(spec, PhasePlan(gpus=(0,)), "vllm", box("h200-x8", 1), (0,))
        x = opcore.StepInput(prefill_tokens=float(batch * seqlen), prefill_ctx=seqlen / 2.0)
        ops = [op for op in oplist.attention_ops(c, att, x) if op.kind == "attention"]
        return costing.cost_ops(c, ops).time_s * 1e6

    return run


# --- fp4b23: NVFP4 serving on B200 (sm_100) -----------------------------------------------------------------------
# nvidia/DeepSeek-R1-0528-FP4-V2 (ModelOpt NVFP4): its model card says it "additionally quantizes the wo module in
# attention layers" over nvidia/DeepSeek-R1-0528-FP4, whose hf_quant_config excludes every self_attn module, the
# lm_head and the MTP layer (61); the router (mlp.gate) is a plain linear. The other attention projections stay bf16.
R1_FP4_V2 = dict(
    NVFP4,
    ignore=["lm_head", "*self_attn.q_a_proj*", "*self_attn.q_b_proj*", "*self_attn.kv_a_proj_with_mqa*",
            "*self_attn.kv_b_proj*", "*mlp.gate", "model.layers.61*"],
)  # fmt: skip
# InferenceX's dsr1-fp4-b200-sglang launch of that run (SemiAnalysisAI/InferenceX db42e28ab,
# benchmarks/single_node/dsr1_fp4_b200.sh; image lmsysorg/sglang:v0.5.6-cu129-amd64 in .github/configs/
# nvidia-master.yaml): --tensor-parallel-size 8 --ep-size 8 --kv-cache-dtype fp8_e4m3 --chunked-prefill-size 16384
# --max-running-requests 256 --attention-backend trtllm_mla --moe-runner-backend flashinfer_trtllm
# --enable-flashinfer-allreduce-fusion --enable-symm-mem; the same client as the H200 entry (mean lengths 922)
INFERENCEX_R1_FP4_B200_LAYOUT = dict(
    tp=8,
    ep=8,
    kernels=Kernels(kv_cache_dtype="fp8"),
    fusion={"allreduce_rmsnorm": True},
    batching=Batching(max_running=256, chunked_prefill_tokens=16384),
)
# SemiAnalysisAI/InferenceX#870 (2026-03-06 comments): c -> (output tok/s/GPU, mean ITL ms); ITL is per streamed
# chunk of 10 tokens (--stream-interval 10), so TPOT ~ ITL / 10 (the H200 sweep of the same issue: 127.4 / 12.8 and
# 170.9 / 17.2, 9.95x); the ITL table stops at c=16 in the stored copy. c=64 is shown apart (APART).
INFERENCEX_R1_FP4_B200 = {4: (59.7, 78.9), 8: (104.8, 90.9), 16: (169.3, 111.3), 32: (282.4, None)}


@cache
def b200_serving_box():
    """8x B200 for a serving row: b200_compute_box with the B200's own memory (180 GB) and dtype features (FP4)."""
    return with_device(b200_compute_box(), "b200", "memory_gib", "features")


@cache
def r1_fp4():
    """DeepSeek-R1-0528 as nvidia/DeepSeek-R1-0528-FP4-V2 publishes it (R1_FP4_V2)."""
    return quantized("deepseek-v3", R1_FP4_V2, "deepseek-r1-0528-fp4-v2")


def b200_nvfp4_rows() -> list[Row]:
    """DeepSeek-R1-0528 NVFP4 on 8x B200, SGLang TP8 / EP8, InferenceX's closed loop at c=4-32 (fp4b23)."""
    ix, n, lay = "inferencex-sglang-r1-fp4-b200-tp8-conc", INFERENCEX_R1_H200_LEN, INFERENCEX_R1_FP4_B200_LAYOUT
    out = []
    for c, (tok_s, itl) in INFERENCEX_R1_FP4_B200.items():
        label = f"DeepSeek-R1 NVFP4 TP8 EP8 8xB200 SGLang 1k/1k c={c}"
        run = partial(at_concurrency, r1_fp4, b200_serving_box, 8, "sglang", n, n, c, **lay)
        out.append(Row(ix, label, "out tok/s/GPU", tok_s, run(metric="out")))
        if itl:
            out.append(Row(ix, label + " TPOT", "TPOT ms", itl / 10, run(metric="tpot")))
    return out + trtllm_b200_fp4_itl_rows()


# NVIDIA/TensorRT-LLM#5929 (2025-07-10): DeepSeek-R1 FP4 on 8x B200 180 GB, trtllm-serve (v0.21.0rc2, built from
# source), LLMPerf at batch 1, ITL p50 in seconds: (ISL, EP) -> ITL; output 600 tokens. The checkpoint is named
# "DS-R1 FP4": nvidia/DeepSeek-R1-FP4, whose exclude list keeps every self_attn module (R1_FP4_V1). A decode step
# with no prompt in it (the p50 of the inter-token gaps), the one public c=1 figure for NVFP4 R1 on B200; TRT-LLM is
# expressed as the vLLM plan (as the other trtllm rows), EP=None as TP8 with TP-sharded experts.
R1_FP4_V1 = dict(NVFP4, ignore=["lm_head", "*self_attn*", "*mlp.gate", "model.layers.61*"])
TRTLLM_R1_FP4_B200_ITL = {(1600, 1): 0.00678, (1600, 8): 0.00681, (8192, 1): 0.00714, (8192, 8): 0.00717}


@cache
def r1_fp4_v1():
    """DeepSeek-R1 as nvidia/DeepSeek-R1-FP4 publishes it (R1_FP4_V1)."""
    return quantized("deepseek-v3", R1_FP4_V1, "deepseek-r1-fp4")


def trtllm_b200_fp4_itl_rows() -> list[Row]:
    """TensorRT-LLM#5929's batch-1 ITL of DeepSeek-R1 NVFP4 on 8x B200 (TRTLLM_R1_FP4_B200_ITL)."""
    out = []
    for (isl, ep), itl_s in TRTLLM_R1_FP4_B200_ITL.items():
        run = at_concurrency(r1_fp4_v1, b200_serving_box, 8, "vllm", isl, 600, 1, "tpot", tp=8, ep=ep)
        label = f"DeepSeek-R1 NVFP4 TP8 EP{ep} 8xB200 TRT-LLM ISL {isl} batch 1 ITL p50"
        out.append(Row("trtllm-issue-r1-fp4-b200-itl", label, "TPOT ms", itl_s * 1e3, run))
    return out


# sgl-project/sglang#29674 (GLM-5.2 cookbook, B200 NVFP4 cells): nvidia/GLM-5.2-NVFP4 on 8x B200, image
# lmsysorg/sglang:dev-glm52-nvfp4, "high-throughput": --tp 8 --dp 8 --enable-dp-attention --chunked-prefill-size 32768
# --mem-fraction-static 0.92 --max-running-requests 512, no MTP; 8192/1024 at concurrency 1024: P50 TPOT 67.12 ms,
# 589.4 output tok/s/GPU. GLM-5.2's shards match GLM-5.3's (the catalog's glm-5.3, same architecture).
GLM52_NVFP4_B200_HT = dict(
    tp=1, dp=8, ep=8, dp_attention=True, batching=Batching(max_running=512, chunked_prefill_tokens=32768)
)


@cache
def glm52_nvfp4():
    """GLM-5.2 as nvidia/GLM-5.2-NVFP4 (ModelOpt NVFP4; its exclude list not read: every linear taken as NVFP4)."""
    return quantized("glm-5.3", NVFP4, "glm-5.2-nvfp4")


def b200_nvfp4_apart_rows() -> list[Row]:
    """fp4b23's rows shown apart (FP4B23_APART says why): InferenceX's R1 NVFP4 B200 c=64 point, GLM-5.2 NVFP4."""
    n, lay = INFERENCEX_R1_H200_LEN, INFERENCEX_R1_FP4_B200_LAYOUT
    r1 = at_concurrency(r1_fp4, b200_serving_box, 8, "sglang", n, n, 64, "out", **lay)
    glm = at_concurrency(glm52_nvfp4, b200_serving_box, 8, "sglang", 8192, 1024, 1024, "out", **GLM52_NVFP4_B200_HT)
    glm_tpot = at_concurrency(
        glm52_nvfp4, b200_serving_box, 8, "sglang", 8192, 1024, 1024, "tpot", **GLM52_NVFP4_B200_HT
    )
    return [
        Row("inferencex-sglang-r1-fp4-b200-tp8-conc", "DeepSeek-R1 NVFP4 TP8 EP8 8xB200 SGLang 1k/1k c=64",
            "out tok/s/GPU", 312.5, r1),
        Row("sglang-cookbook-glm52-nvfp4-b200", "GLM-5.2 NVFP4 DP8 8xB200 SGLang 8k/1k c=1024", "out tok/s/GPU",
            589.4, glm),
        Row("sglang-cookbook-glm52-nvfp4-b200", "GLM-5.2 NVFP4 DP8 8xB200 SGLang 8k/1k c=1024 TPOT (P50)", "TPOT ms",
            67.12, glm_tpot),
    ]  # fmt: skip


FP4B23_APART = (
    " inferencex-sglang-r1-fp4-b200-tp8-conc c=64: the source flags the run itself (mean TTFT 5.7 s, P99 73 s "
    "against 0.2-0.4 s at c=4-32; output 312.5 tok/s/GPU, 1.1x the c=32 point for 2x the requests): not a steady "
    "state. sglang-cookbook-glm52-nvfp4-b200: a preview image (dev-glm52-nvfp4, no release), the checkpoint's "
    "exclude list and KV dtype not read, GLM-5.3's config for GLM-5.2's; shown to measure the NVFP4 GLM pattern "
    "of issue 16 (output 1.6x optimistic, P50 TPOT within 5%, before dpp24 put each prompt on one DP rank in "
    "chunks of --chunked-prefill-size / dp beside the other ranks' decodes: 0.92 of the output, the mean TPOT 1.7x "
    "the P50, near the ~100 ms mean that Little's law gives the figure, see calibration.yaml; 0.95 of the output "
    "and the P50 TPOT 1.62x since dpp25: the prefilling rank runs none of its own decodes, so a layer waits for the "
    "longer of its prefill and the other ranks' decodes, not for both; 0.98 and 1.53x since its FP4 all-gather "
    "dispatch is priced, sharding.dispatch_act_bytes; 0.70 and 2.14x, from 0.97 and 1.55x, since dsa29 runs the "
    "8192-token prompts' chunks on SGLang's sparse absorbed path, 576 / 512 wide over the top-k, 2.1x the MHA "
    "form's FLOPs, at the BF16 prefill rate, where SGLang's sm_10x default for a DSA model is an FP8 KV cache "
    "(srt/arg_groups/overrides.py:533-536) and the trtllm-gen kernel on FP8 queries (overrides.py:697-701, "
    "srt/layers/attention/dsa_backend.py:3826-3833), neither modelled; 0.70 and 2.29x with that FP8 cache's KV "
    "bytes and pool (capability.kv_cache_dtype_on, dsafp829: more requests run, so the P50 TPOT grows), 0.93 and "
    "1.73x with the sparse prefill on FP8 MMA at the B200's FP8 / BF16 peak ratio, a prior: "
    "attention_choice.dsa_fp8_sparse_speed)."
)


def apart_rows() -> list[Row]:
    """Rows shown beside the table but neither fitted nor counted (APART says why)."""
    sizes = ((12 * KIB, "12 KiB", 205.1), (96 * KIB, "96 KiB", 584.9), (384 * KIB, "384 KiB", 1169.3),
             (100 * MIB, "100 MiB", 50400.0))  # fmt: skip
    ipc = "sglang-pcie-ipc-allreduce-8x-sm120"
    out = [
        Row(ipc, f"AR 8 GPU {label} NCCL, no switches", "us", t, us(switchless_host, EIGHT, size, nccl()))
        for size, label, t in sizes
    ]
    h200, custom = lambda: box("h200-x8"), Comm("custom")
    # NVIDIA/nccl#1940: 8 B all-reduce on 8 GPUs, 3.0 us on B200 against 2.3 us on H800 / H200 (P2P small messages)
    b200_vs_h200 = lambda: us(b200_box, EIGHT, 512, custom)() / us(h200, EIGHT, 512, custom)()  # noqa: E731
    out.append(Row("nvlink-small-message-latency-b200-nccl1940", "AR 8 GPU 512 B B200 / H200", "x", 3.0 / 2.3,
                   b200_vs_h200))  # fmt: skip
    fa3 = "kernel-fa3-vllm-paged-prefill-hopper"  # the source of the paged FA3 prefill constants (APART)
    for seqlen, label, t_us in ((2048, "2k", 313.268), (4096, "4k", 1087.082), (8192, "8k", 4006.394)):
        out.append(Row(fa3, f"vLLM FA3 paged prefill b4 s{label} h32 d128", "us", t_us,
                       fa3_paged_prefill_us(4, seqlen, 32, 32, 128)))  # fmt: skip
    for entry, n, _, _, multimem in VLLM_AR_TABLES:  # vLLM's symmetric-memory path: a prior (APART)
        group = tuple(range(n))
        for (size, label), t in zip(VLLM_AR_SIZES, multimem, strict=False):
            row = vllm_path_us(h200, group, size, "symm_mem")
            out.append(Row(entry, f"vLLM AR {n} GPU NVLink {label} symm-mem multimem", "us", float(t), row))
    for entry, gpu, n, times in VLLM_SYMM_TWO_SHOT:  # the same path forced two-shot (torch's two-shot kernel)
        hw, group = (h200 if gpu == "h200" else b200_box), tuple(range(n))
        for (size, label), t in zip(VLLM_AR_SIZES, times, strict=False):
            row = vllm_path_us(hw, group, size, "symm_mem", syncs=SYMM_MEM_TWO_SHOT_SYNCS)
            out.append(Row(entry, f"vLLM AR {n} GPU NVLink {gpu} {label} symm-mem two-shot", "us", float(t), row))
    out += sm80_apart_rows()  # sm80-25
    out += fused_ar_norm_apart_rows() + arn25_apart_rows()  # arn24, arn25
    out += hop28_apart_rows()  # hop28
    out += sgmla28_apart_rows()  # sgmla28
    out += fla29_apart_rows()
    out += b200moe29_apart_rows()
    out += gdnwalk36_apart_rows()
    return out + pcie_source_apart_rows() + b200_nvfp4_apart_rows() + four_bit_apart_rows()  # fp4b23, q4c23


def pcie_source_apart_rows() -> list[Row]:
    """The WRX90 page's latency-bound all-reduce table (Group A), shown apart (APART says why)."""
    p2p_sys, eight = nccl(NCCL_P2P_LEVEL="SYS"), tuple(range(8))
    times = ((4, 23.93), (16, 18.66), (64, 18.13), (256, 25.09), (1024, 81.08), (4096, 182.49))
    return [
        Row("rtx6kpro-wrx90-cpayne-8gpu", f"AR 8 GPU 2 switches {kib} KB, P2P_LEVEL=SYS", "us", t,
            us(wrx90_cpayne, eight, kib * KIB, p2p_sys))
        for kib, t in times
    ]  # fmt: skip


APART = (
    "nvlink-small-message-latency-b200-nccl1940: the source of comm_rates.NVLINK_P2P_LATENCY_FACTOR_BY_ARCH[sm_100] "
    "itself (3.0 / 2.3), so the row equals its measurement up to the wire time by construction; shown, not counted "
    "(the independent check of the factor is op_check's B200 all-reduce group). "
    "sglang-pcie-ipc-allreduce-8x-sm120 NCCL column: not the in-engine cost. The same file's end-to-end table "
    "(pcie_ipc_ar.py:37-46) has NCCL-only TPOT 21.14 ms against 13.62 ms with the PCIe-IPC kernel at about one "
    "request (12 KiB reductions at hidden 6144): 7.5 ms over one step's 2 reductions per layer is 30-60 us per "
    "NCCL all-reduce for 60-120 layers, not 205 - 5.3 = 200 us; the column's timing likely includes "
    "host-side time (its method is not stated). The entry's notes already use only the PCIe-IPC column. "
    "kernel-fa3-vllm-paged-prefill-hopper: the source of tiles.FA3_PAGED_CTA_FIXED_US and "
    "rates.FA3_PAGED_KV_PREFILL_SPEED themselves (a line through its per-wave times), so the rows match by "
    "construction; shown, not counted (the independent check is op_check's h100_sxm / h200_sxm attn_prefill groups). "
    "vllm24111 / vllm24532 symm_mem_multimem columns: vLLM's torch symmetric-memory path at its multimem world sizes "
    "is priced as a prior (the P2P kernels' one fixed time, two-shot wire, and its copies into and out of the "
    "symmetric buffer: capability/profiles/vllm_0_34_0.py symm_mem_syncs, perf/comm_rates.py DEVICE_COPY_MIN_US), not "
    "fitted to these figures; shown to measure it: within 15% at 6 ranks, 14-36% under at 4 ranks. "
    "vllm24111 / vllm24532 / vllm42324 symm_mem_two_shot columns: the same path forced to torch's two-shot kernel, "
    "priced as the same prior with two fixed times (its entry and exit barriers, vllm_0_34_0.py "
    "SYMM_MEM_TWO_SHOT_SYNCS), not fitted to these figures; shown to measure it (H100 0.82-1.14, B200 at 2 ranks "
    "16-23% under). Counted, they would set the P2P kernels' fitted fixed time (ENGINE_AR_BASE_US) too, which the "
    "prior does not share with them: LOSO would read 9.1% and in-sample 6.2% (stop 28, symm21). "
    "rtx6kpro-wrx90-cpayne-8gpu 4 KB - 4 MB times: timed from Python through torch.distributed with NCCL's algorithm "
    "and protocol not stated, its own 4 KB time above its 16 KB one and its 64 KB row called anomalous by the page; "
    "shown, not counted (src22a). They read the model's P2P ring 1.2-1.8x slow from 16 KB to 4 MB: the Simple step "
    "time (comm_rates.NCCL_PCIE_SIMPLE_STEP_US) is fitted on an SHM ring and priced for P2P rings too." + FP4B23_APART
)

NOT_EXPRESSIBLE = [
    (
        "inferencex-sglang-r1-fp8-h200-tp8-c4",
        "the 1k/1k run: TPOT 22.7 ms at concurrency 4 on its runner, 1.8x the 12.8 ms of the c=8 run "
        "(inferencex-sglang-r1-fp8-h200-tp8-conc) on another: the machine, not the load",
    ),
    (
        "rtx6kpro-p2pmark-dense-interconnect-8gpu",
        "the prior of PCIE_IPC_EFFICIENCY (comm_rates.PCIE_ALL_PAIRS_P2P_FRACTION); as a row, all-pairs copies on "
        "the switchless host are bound in the model by the socket link (inter_socket_gbs), not the GPU links",
    ),
    (
        "pcie-rtx6kpro-nccl-allreduce-8gpu",
        "busbw 41.1 / 39.4 (8 GPUs behind 3-4 switches on ONE CPU): no preset of "
        "that topology; p2p latency: not modelled",
    ),
    ("pcie-trtllm-llama33-70b-fp4-rtx6000pro", "contrast 2x H100 SXM TP2: no H100 SXM preset"),
    ("nvl-lmsys-96xh100-prefill-ep32 / -decode-ep72", "multi-node (4 / 9 nodes, InfiniBand), H100: no preset"),
    (
        "coll-a100-pcie-8gpu-allreduce",
        "a range with no size sweep: checked as a band on the a100-pcie-x8 preset "
        "(tests/search/test_a100_pcie_preset.py)",
    ),
    ("kernel-flashmla-h800-decode", "sparse FP8-KV 410 TFLOPS: no sparse-FP8 attention rate in the model"),
    (
        "rtx6kpro-asus-nccl-p2p-level",
        "Qwen3.5-397B decode absolute tok/s: MTP draft count and prompt lengths not stated (the P2P_LEVEL "
        "ratio is counted)",
    ),
    (
        "rtx6kpro-nccl-allreduce-channels",
        "luke / Grimulkan single-CPU rows: no preset; Festr rows: same figures as "
        "pcie-rtx6kpro-nccl-allreduce-8gpu (counted there)",
    ),
    ("sglang-pcie-ipc-allreduce-8x-sm120", "tp8 8k-context end-to-end: model not named"),
    ("mtp-sglang-large-scale-ep-assumed", "an assumption, not a measurement"),
    (
        "custom-allreduce-h100-nvlink-sglang2904",
        "vLLM's kernel column (9.1-10.1 us at 512 fp32 elements): timed without CUDA graph, where vLLM first copies "
        "the input into its registered buffer (custom_all_reduce.py all_reduce, registered=False: a second launch the "
        "PR's copy-input mode saves); the model prices CUDA-graph decode. vLLM's own kernel is counted in CUDA graphs "
        "(vllm24111 / vllm24532 one- and two-stage rows)",
    ),
    ("kernel-min-time-add-rmsnorm-vllm36899", "vLLM's custom-op column (6.7-6.9 us): the op is off by default"),
    (
        "custom-allreduce-h100-tp6-vllm24111 / custom-allreduce-h100-tp4-vllm24532",
        "pynccl and pynccl-symm columns: NCCL on NVLink has no row yet (ca_1stage / ca_2stage counted; "
        "symm_mem_multimem and symm_mem_two_shot shown apart)",
    ),
    (
        "symm-mem-allreduce-vllm42324",
        "pynccl column: NCCL on NVLink has no row yet; symm_mem_multimem at 2 ranks: vLLM runs two-shot there "
        "(symm_mem_two_shot shown apart); the SM 9.0 table before the B200 ones: its GPU and world-size heading is "
        "not in the stored text",
    ),
    ("eplb-sglang-large-scale-ep-prefill", "multi-node (4 x 8 H100)"),
    (
        "kernel-torch-mm-bf16-crowd",
        "A100 40GB / RTX 3090 / 4070 / 5090 / 4090D / 48 GB 4090 / laptop / non-NVIDIA rows: no preset of the part "
        "(the A100 / A800 SXM4 80GB rows: kernel-torch-mm-bf16-sm80-crowd); fp16 and fp32 columns: the rates table "
        "prices bf16 (the fp16 figures are within 3% of the bf16 ones)",
    ),
    (
        "kernel-flashmla-h100-decode-achatbot",
        "varlen rows (2,477-2,649 GB/s): random lengths around the mean add load imbalance the model does not price; "
        "the compute-bound h_q=128 cases are not in the stored text",
    ),
    (
        "kernel-min-time-rmsnorm-rtx5090-vllm55329",
        "64- and 2048-token rows: their bytes at the part's bandwidth add to the minimum, and there is no RTX 5090 "
        "preset; FlashInfer columns: its Gemma kernels (1 + weight), not the plain ones SGLang runs",
    ),
]


# --- q4c23: 4-bit weight-only (AWQ, Marlin) decode at one request beside BF16, dense Qwen3 -------------------------
# calibration.yaml sglang-awq-bf16-qwen3-rtx-pro-6000-ws: treeru.com's single-request generation speed, SGLang
# 0.5.8 on one RTX PRO 6000. Its edition is read from its own BF16 rows: Qwen3-32B reads 64.0 GB of weights a token
# (the untied embedding is one row, not read) at 23.9 tok/s = 1.53 TB/s, 0.96 of the Server Edition's 1.6 TB/s and
# 0.85 of the Workstation Edition's 1.792 TB/s (NVIDIA datasheets), so the Workstation Edition (rtx_pro_ws_box).
AWQ_INT4 = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}  # Qwen/*-AWQ
TREERU = "sglang-awq-bf16-qwen3-rtx-pro-6000-ws"
TREERU_TOK_S = {  # (model, AWQ?) -> tok/s
    ("qwen3-8b", True): 208.0, ("qwen3-8b", False): 90.8, ("qwen3-14b", True): 136.1,
    ("qwen3-14b", False): 53.2, ("qwen3-32b", True): 70.2, ("qwen3-32b", False): 23.9,
}  # fmt: skip
TREERU_APART_TOK_S = {("qwen3-4b", True): 391.2, ("qwen3-4b", False): 208.1}


@cache
def qwen3_dense(name: str, awq: bool = False):
    """tests/fixtures/qwen3-dense/NAME (Qwen/Qwen3-*'s config.json), with the AWQ checkpoint's quantization_config."""
    config = json.loads((FIXTURES / "qwen3-dense" / name / "config.json").read_text())
    return quantized(name, AWQ_INT4 if awq else None, f"{name}{'-awq' if awq else ''}", config)


@cache
def rtx_pro_ws_box():
    """One RTX PRO 6000 Blackwell Workstation Edition: the rtx-pro-6000-x8 preset's GPU (sm_120, 188 SMs, 96 GB
    GDDR7) at the Workstation Edition's 1,792 GB/s (NVIDIA datasheet; the Server Edition's is 1,600)."""
    hw = box("rtx-pro-6000-x8", 1)
    name = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    gpus = tuple(dataclasses.replace(a, name=name, mem_bw_gbs=1792.0) for a in hw.accelerators)
    return dataclasses.replace(hw, accelerators=gpus)


def one_request(m, hw, engine: str = "sglang", isl: int = 128, osl: int = 512) -> Callable[[], float]:
    """Decode tok/s of one request alone (1 / mean TPOT) on one GPU; the page states no lengths: a short prompt."""
    return at_concurrency(m, hw, 1, engine, isl, osl, 1, "decode", kernels=Kernels(kv_cache_dtype="auto"))


def _treeru_rows(figures: dict) -> list[Row]:
    return [
        Row(TREERU, f"Qwen3-{name.split('-')[1].upper()} {'AWQ' if awq else 'BF16'} TP1 SGLang decode c=1",
            "decode tok/s", tok_s, one_request(lambda n=name, a=awq: qwen3_dense(n, a), rtx_pro_ws_box))
        for (name, awq), tok_s in figures.items()
    ]  # fmt: skip


H100_MARLIN, H200_MARLIN = "kernel-marlin-dense-w4a16-h100-humming2", "kernel-marlin-dense-w4a16-h200-tileops"


@cache
def h100_box():
    """One H100 SXM: the H200 preset's GPU with catalog.devices "h100-sxm"'s name and datasheet rates (132 SMs)."""
    return with_device(box("h200-x8", 1), "h100-sxm", "name", "mem_bw_gbs", "peak_tflops")


def marlin_dense_us(hw: Callable, m: int, n: int, k: int) -> Callable[[], float]:
    """One dense W4A16 GEMM (an AWQ checkpoint's linear, Marlin) of m x n x k alone on one GPU: the op list's
    linear_ops, costed."""

    def run() -> float:
        from autotune.perf import oplist
        from autotune.perf.opcore import context

        c = context(qwen3_dense("qwen3-8b", True), PhasePlan(gpus=(0,)), "vllm", hw(), (0,))
        return cost_ops(c, oplist.linear_ops(c, m, n, k, "marlin probe")).time_s * 1e6

    return run


def four_bit_rows() -> list[Row]:
    """q4c23's counted rows: dense AWQ (Marlin) and BF16 decode at one request, and the page's BF16 MoE (TREERU);
    the dense Marlin GEMM at one row on two Hopper parts (kernel-marlin-dense-w4a16-h100-humming2, -h200-tileops)."""
    moe = one_request(lambda: model("qwen3-30b-a3b"), rtx_pro_ws_box)
    return _treeru_rows(TREERU_TOK_S) + [
        Row(TREERU, "Qwen3-30B-A3B BF16 TP1 SGLang decode c=1", "decode tok/s", 168.9, moe),
        # humming#2: 4.98 TFLOPS at m=1, n=k=8192 -> 2 x 8192^2 / 4.98e12 s
        Row(H100_MARLIN, "Marlin W4A16 m=1 n=k=8192 H100 (humming#2)", "us", 2 * 8192**2 / 4.98e6,
            marlin_dense_us(h100_box, 1, 8192, 8192)),
        # TileOPs#2159: its 23.84 us is 9.4% slower than the fastest Marlin baseline
        Row(H200_MARLIN, "Marlin W4A16 m=1 n=k=8192 H200 (TileOPs#2159)", "us", 23.84 / 1.094,
            marlin_dense_us(lambda: box("h200-x8", 1), 1, 8192, 8192)),
    ]  # fmt: skip


def four_bit_apart_rows() -> list[Row]:
    """The same page's Qwen3-4B pair, shown apart (APART says why)."""
    return _treeru_rows(TREERU_APART_TOK_S)


APART += (
    " sglang-awq-bf16-qwen3-rtx-pro-6000-ws Qwen3-4B rows: the page contradicts itself on bandwidth there: its "
    "Qwen3-4B BF16 figure (208.1 tok/s) reads the 8.04 GB of weights a token (tied embedding: read once, as the "
    "head) at 1.67 TB/s, 0.94 of the datasheet's 1.792 TB/s with no time left for any per-layer cost, where its 8B, "
    "14B and 32B BF16 rows read 1.37-1.53 TB/s (0.77-0.85); shown, not counted (q4c23)."
)
NOT_EXPRESSIBLE += [
    (
        "sglang-awq-bf16-qwen3-rtx-pro-6000-ws",
        "Gemma-3-12B-AWQ, Phi-4-AWQ, EXAONE-3.5, GLM-4-9B and DeepSeek-R1-Distill-Qwen-32B rows: no config of "
        "those families in the catalog (the Qwen3 rows are counted)",
    ),
    (
        "vllm-moe-wna16-marlin-deepseek-awq-a800",
        "DeepSeek-R1-AWQ column and the without-this-PR columns: the V3 rows with the PR are shown apart (APART; "
        "sm80-25)",
    ),
]


# --- sm80-25: Ampere (sm_80) rows on A100 / A800 boxes built here ---------------------------------------------------
# kernel-torch-mm-bf16-sm80-crowd: the crowd table's A100 / A800 SXM4 80GB bf16 rows (TFLOPS, best square size)
TORCH_MM_BF16_SM80_TFLOPS = {"a100-sxm-80gb": 264.53, "a800-sxm-80gb": 266.48}
SM80_DEVICE_FIELDS = ("name", "memory_gib", "mem_bw_gbs", "peak_tflops", "arch", "features", "nvlink_gbs", "pcie_gen")


# pf26: the public per-launch host costs EAGER_HOST_US_PER_LAUNCH is read against (its comment in efficiency.py)
NOT_EXPRESSIBLE += [
    (
        "eager-launch-host-vllm-omni6516",
        "SenseNova-U1.5-8B-MoT's think decode and diffusion steps: no config of the model in the catalog; a per-launch "
        "range (15-45 us: idle and wall over the launches), not a step the model prices",
    ),
    ("eager-launch-host-vllm-omni7881", "a BigVGAN-style codec VAE, not an LLM of the catalog; a per-launch range"),
    ("eager-launch-host-freetoken338", "a chain of torch ops, not an engine's step: the bare launch's host cost"),
    ("eager-launch-host-imp1367", "a C++ GGUF engine offloading experts to the host: the driver call's CPU time"),
]
# cite28: the public figures of the per-layer graph-replay terms (efficiency.DECODE_LAUNCH_US_PER_LAYER,
# PIECEWISE_EXTRA_US_PER_LAYER)
NOT_EXPRESSIBLE += [
    (
        "piecewise-graph-itl-vllm20059",
        "Qwen2.5-1.5B: no config of the model in the catalog, and no plan knob for a piecewise-graphed decode (the "
        "figure is the difference of two graph modes)",
    ),
    ("graph-replay-gap-localai-nsys", "llama.cpp's decode graph on an unstated GPU: no such engine in the model"),
]


@cache
def sm80_box(device: str = "a100-sxm-80gb", gpus: int = 0):
    """An HGX A100 / A800: the a100-sxm-x8 preset's box with catalog.devices `device`'s datasheet on its GPUs (the
    A800's NVLink3 at 200 GB/s a direction), `gpus` of them (0: all)."""
    return with_device(box("a100-sxm-x8", gpus), device, *SM80_DEVICE_FIELDS)


def sm80_rows() -> list[Row]:
    """sm80-25's counted rows: vllm#20469's eager decode on one A100 (efficiency.EAGER_HOST_US_PER_LAUNCH)."""
    eager = "vllm-awq-qwen3-14b-a100-eager"
    return [Row(eager, "Qwen3-14B-AWQ TP1 c=1 16k decode, --enforce-eager (1x A100)", "TPOT ms", 20.63,
                a100_eager_decode_ms)]  # fmt: skip


def torch_mm_sm80_rows() -> list[Row]:
    """The large-GEMM rate of sm_80 (rates.LARGE_GEMM_FRACTION[sm_80]) on the A100 / A800, shown apart (APART)."""
    mm = "kernel-torch-mm-bf16-sm80-crowd"
    out = []
    for device, tflops in TORCH_MM_BF16_SM80_TFLOPS.items():
        rate = lambda d=device: table_tflops(sm80_box(d, 1), "gemm", "m>1024")  # noqa: E731
        out.append(Row(mm, f"{device.removesuffix('-80gb')} torch.mm bf16 square, best of 1k-10k", "TFLOPS", tflops,
                       rate))  # fmt: skip
    return out


def a100_eager_decode_ms() -> float:
    """vllm-awq-qwen3-14b-a100-eager: vLLM's decode step of Qwen3-14B-AWQ alone on one A100 (the form factor is not
    stated: the SXM4 80GB datasheet; the step is host-bound, the GPU's speed does not enter it) at the 16,000-token
    prompt plus half the 200 outputs, priced with no CUDA graph (--enforce-eager: step_fn's caps (0, 0)), ms."""
    phase = PhasePlan(gpus=(0,), tp=1)
    step = step_fn(qwen3_dense("qwen3-14b", True), phase, "vllm", sm80_box("a100-sxm-80gb", 1), phase.gpus, "decode",
                   caps=(0.0, 0.0))  # fmt: skip
    return step(opcore.StepInput(decode_seqs=1.0, decode_ctx=16100.0)).step_ms


# vllm-moe-wna16-marlin-deepseek-awq-a800: DeepSeek-V3-AWQ output tok/s on 8x A800 by batch (the PR's second column)
A800_AWQ_TOK_S = {1: 50.2, 8: 190.2, 64: 503.5}


def sm80_apart_rows() -> list[Row]:
    """sm80-25's rows shown apart (APART says why): the torch.mm A100 / A800 rows; vllm#14138's DeepSeek-V3-AWQ rows
    on an HGX A800 box (form factor not stated: the 8-GPU SXM part), TP8, a closed loop of `batch` requests (prompt
    lengths not stated: 128 in / 512 out)."""
    dsv3_awq = lambda: quantized("deepseek-v3", AWQ_INT4, "deepseek-v3-awq")  # noqa: E731  all linears INT4
    hw = lambda: sm80_box("a800-sxm-80gb")  # noqa: E731
    return torch_mm_sm80_rows() + [
        Row("vllm-moe-wna16-marlin-deepseek-awq-a800", f"DeepSeek-V3-AWQ TP8 8xA800 vLLM 2025-03 bs={c}",
            "decode tok/s", tok_s, at_concurrency(dsv3_awq, hw, 8, "vllm", 128, 512, c, "decode", tp=8))
        for c, tok_s in A800_AWQ_TOK_S.items()
    ]  # fmt: skip


APART += (
    " kernel-torch-mm-bf16-sm80-crowd: the source of rates.LARGE_GEMM_FRACTION[sm_80] itself (0.85 of 312 against "
    "264.5 / 266.5 TFLOPS), a constant the fit does not refit, so the rows match by construction in LOSO too; shown, "
    "not counted (the independent check is op_check's a100_sxm gemm group)."
    " vllm-moe-wna16-marlin-deepseek-awq-a800: the engine's MoE kernel is not the one vLLM 0.34 runs. The rows ran "
    "quantization=moe_wna16 on vLLM of 2025-03-03 (vllm#14138 on #13321): the experts on the moe_wna16 CUDA / Triton "
    "kernels, before the Marlin MoE kernel (vllm#14447, 2025-03-07) that awq_marlin runs since. The gap grows "
    "with the batch (the step from 19.9 ms at bs 1 to 127 ms at bs 64, 1.4 ms per added sequence from bs 16 to 64, "
    "where the 4-bit weights of all experts stream in ~22 ms), so it is kernel time, not the host time of that "
    "engine (a graph replay's host cost does not grow so with the batch); vllm#13321's own table on 8x A100 moves "
    "the same model's generation speed 1.4-2.3x by that MoE kernel alone (Triton 34.1 -> CUDA 48.1 tok/s at bs 1). "
    "Shown to measure issue 16's AWQ pattern (sm80-25)."
)


# --- errors and leave-one-out ----------------------------------------------------------------------------------


def log_err(pred: float, measured: float) -> float:
    return abs(math.log(pred / measured)) if pred > 0 and math.isfinite(pred) else math.inf


def rel_err(pred: float, measured: float) -> float:
    return abs(pred / measured - 1) if pred > 0 and math.isfinite(pred) else math.inf


def evaluate(all_rows: list[Row], values: dict[str, float] | None = None) -> list[float]:
    with overrides(values or {}):
        return [row.predict() for row in all_rows]


def fitted_constants() -> list[tuple[str, str, tuple[float, ...], float, float]]:
    """(name, path, grid, prior, shipped) of each FITTED constant the model currently holds."""
    found = []
    for name, paths, grid, prior in FITTED:
        path = resolve(paths)
        if path is None:
            print(f"note: fitted constant {paths} not found in {', '.join(PERF_MODULES)}: left out", file=sys.stderr)
            continue
        shipped = read_constant(path)
        found.append((name, path, tuple(sorted({*grid, float(shipped)})), prior, float(shipped)))
    return found


# A row takes part in fitting a constant only where that constant is among those that set the row: its elasticity
# |d ln(predicted) / d ln(constant)| at the shipped value is at least DOMINANT_SHARE of the largest elasticity any
# fitted constant has on that row (and at least MIN_ELASTICITY). Each constant is fitted alone (1-D, the others at
# their shipped values), so a row another term sets would make it absorb that term's misfit: a 1 KB all-reduce
# (all latency) set the PCIe-IPC bandwidth efficiency, a 4 MiB one (mostly wire) the kernel latency.
DOMINANT_SHARE = 0.3
MIN_ELASTICITY = 0.02


def elasticity(preds: dict[float, list[float]], shipped: float, i: int) -> float:
    """|d ln(prediction of row i) / d ln(constant)| between the shipped value's grid neighbours (0 where the
    constant does not move the row; a difference in the constant, not its log, where a neighbour is 0)."""
    grid = sorted(preds)
    k = grid.index(shipped)
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    p_lo, p_hi = preds[lo][i], preds[hi][i]
    if lo == hi or not all(x > 0 and math.isfinite(x) for x in (p_lo, p_hi)) or _same(p_lo, p_hi):
        return 0.0
    if lo <= 0:
        return abs(math.log(p_hi / p_lo)) * shipped / (hi - lo) if shipped > 0 else abs(math.log(p_hi / p_lo))
    return abs(math.log(p_hi / p_lo) / math.log(hi / lo))


def rows_set_by(tables: dict[str, dict[float, list[float]]], shipped: dict[str, float]) -> dict[str, list[int]]:
    """Per constant, the indices of the rows it sets (see DOMINANT_SHARE)."""
    n = len(next(iter(next(iter(tables.values())).values())))
    el = {name: [elasticity(preds, shipped[name], i) for i in range(n)] for name, preds in tables.items()}
    top = [max((e[i] for e in el.values()), default=0.0) for i in range(n)]
    return {
        name: [i for i in range(n) if e[i] >= max(MIN_ELASTICITY, DOMINANT_SHARE * top[i])] for name, e in el.items()
    }


def fit_error(preds: list[float], measured: list[float], moved: list[int]) -> float:
    """The objective a constant is fitted by: the mean |log(predicted/measured)| of the rows it sets (an L1 fit).

    Not their median: a constant sets rows it moves by very different amounts (ATTENTION_DECODE_FRACTION moves a
    FlashMLA decode kernel row ~1:1 and an R1 serving row by 2-5%), and the median error is the error of one middle
    row, often one the constant barely moves and another term sets. Its argmin then follows that row's small slope:
    with the six Llama-3.3 rows held out, the other 22 rows' median |log error| lay within 0.150-0.173 from 0.3 to
    1.0 and its minimum at 0.4 (shipped 0.85). Under the sum, a row weighs in by how much the constant moves it, and
    the rows it does not move add a constant. Measured on the 170 rows of stop 30 (main 7c1a50d):
    LOSO 9.4% -> 7.7%, and LOSO's own procedure in-sample 5.8% -> 5.5%."""
    return sum(log_err(preds[i], measured[i]) for i in moved) / len(moved)


def leave_one_out(all_rows: list[Row], base: list[float]) -> tuple[list[float], dict[str, float]]:
    constants = fitted_constants()
    measured = [row.measured for row in all_rows]
    table = {}  # name -> {value: predictions}
    for name, path, grid, _, _ in constants:
        table[name] = {v: evaluate(all_rows, {path: v}) for v in grid}

    sets = rows_set_by(table, {name: shipped for name, _, _, _, shipped in constants})

    def fit(name: str, shipped: float, prior: float, exclude: frozenset[int]) -> float:
        preds = table[name]
        moved = [i for i in sets[name] if i not in exclude]
        if not moved:
            return prior
        # ties go to the value nearest the shipped one in-sample, but nearest the prior when rows are held out: the
        # shipped value was fitted with them, and a tie broken towards it would hand their answer back
        anchor = prior if exclude else shipped
        return min(
            preds,
            key=lambda v: (fit_error(preds[v], measured, moved), abs(v - anchor)),
        )

    def fit_all(exclude: frozenset[int]) -> dict[str, float]:
        """Every constant fitted without the rows in `exclude`; a prior naming another constant's path takes that
        constant's value from the same fit (FITTED lists it first)."""
        values: dict[str, float] = {}
        for name, path, _, prior, shipped in constants:
            if isinstance(prior, str):
                prior = values.get(prior, read_constant(prior))
            values[path] = fit(name, shipped, prior, exclude)
        return values

    in_sample = fit_all(frozenset())
    loo, by_source = [], {}
    for i, row in enumerate(all_rows):
        by_source.setdefault(row.entry, set()).add(i)
    for row in all_rows:  # leave one SOURCE out: no row of the checked row's entry fits any constant
        held_out = frozenset(by_source[row.entry])
        values = fit_all(held_out)
        with overrides(values):
            loo.append(row.predict())
    return loo, in_sample


def _same(a: float, b: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)


# --- output -----------------------------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown rows")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    all_rows, apart = rows(), apart_rows()
    base = evaluate(all_rows)
    loo, in_sample = leave_one_out(all_rows, base)
    errors = [rel_err(p, r.measured) for p, r in zip(base, all_rows, strict=True)]
    loo_errors = [rel_err(p, r.measured) for p, r in zip(loo, all_rows, strict=True)]
    header = ("entry", "row", "unit", "measured", "predicted", "pred/meas", "LOSO pred", "LOSO pred/meas")
    cells = [
        (
            r.entry,
            r.label,
            r.unit,
            _fmt(r.measured),
            _fmt(p),
            f"{p / r.measured:.2f}",
            _fmt(lp),
            f"{lp / r.measured:.2f}",
        )
        for r, p, lp in zip(all_rows, base, loo, strict=True)
    ]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for c in cells:
            print("| " + " | ".join(c) + " |")
    else:
        widths = [max(len(str(c[k])) for c in [header, *cells]) for k in range(len(header))]
        for c in [header, *cells]:
            print(
                "  ".join(
                    str(v).ljust(w) if k < 3 else str(v).rjust(w)
                    for k, (v, w) in enumerate(zip(c, widths, strict=True))
                )
            )
    md = "\n" if args.markdown else ""
    print(
        f"{md}rows: {len(all_rows)} "
        f"({sum(r.kind == 'serving' for r in all_rows)} end-to-end serving)\n"
        f"leave-one-source-out median |error|: {statistics.median(loo_errors):.1%} "
        f"({sum(p > r.measured for p, r in zip(loo, all_rows, strict=True))} of {len(all_rows)} over-predicted)\n"
        f"in-sample median |predicted/measured - 1|: {statistics.median(errors):.1%}; "
        f"LOSO / in-sample {statistics.median(loo_errors) / max(statistics.median(errors), 1e-9):.2f}x"
    )
    # the same procedure as LOSO with no row held out (every constant refitted on all rows): what LOSO's own fit
    # reaches in-sample, beside the shipped constants' figure above (which the ratio above is quoted against)
    refit = [rel_err(p, r.measured) for p, r in zip(evaluate(all_rows, in_sample), all_rows, strict=True)]
    refit_median = statistics.median(refit)
    print(
        f"in-sample with every constant refitted on all rows (LOSO's procedure, nothing held out): "
        f"{refit_median:.1%}; LOSO / that {statistics.median(loo_errors) / max(refit_median, 1e-9):.2f}x"
    )
    print(f"{md}by row class: rows, LOSO median, in-sample median")
    for kind in ("serving", "collective", "kernel", "speculative", "load balance"):
        idx = [i for i, r in enumerate(all_rows) if r.kind == kind]
        if idx:
            loo_k, in_k = (statistics.median(e[i] for i in idx) for e in (loo_errors, errors))
            print(f"  {kind:13} {len(idx):3}  {loo_k:6.1%}  {in_k:6.1%}")
    print(f"{md}apart (shown, not fitted or counted): {APART}")
    for r, p in zip(apart, evaluate(apart), strict=True):
        print(
            f"  {r.entry}  {r.label}: measured {_fmt(r.measured)} {r.unit}, predicted {_fmt(p)} ({p / r.measured:.2f})"
        )
    print(f"{md}fitted constants: shipped -> refitted on all rows (1-D grid, mean |log error|)")
    for name, path, _, _, shipped in fitted_constants():
        print(f"  {name:15} {path:40} {shipped:g} -> {in_sample[path]:g}")
    print(f"{md}not expressible:")
    for entry, why in NOT_EXPRESSIBLE:
        print(f"  {entry}: {why}")
    print(f"{md}({time.perf_counter() - start:.1f} s)")


# arn24: the fused all-reduce + RMSNorm the engines run by default (capability.allreduce_rmsnorm_on)
FUSED_AR_NORM = "fused-allreduce-rmsnorm-h100-tp2-vllm22086"
FUSED_AR_NORM_US = ((32, 10.0, 10.0), (64, 12.0, 16.0), (128, 17.0, 30.0))  # tokens, unfused, FlashInfer one-shot
APART += (
    f" {FUSED_AR_NORM}: a closed PR's benchmark of August 2025 FlashInfer (vLLM 0.34 takes the fusion at every size "
    "of these rows on sm_90 at 2 ranks, FI_ALLREDUCE_FUSION_MAX_SIZE_MB 64 MiB, tuned later on figures not in the "
    "stored text); shown to measure how the model prices the fused kernel. The unfused rows read the model's "
    "all-reduce + fused-add norm; the fused rows the model's price of the kernel the row ran, FlashInfer's trtllm "
    "one-shot with the norm in its epilogue (perf/comm_fused.py, arn25; arn24 priced the all-reduce alone): "
    "0.87-0.48 of the measured one-shot kernel, which takes about the unfused time at 32 tokens and above it at 64 "
    "and 128 (about 10 us more per 0.5 MiB at 2 ranks, ~52 GB/s, on that FlashInfer)."
)


def fused_ar_norm_apart_rows() -> list[Row]:
    """vllm#22086's benchmark_fused_collective.py rows (H100 TP2, hidden 8192, bf16, with residual): one all-reduce
    and one residual add + RMSNorm, unfused, against FlashInfer's fused one-shot kernel; shown apart (APART)."""
    llama = lambda: model("llama-3.1-70b")  # noqa: E731  hidden 8192
    h100x2 = lambda: with_device(box("h200-x8", 2), "h100-sxm", "name", "mem_bw_gbs", "peak_tflops")  # noqa: E731

    def part_us(tokens: int, fused: bool) -> Callable[[], float]:
        def run() -> float:
            m, hw = llama(), h100x2()
            phase = PhasePlan(gpus=(0, 1), tp=2, fusion={"allreduce_rmsnorm": False})
            c = opcore.context(m, phase, "vllm", hw, phase.gpus)
            ffn = m.layers[0].ffn
            ar = oplist.ffn_comm_ops(c, ffn, tokens)[0]  # the layer's first of two
            if fused:  # the kernel the row ran: FlashInfer's trtllm one-shot, the norm in its epilogue (arn25)
                one_shot = AllReducePath("fused_trtllm", float("inf"), float("inf"))
                return comm_fused.fused_path_s(hw, phase.gpus, one_shot, ar.nbytes) * 1e6
            norms = cost_ops(c, oplist.ffn_norm_ops(c, ffn, tokens))  # the layer's two norms, one per all-reduce
            # vLLM's custom kernel: its standalone FlashInfer all-reduce was opt-in then (tests/bench/op_check.py
            # table_dispatch_s)
            custom = next(p for p in profile("vllm").allreduce_paths("sm_90", 2, "nvlink") if p.name == "custom")
            return (comm.path_s(hw, phase.gpus, custom, ar.nbytes) + (norms.compute_s + norms.memory_s) / 2) * 1e6

        return run

    out = []
    for tokens, unfused, fused in FUSED_AR_NORM_US:
        out.append(Row(FUSED_AR_NORM, f"AR + add-RMSNorm 2x H100 h8192 {tokens} tok, unfused", "us", unfused,
                       part_us(tokens, False)))  # fmt: skip
        out.append(Row(FUSED_AR_NORM, f"AR + add-RMSNorm 2x H100 h8192 {tokens} tok, FlashInfer fused", "us", fused,
                       part_us(tokens, True)))  # fmt: skip
    return out


# arn25: the fused all-reduce + RMSNorm priced as FlashInfer's kernel (perf/comm_fused.py)
FUSED_TRTLLM_B200 = "fused-allreduce-rmsnorm-b200-tp8-sglang12654"
APART += (
    f" {FUSED_TRTLLM_B200}: an nsys profile of one serving step (B200 TP8, DeepSeek-R1 NVFP4, bs 1, a 2048-token "
    "prompt), FlashInfer's trtllm_allreduce_fusion of November 2025, which SGLang 0.5.23 no longer calls on the 10.x "
    "family (its auto backend is mnnvl there, srt/layers/flashinfer_comm_fusion.py:61-71); shown to measure the "
    "model's trtllm two-shot (28 MiB at 8 ranks, above FlashInfer's 2.625 MiB one-shot size): 0.58 of the measured "
    "186 us. FlashInfer's own B200 heuristic keeps one-shot up to 2.625 MiB at 8 ranks, where the link model "
    "puts the one- / two-shot crossing near 1 MiB: its two-shot pays more per exchange than the P2P fixed time "
    "(comm_rates.ENGINE_AR_BASE_US) the model charges it, a constant no public figure sets (arn25)."
)
NOT_EXPRESSIBLE += [
    (
        "fused-allreduce-rmsnorm-b300-vllm37756",
        "B300 (sm_103): no device row in the catalog (its FI_ALLREDUCE_FUSION_MAX_SIZE_MB / FLASHINFER_MAX_MIB entries "
        "are in the vLLM profile)",
    ),
]


FUSED_FLAGGEMS = "fused-allreduce-rmsnorm-h100-tp2-flaggems773"


def arn25_rows() -> list[Row]:
    """FlagGems-vllm#773's vLLM baselines (2 of 8 H100 SXM, FlashInfer 0.6.16.post3 through vLLM 0.28.0, CUDA graph,
    [M, 6144] bf16, one-shot): the fused all-reduce + RMSNorm kernel as the row names it, trtllm or mnnvl."""
    from autotune.capability.flashinfer_comm import mnnvl_fused_path

    h100x2 = lambda: with_device(box("h200-x8", 2), "h100-sxm", "name", "mem_bw_gbs", "peak_tflops")  # noqa: E731
    trtllm_one_shot = AllReducePath("fused_trtllm", float("inf"), float("inf"))

    def fused_us(path_fn: Callable[[], AllReducePath], tokens: int) -> Callable[[], float]:
        return lambda: comm_fused.fused_path_s(h100x2(), (0, 1), path_fn(), tokens * 6144 * 2) * 1e6

    out = []
    for backend, path_fn, tokens, t_us in (
        ("trtllm", lambda: trtllm_one_shot, 6, 6.9826),
        ("trtllm", lambda: trtllm_one_shot, 138, 12.9792),
        ("mnnvl", lambda: mnnvl_fused_path(2), 6, 6.0703),
    ):
        label = f"fused AR + add-RMSNorm 2x H100 h6144 {tokens} tok, {backend} one-shot"
        out.append(Row(FUSED_FLAGGEMS, label, "us", t_us, fused_us(path_fn, tokens)))
    return out


def arn25_apart_rows() -> list[Row]:
    """sglang#12654's profile: the trtllm fused kernel on 8 B200s at 2048 tokens x 7168 x bf16 (28 MiB a rank),
    priced as the kernel it was (FlashInfer's trtllm path, its one-shot size rule); shown apart (APART)."""
    from autotune.capability.flashinfer_comm import trtllm_fused_path

    nbytes = 2048 * 7168 * 2
    row = lambda: comm_fused.fused_path_s(b200_box(), EIGHT, trtllm_fused_path(8), nbytes) * 1e6  # noqa: E731
    return [Row(FUSED_TRTLLM_B200, "fused AR + add-RMSNorm 8x B200 28 MiB (trtllm two-shot)", "us", 186.0, row)]


# hop28: DeepSeek's own H800 decode profile, per kernel (calibration.yaml trace-deepseek-h800-decode-kernels)
DS_TRACE = "trace-deepseek-h800-decode-kernels"
APART += (
    f" {DS_TRACE}: per-kernel times of DeepSeek's H800 decode trace as a third-party page transcribes them, with no "
    "statement of whether the README's 128 requests a GPU are per micro-batch; shown at the 128 reading (4,096 cached "
    "tokens, 128 heads a GPU, 2 experts x 512 balanced rows at EP128) to measure the model's kernel prices against "
    "them, not counted. kernel-deepgemm-h800-grouped dense rows: the source of tiles.GEMM_WAVE_FIXED_US; shown to "
    "measure the model's FP8 linears of DeepSeek-V3's shapes against DeepGEMM on the same H800, not counted."
)


# calibration.yaml kernel-deepgemm-h800-grouped, metrics dense_m4096 / dense_m128: (n, k) -> TFLOPS
DEEPGEMM_DENSE_M4096 = {(2112, 7168): 1058, (24576, 1536): 990, (32768, 512): 590, (7168, 16384): 1358,
                        (4096, 7168): 1304, (7168, 2048): 1025}  # fmt: skip
DEEPGEMM_DENSE_M128 = {(2112, 7168): 352, (24576, 1536): 535, (32768, 512): 358, (7168, 16384): 645,
                       (4096, 7168): 533, (7168, 2048): 510}  # fmt: skip


def hop28_apart_rows() -> list[Row]:
    """The model's price of the kernels of DeepSeek's H800 decode trace (DS_TRACE) at the 128-requests reading: one
    micro-batch of 128 decodes at 4,096 tokens on a GPU of the H100 SXM datasheet (H800 compute), DP attention (128
    heads a GPU, BF16 latent KV), SGLang's DeepEP MoE kernel speed; the grouped GEMMs as 2 experts x 512 rows each."""
    seqs, ctx, rows = 128, 4096.0, 512.0

    def context():
        m = model("deepseek-v3")
        phase = PhasePlan(gpus=EIGHT, comm=Comm(all2all="deepep"), **dep(8))
        hw = with_device(box("h200-x8"), "h100-sxm", "name", "mem_bw_gbs", "peak_tflops")
        return m, opcore.context(m, phase, "sglang", hw, EIGHT)

    def attention_us() -> float:
        m, c = context()
        ops = oplist.attention_ops(c, m.layers[-1].attention, opcore.StepInput(decode_seqs=seqs * 8, decode_ctx=ctx))
        return cost_ops(c, [op for op in ops if op.kind == "attention" and op.bucket == "decode"]).time_s * 1e6

    def grouped_us(n: int, k: int) -> Callable[[], float]:
        def run() -> float:
            _, c = context()
            flops, nbytes = 2 * 2 * rows * n * k, 2 * n * k * c.expert_bytes + 2 * rows * (k + 2 * n)
            op = opcore.Op("grouped_moe", c.expert_dtype, rates.m_bucket(rows), rows, n, k, flops, nbytes, 1.0, "",
                           c.moe_speed)  # fmt: skip
            return cost_ops(c, [op]).time_s * 1e6

        return run

    def dense_us(m_rows: int, n: int, k: int) -> Callable[[], float]:
        def run() -> float:
            m, c = context()
            ops = [op for op in oplist.linear_ops(c, m_rows, n, k, "") if op.kind == "gemm"]
            return cost_ops(c, ops).time_s * 1e6

        return run

    # kernel-deepgemm-h800-grouped's dense table (TFLOPS, DeepSeek-V3 shapes), as times: the same H800 and kernel
    # family as DS_TRACE's linears; the source of tiles.GEMM_WAVE_FIXED_US, so shown beside it, not counted
    dense = [
        Row(
            "kernel-deepgemm-h800-grouped",
            f"H800 DeepGEMM dense FP8 m{m_rows} n{n} k{k}",
            "us",
            2.0 * m_rows * n * k / (tflops * 1e6),
            dense_us(m_rows, n, k),
        )
        for m_rows, table in ((4096, DEEPGEMM_DENSE_M4096), (128, DEEPGEMM_DENSE_M128))
        for (n, k), tflops in table.items()
    ]
    return dense + [
        Row(DS_TRACE, "H800 FlashMLA decode 128 seqs x 4k, 128 heads", "us", 255.0, attention_us),
        Row(DS_TRACE, "H800 DeepGEMM masked up_gate 2 x 512 rows N4096 K7168", "us", 81.0, grouped_us(4096, 7168)),
        Row(DS_TRACE, "H800 DeepGEMM masked down 2 x 512 rows N7168 K2048", "us", 39.0, grouped_us(7168, 2048)),
    ]


# kernel-vllm-fused-moe-default-a100-e64 (vllm-project/vllm#40542): the default config's kernel time by M tokens, us
VLLM40542_DEFAULT_US = {1: 183.5, 4: 266.2, 16: 542.6, 64: 698.1, 256: 769.5, 1024: 1022.5, 4096: 2919.0}


def fused_moe_a100_us(tokens: int) -> Callable[[], float]:
    """vLLM's Triton fused MoE (top-k, alignment, both grouped GEMMs, activation, sum) of 64 experts of 2048 x 1408,
    top 6, bf16, on one A100 SXM4 80GB at `tokens` tokens: the op list's routed-expert ops without the router GEMM
    (vLLM's benchmark_moe passes the gating output in) and without the layer's norm and collectives, us."""

    def run() -> float:
        from autotune.specs import FfnSpec

        phase = PhasePlan(gpus=(0,), tp=1, kernels=Kernels(moe="triton"))
        c = opcore.context(model("qwen3-30b-a3b"), phase, "vllm", sm80_box("a100-sxm-80gb", 1), phase.gpus)
        ops = oplist.ffn_ops(c, FfnSpec("moe", 0, 64, 6, 3 * 2048 * 1408), float(tokens))
        return cost_ops(c, [op for op in ops if op.kind not in ("gemm", "norm", "collective")]).time_s * 1e6

    return run


def op28_rows() -> list[Row]:
    """op28: vLLM's post-#34846 default fused-MoE config on an A100 (qwen3-30b-a3b's hidden size, 2048, with the
    entry's 64 experts of 1408 columns, top 6)."""
    moe = "kernel-vllm-fused-moe-default-a100-e64"
    return [
        Row(moe, f"A100 vLLM Triton fused MoE default config, E=64 N=1408 K=2048 top-6 bf16, M={m}", "us", us,
            fused_moe_a100_us(m))
        for m, us in VLLM40542_DEFAULT_US.items()
    ]  # fmt: skip


# sgmla28: FlashInfer's sm_90 MLA decode on an H200 (calibration.yaml kernel-flashinfer-mla-sm90-h200), us per call:
# (sequences, query tokens a sequence, keys) -> the stock fused kernel's time
FI_MLA_H200_US = {(2, 1, 1024): 14.87, (64, 1, 32768): 1166.49, (64, 4, 32768): 4113.65, (2, 1, 1048576): 1095.39}


def fi_mla_h200_us(seqs: int, width: int, keys: int) -> Callable[[], float]:
    """The op list's decode attention ops (the kernel and its fixed-time term) of DeepSeek-V3 at TP1 on the H200
    preset, BF16 latent KV, SGLang with kernels.attention flashinfer: `seqs` sequences of `width` query tokens over
    `keys` cached keys."""

    def run() -> float:
        m = dataclasses.replace(model("deepseek-v3"), dense_dtype="bf16")
        kernels = Kernels(attention="flashinfer", kv_cache_dtype="auto")
        c = opcore.context(m, PhasePlan(gpus=(0,), kernels=kernels), "sglang", box("h200-x8"), (0,))
        x = opcore.StepInput(decode_seqs=seqs, decode_ctx=float(keys), decode_width=width)
        ops = [op for op in oplist.attention_ops(c, m.layers[-1].attention, x) if op.kind == "attention"]
        return cost_ops(c, ops).time_s * 1e6

    return run


def sgmla28_rows() -> list[Row]:
    """sgmla28: the long rows of kernel-flashinfer-mla-sm90-h200 (the short one is the fixed time's source: APART)."""
    return [
        Row("kernel-flashinfer-mla-sm90-h200", f"H200 FlashInfer MLA decode 128 heads B={b} Sq={w} Sk={k}", "us", us,
            fi_mla_h200_us(b, w, k))
        for (b, w, k), us in FI_MLA_H200_US.items() if k > 1024
    ]  # fmt: skip


def sgmla28_apart_rows() -> list[Row]:
    """sgmla28: the short row of kernel-flashinfer-mla-sm90-h200, the source of tiles.MLA_DECODE_FIXED_US (APART)."""
    return [
        Row("kernel-flashinfer-mla-sm90-h200", f"H200 FlashInfer MLA decode 128 heads B={b} Sq={w} Sk={k}", "us", us,
            fi_mla_h200_us(b, w, k))
        for (b, w, k), us in FI_MLA_H200_US.items() if k <= 1024
    ]  # fmt: skip


APART += (
    " kernel-flashinfer-mla-sm90-h200 B=2 Sk=1024: the source of tiles.MLA_DECODE_FIXED_US[flashinfer, sm_90] itself"
    " (14.87 us less the ~1 us of work the op list prices there), so the row matches by construction; shown, not"
    " counted (its long rows are counted, sgmla28)."
)

# hst28: component timings of the engines' per-step host loops (calibration.yaml, the hst28 block)
NOT_EXPRESSIBLE += [
    (
        "sched-host-vllm46112-update-from-output",
        "one per-step loop of vLLM's engine core (1.1 us a request), not the step's host time the profile prices",
    ),
    ("sched-host-vllm42131-decode-fast-path", "a component split of vLLM's per-step host work, batch not stated"),
    (
        "sched-host-trtllm10273-host-step-time",
        "TensorRT-LLM's executor loop wall time (GPU waits included), not its host time; no TRT-LLM profile",
    ),
    (
        "sched-host-trtllm13957-exposed-host",
        "TensorRT-LLM's exposed host time at batch 64 against vLLM with other kernels: no TRT-LLM profile",
    ),
]


# fla29: Gated DeltaNet prefill kernels on a GB200 (calibration.yaml kernel-flashinfer-gdn-prefill-gb200), read on the
# B200 datasheet box: the FLA Triton chain as SGLang runs it there (fp32 state: gdn_backend.py:191-236 keeps Triton)
# and FlashInfer's kernel as vLLM runs it (perf/linear_attention.py prefill_path). The op list's scan op alone: the
# source times the chunk_gated_delta_rule call, not the convolution, preparation or norm around it.
GDN_GB200 = "kernel-flashinfer-gdn-prefill-gb200"
# (model, tp, prompts as the source writes them, tokens) -> (FlashInfer ms, FLA / Triton ms): flashinfer#3902's "FI
# Post-MR" and "FLA/Triton" columns
GDN_GB200_MS = {
    ("qwen3.5-35b-a3b", 1, "8192x8", 65536): (0.631, 3.272),
    ("qwen3.5-35b-a3b", 1, "8192x16", 131072): (1.250, 6.540),
    ("qwen3.5-35b-a3b", 1, "8192x32", 262144): (2.204, 12.915),
    ("qwen3.5-35b-a3b", 1, "2048x4", 8192): (0.097, 0.465),
    ("qwen3.5-35b-a3b", 1, "1024x8", 8192): (0.111, 0.459),
    ("qwen3.5-35b-a3b", 1, "2048+6144", 8192): (0.231, 0.459),
    ("qwen3.5-35b-a3b", 1, "1024+7168", 8192): (0.265, 0.460),
    ("qwen3.5-397b-a17b", 8, "1x8192", 8192): (0.281, 0.250),
    ("qwen3.5-397b-a17b", 8, "1x65536", 65536): (2.177, 1.862),
    ("qwen3.5-397b-a17b", 8, "8192x8", 65536): (0.294, 0.866),
    ("qwen3.5-397b-a17b", 8, "8192x16", 131072): (0.306, 1.710),
}


def gdn_scan_ms(
    name: str, tp: int, tokens: int, engine: str, seqs: float = 0.0, hw: Callable | None = None, chunk: int = 0
) -> Callable[[], float]:
    """The op list's GDN scan op alone for `tokens` prompt tokens of `seqs` prompts (StepInput.prefill_seqs) on
    `hw` (default the B200 datasheet box) at `chunk` chunked-prefill tokens (0: the plan's default; the engine's path
    pick reads it)."""

    def run() -> float:
        m = model(name)
        group = tuple(range(tp))
        plan = PhasePlan(gpus=group, tp=tp, batching=Batching(chunked_prefill_tokens=chunk)) if chunk else None
        plan = plan or PhasePlan(gpus=group, tp=tp)
        c = opcore.context(m, plan, engine, (hw or b200_compute_box)(), group)
        att = next(layer.attention for layer in m.layers if layer.attention.kind == "gdn")
        ops = oplist.attention_ops(c, att, opcore.StepInput(prefill_tokens=tokens, prefill_seqs=seqs))
        return cost_ops(c, [op for op in ops if op.source == "linear attention (gdn)"]).time_s * 1e3

    return run


def fla29_apart_rows() -> list[Row]:
    """fla29: kernel-flashinfer-gdn-prefill-gb200, the FLA chain (SGLang's Triton path) and FlashInfer's kernel
    (vLLM's) at each shape of the table (APART says why none is counted)."""
    out = []
    for (name, tp, prompts, tokens), (fi_ms, fla_ms) in GDN_GB200_MS.items():
        shape, seqs = f"{name} TP{tp} {prompts}", _gdn_prompts(prompts)
        if not prompts.startswith("1x"):  # the one-prompt FLA rows are counted (gdnwalk36_rows)
            out.append(Row(GDN_GB200, f"GB200 GDN prefill FLA Triton {shape}", "ms", fla_ms,
                           gdn_scan_ms(name, tp, tokens, "sglang", seqs)))  # fmt: skip
        out.append(Row(GDN_GB200, f"GB200 GDN prefill FlashInfer {shape}", "ms", fi_ms,
                       gdn_scan_ms(name, tp, tokens, "vllm", seqs)))  # fmt: skip
    return out


def _gdn_prompts(prompts: str) -> float:
    """The prompt count of a GDN table's shape: "8192x8" eight (tokens x prompts), "2048+6144" two, "1x8192" one
    (the source writes its one-prompt shapes the other way round)."""
    if "+" in prompts:
        return float(prompts.count("+") + 1)
    return 1.0 if prompts.startswith("1x") else float(prompts.split("x")[1])


APART += (
    " kernel-flashinfer-gdn-prefill-gb200: the source of linear_attention.CHAIN_SPEED and FUSED_SPEED (its Qwen3.5-35B"
    " 8192x8 / x16 / x32 rows), so its other rows are the same kernels on the same GPU in the same run: no"
    " independent check, and a LOSO refit that holds the source out does not refit those speeds (counting the"
    " chain's four other 8,192-token 35B rows, 0.92-0.93, moved the shared attention prefill constants' refit: LOSO"
    " 8.0%, in-sample 5.9%). Shown, not counted. Its one-prompt FLA rows are counted (gdnwalk36_rows: the chain's"
    " chunk walk, StepInput.prefill_seqs); its FlashInfer one-prompt rows time the PR branch's non-context-parallel"
    ' kernel (~2.2 us a 64-token chunk), which vLLM\'s use_cp "auto" call does not take for a few prompts (fla29).'
)


# b200moe29: FlashInfer's TRT-LLM-gen block-FP8 MoE (DeepSeekFp8) on one B200 (calibration.yaml
# kernel-flashinfer-trtllm-fp8-block-moe-b200-fib): tokens -> (local routed rows, us per call)
FIB_TRTLLM_FP8_BLOCK_B200 = {901: (1340, 459.392), 11948: (10501, 1786.778), 14107: (16158, 2409.706)}
FIB_SOURCE_TOKENS = (11948, 14107)  # the rows efficiency.MOE_VARIANT_SPEED["trtllm_fp8_block"] is read from
APART += (
    " kernel-flashinfer-trtllm-fp8-block-moe-b200-fib 11,948 / 14,107 tokens: the source of"
    " efficiency.MOE_VARIANT_SPEED[trtllm_fp8_block] itself (0.35, the mean of what the two rows need), so they match"
    " by construction; shown, not counted (its 901-token row is counted; the independent check is op_check's b200_sxm"
    " moe_fp8_block group)."
)


def fib_trtllm_fp8_block_us(rows: int) -> Callable[[], float]:
    """vLLM's auto MoE on one B200 (block-FP8 DeepSeek-V3 experts: the TRT-LLM-gen kernel) over `rows` routed rows
    on 32 local experts, top 8 (rows / 8 tokens): the op list's routed-expert ops without the router GEMM, norms and
    collectives (the definition takes router logits in), us. The op list's input quantisation is kept (~5 us at these
    rows; the definition takes FP8 hidden states)."""

    def run() -> float:
        from autotune.specs import FfnSpec

        phase = PhasePlan(gpus=(0,), tp=1)
        c = opcore.context(model("deepseek-v3"), phase, "vllm", b200_compute_box(), phase.gpus)
        ops = oplist.ffn_ops(c, FfnSpec("moe", 0, 32, 8, 3 * 7168 * 2048), rows / 8)
        return cost_ops(c, [op for op in ops if op.kind not in ("gemm", "norm", "collective")]).time_s * 1e6

    return run


def _fib_rows(source: bool) -> list[Row]:
    entry = "kernel-flashinfer-trtllm-fp8-block-moe-b200-fib"
    return [
        Row(entry, f"B200 FlashInfer TRT-LLM block-FP8 MoE, DeepSeek-V3 experts, 32 local, {t} tokens ({r} rows)",
            "us", us, fib_trtllm_fp8_block_us(r))
        for t, (r, us) in FIB_TRTLLM_FP8_BLOCK_B200.items() if (t in FIB_SOURCE_TOKENS) == source
    ]  # fmt: skip


def b200moe29_rows() -> list[Row]:
    """b200moe29: the counted row of kernel-flashinfer-trtllm-fp8-block-moe-b200-fib (901 tokens)."""
    return _fib_rows(False)


def b200moe29_apart_rows() -> list[Row]:
    """b200moe29: the rows the trtllm_fp8_block speed is read from (APART says why)."""
    return _fib_rows(True)


# q35rtx36: the ASUS page's 4-GPU NCCL all-reduce times (calibration.yaml rtx6kpro-asus-nccl-allreduce-4gpu: GPUs 0-3 of
# the rtx-pro-6000-x8 box, NCCL defaults, SHM on the NODE pairs, fp16): the TP4 all-reduce the rtx6kpro Qwen3.5-397B
# decode rows run twice a layer, 8 KB a sequence (8 KB at c=1, 1 MB at c=128). Bytes, label, us.
ASUS_AR4_NCCL_US = (
    (256, "256 B", 18.0),
    (4 * KIB, "4 KB", 15.4),
    (16 * KIB, "16 KB", 19.7),
    (32 * KIB, "32 KB", 17.6),
    (64 * KIB, "64 KB", 19.1),
    (128 * KIB, "128 KB", 28.3),
    (256 * KIB, "256 KB", 46.5),
    (512 * KIB, "512 KB", 87.1),
    (MIB, "1 MB", 109.2),
    (2 * MIB, "2 MB", 152.1),
)  # its 32 MB time (1,790 us) is left out: the entry's nccl-tests busbw row at 32 MB checks that size


NOT_EXPRESSIBLE += [
    (
        "rtx6kpro-qwen35-decode-workload",
        "the measured steps and workload of rtx6kpro-vllm-qwen35-397b-awq-nvfp4-decode (counted there): one prompt for"
        " every stream, whose correlated routing routing.distinct_experts does not express",
    ),
]


def q35rtx36_rows() -> list[Row]:
    """The 4-GPU NCCL all-reduce table of the rtx-pro-6000-x8 box's page (GPUs 0-3, NCCL defaults)."""
    entry, four = "rtx6kpro-asus-nccl-allreduce-4gpu", (0, 1, 2, 3)
    pro = lambda: box("rtx-pro-6000-x8")  # noqa: E731
    return [
        Row(entry, f"AR 4 GPU {label}, NCCL defaults", "us", value, us(pro, four, size, nccl()))
        for size, label, value in ASUS_AR4_NCCL_US
    ]


# hopper36: InferenceX's published dsr1-fp8-h200-sglang curve of 2026-05-17 (lmsysorg/sglang:v0.5.12-cu130), as
# SemiAnalysisAI/InferenceX#3288 / #3173 tabulate it (calibration.yaml inferencex-sglang-r1-fp8-h200-tp8-v0512):
# concurrency -> (output tok/s/GPU, mean TTFT ms, mean TPOT ms). Same launch as INFERENCEX_R1_H200_LAYOUT with 256
# running requests (the script's non-1k/1k branch; #3010's v0.5.19 run of the same script resolves
# max_running_requests=256, chunked_prefill_size=32768, attention_backend=flashinfer).
INFERENCEX_R1_H200_V0512 = {
    "8k": {4: (43.12, 373.26, 10.94), 8: (68.33, 490.53, 13.88), 16: (93.89, 688.2, 20.02)},
    "1k": {4: (49.17, None, 9.7), 8: (82.37, None, 11.73), 16: (126.62, None, 15.28), 32: (177.14, None, 21.8),
           64: (259.8, None, 29.77)},
}  # fmt: skip


def inferencex_closed_loop(isl: int, osl: int, c: int, metric: str) -> Callable[[], float]:
    """inferencex_c4 at concurrency `c` (10 x c prompts): the simulator's mean TTFT or mean TPOT, ms."""

    def run() -> float:
        lay = dict(INFERENCEX_R1_H200_LAYOUT, batching=Batching(max_running=256, chunked_prefill_tokens=32768))
        plan = Plan("sglang", "aggregated", {"both": PhasePlan(gpus=EIGHT, **lay)})
        std = dict(isl_std=isl / 0.9 * 0.2 / math.sqrt(12), osl_std=osl / 0.9 * 0.2 / math.sqrt(12))
        w = Workload(isl=isl, osl=osl, concurrency=c, length_dist="normal", **std)
        m, hw = model("deepseek-v3"), box("h200-x8")
        out = simulate(deployment(plan, m, hw, w, predict(plan, m, hw, w)), make_trace(w, 10 * c), c)
        n = range(len(out.osl))
        if metric == "ttft":
            return statistics.fmean(out.first_ms[i] - out.arrival_ms[i] for i in n)
        return statistics.fmean((out.done_ms[i] - out.first_ms[i]) / (out.osl[i] - 1) for i in n)

    return run


def hopper36_rows() -> list[Row]:
    """hopper36: the v0.5.12 curve (INFERENCEX_R1_H200_V0512): output tok/s/GPU at the steady state, TTFT and TPOT
    of 8k/1k through the simulator's closed loop (as inferencex_c4), 1k/1k TPOT at the steady state (as
    concurrency_rows). Left out (calibration.yaml notes): the 1k/1k TTFTs and the 8k/1k c=32 / c=64 points."""
    entry, r1 = "inferencex-sglang-r1-fp8-h200-tp8-v0512", (lambda: model("deepseek-v3"))  # noqa: E731
    lay = dict(INFERENCEX_R1_H200_LAYOUT, batching=Batching(max_running=256, chunked_prefill_tokens=32768))
    out = []
    for length, (isl, osl) in (("8k", (7373, 922)), ("1k", (922, 922))):
        for c, (tok_s, ttft, tpot) in INFERENCEX_R1_H200_V0512[length].items():
            label = f"DeepSeek-R1 FP8 TP8 8xH200 SGLang 0.5.12 {length}/1k c={c}"
            steady = partial(at_concurrency, r1, "h200-x8", 8, "sglang", isl, osl, c, **lay)
            out.append(Row(entry, label, "out tok/s/GPU", tok_s, steady(metric="out")))
            if length == "8k":
                out.append(Row(entry, label + " TTFT", "TTFT ms", ttft, inferencex_closed_loop(isl, osl, c, "ttft")))
                out.append(Row(entry, label + " TPOT", "TPOT ms", tpot, inferencex_closed_loop(isl, osl, c, "tpot")))
            else:
                out.append(Row(entry, label + " TPOT", "TPOT ms", tpot, steady(metric="tpot")))
    return out


# gdnwalk36: the FLA Triton GDN chain at one prompt, its serial chunk walk (perf/linear_attention.py chain_walk_s,
# CHAIN_WALK_STEP_US), Qwen3.5-397B's TP8 shape: calibration.yaml kernel-fla-gdn-prefill-one-prompt (H100, RTX PRO
# 6000 Workstation) and kernel-flashinfer-gdn-prefill-gb200 (GB200, on the B200 datasheet box). The chain as SGLang
# runs it: on the H100 at a 65,536-token chunk, past its FlashInfer limit (sglang_0_5_23.gdn_flashinfer_prefill).
GDN_ONE_PROMPT = "kernel-fla-gdn-prefill-one-prompt"
GDN_ONE_PROMPT_FLA_MS = {  # (entry, GPU, tokens of the one prompt) -> FLA / Triton ms
    (GDN_GB200, "gb200", 65536): 1.862,
    (GDN_GB200, "gb200", 8192): 0.250,
    (GDN_ONE_PROMPT, "h100", 65536): 1.954,
    (GDN_ONE_PROMPT, "h100", 32768): 0.997,
    (GDN_ONE_PROMPT, "h100", 16384): 0.508,
    (GDN_ONE_PROMPT, "h100", 8192): 0.259,
    (GDN_ONE_PROMPT, "h100", 4096): 0.144,
    (GDN_ONE_PROMPT, "h100", 2048): 0.086,
}
# the RTX PRO 6000 Workstation rows (FLA ms), shown apart: the chain's throughput term sets them (APART)
GDN_ONE_PROMPT_RTX_FLA_MS = {(GDN_ONE_PROMPT, "rtx_pro_ws", 65536): 2.338, (GDN_ONE_PROMPT, "rtx_pro_ws", 32768): 1.123}
# the H100 table's two unequal prompts (FLA ms): the longer one's walk, which a prompt count puts at the mean's
GDN_TWO_PROMPTS_FLA_MS = {(6144, 2048): 0.221, (4096, 4096): 0.184, (2048, 6144): 0.222}


@cache
def h100_box8():
    """Eight H100 SXM: h100_box's GPU on the H200 preset's eight (the TP8 shape's groups)."""
    return with_device(box("h200-x8"), "h100-sxm", "name", "mem_bw_gbs", "peak_tflops")


@cache
def rtx_pro_ws_box8():
    """Eight RTX PRO 6000 Workstation Edition: rtx_pro_ws_box's GPU on the preset's eight."""
    hw = box("rtx-pro-6000-x8")
    one = rtx_pro_ws_box().accelerators[0]
    gpus = tuple(dataclasses.replace(a, name=one.name, mem_bw_gbs=one.mem_bw_gbs) for a in hw.accelerators)
    return dataclasses.replace(hw, accelerators=gpus)


GDN_BOXES = {"gb200": (b200_compute_box, 0), "h100": (h100_box8, 65536), "rtx_pro_ws": (rtx_pro_ws_box8, 0)}


def gdnwalk36_rows(table: dict = GDN_ONE_PROMPT_FLA_MS) -> list[Row]:
    """gdnwalk36: the FLA chain at one prompt of Qwen3.5-397B's TP8 shape on the GB200 and H100 (the B300 rows have no
    box; the RTX PRO 6000 rows are shown apart)."""
    out = []
    for (entry, gpu, tokens), ms in table.items():
        hw, chunk = GDN_BOXES[gpu]
        out.append(Row(entry, f"{gpu} GDN prefill FLA Triton qwen3.5-397b-a17b TP8 1x{tokens}", "ms", ms,
                       gdn_scan_ms("qwen3.5-397b-a17b", 8, tokens, "sglang", 1.0, hw, chunk)))  # fmt: skip
    return out


def gdnwalk36_apart_rows() -> list[Row]:
    """gdnwalk36: the RTX PRO 6000 rows and the H100 table's two unequal prompts (APART says why)."""
    return gdnwalk36_rows(GDN_ONE_PROMPT_RTX_FLA_MS) + [
        Row(GDN_ONE_PROMPT, f"h100 GDN prefill FLA Triton qwen3.5-397b-a17b TP8 {a}+{b}", "ms", ms,
            gdn_scan_ms("qwen3.5-397b-a17b", 8, a + b, "sglang", 2.0, h100_box8, 65536))
        for (a, b), ms in GDN_TWO_PROMPTS_FLA_MS.items()
    ]  # fmt: skip


APART += (
    " kernel-fla-gdn-prefill-one-prompt RTX PRO 6000 Workstation rows (1.45-1.52x): there the op list's chain"
    " throughput term (CHAIN_SPEED, read on a GB200's HBM) is above the walk, so they test that speed's transfer to"
    " sm_120's GDDR7 and L2, not the walk; counted, they moved shared refits (LOSO of the H800 / H100 MLA decode rows"
    " 1.00 / 1.07 -> 1.12 / 1.19). Its two unequal prompts: the call takes the longer prompt's chunk walk, which the"
    " step input's prompt count (the mean prompt) cannot express; its FlashInfer column (the context-parallel route)"
    " is not shown: whether FlashInfer 0.7.3 carries those kernels is not established (gdnwalk36)."
)


# dsaidx36: DeepGEMM's FP8 paged MQA logits (the DSA indexer's decode scoring) on a Blackwell GPU, TensorRT-LLM
# PR 13219's table (calibration.yaml kernel-deepgemm-paged-mqa-logits-b200-trtllm13219): (sequences, context) -> us,
# next_n 1, the rows whose keys (132 B each) exceed the B200's 126 MB L2
MQA_LOGITS_B200_US = {(32, 32768): 24.9, (16, 65536): 25.2, (32, 65536): 45.3}


def indexer_logits_us(seqs: int, ctx: int) -> Callable[[], float]:
    """The logits kernel of the op list's indexer op (perf/mla_ops.py indexer_ops) for GLM-5's 32 x 128 indexer on
    one B200, vLLM TP1, `seqs` decodes of one token at context `ctx`, us: the op less its top-k (the bytes it reads
    and writes, carried in the op's bytes and, at the op's FLOP-a-byte ratio, its FLOPs) and that launch."""

    def run() -> float:
        from autotune.perf import layers, mla_ops

        m, phase = model("glm-5"), PhasePlan(gpus=(0,), tp=1)
        att = m.layers[-1].attention
        c = opcore.context(m, phase, "vllm", b200_compute_box(), phase.gpus)
        x = opcore.StepInput(decode_seqs=float(seqs), decode_ctx=float(ctx))
        op = next(op for op in oplist.attention_ops(c, att, x) if op.source == "dsa indexer")
        scored = layers.indexer_scored(att, float(ctx))
        topk = seqs * (scored * mla_ops.INDEXER_LOGIT_BYTES + att.attended_cap * mla_ops.INDEXER_INDEX_BYTES)
        rate = rates.rates_table(c.hw).get(op.kind, op.dtype, op.bucket)
        flops = op.flops - topk * rate.tflops * 1e3 / rate.gbs
        return cost_ops(c, [op._replace(flops=flops, nbytes=op.nbytes - topk, count=1.0)]).time_s * 1e6

    return run


def dsaidx36_rows() -> list[Row]:
    """kernel-deepgemm-paged-mqa-logits-b200-trtllm13219 (dsaidx36): the indexer's decode logits, memory bound."""
    e = "kernel-deepgemm-paged-mqa-logits-b200-trtllm13219"
    return [
        Row(e, f"B200 DeepGEMM fp8_paged_mqa_logits {n} seqs x {ctx // 1024}k, next_n 1", "us", us,
            indexer_logits_us(n, ctx))
        for (n, ctx), us in MQA_LOGITS_B200_US.items()
    ]  # fmt: skip


if __name__ == "__main__":
    main()
