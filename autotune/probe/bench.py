"""`mi-tune probe --bench`: what the rates table needs, measured on this box, into the profile's `measured`.

Needs torch with a CUDA device (the `gpu` extra); torch is imported here only. Never changes clocks or device
settings: it allocates, times with CUDA events and frees. Parts (probe/bench_ops.py, probe/bench_comm.py):
GEMMs per dtype x m bucket at the catalog models' projection shapes, grouped MoE GEMMs at their expert shapes,
decode / prefill attention points, device-memory copy bandwidth, P2P copy between every pair, pinned host<->device
copy per NUMA node, and NCCL collectives over each group size at defaults and under each NCCL setting the search
space can set. `--quick` is a subset (fewer shapes, repeats and sizes; no NCCL settings). A part that cannot run
here (a dtype, the PCIe-IPC all-reduce library, a second GPU) is skipped and named in `measured.notes`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autotune.probe import bench_comm, bench_ops
from autotune.probe.bench_ops import AttentionPoint, GemmShape, Timer
from autotune.specs import Measured, MiTuneError
from autotune.specs.hardware import HardwareProfile

FULL_BUCKETS = ("m<=16", "m<=128", "m<=1024", "m>1024")
CC_FP8, CC_FP4 = (8, 9), (10, 0)  # torch._scaled_mm FP8 needs sm_89+ (Ada/Hopper); nvfp4 block scales sm_100+
SLOW_P2P_SHARE = 0.4  # a pair under 40% of the median pair's copy bandwidth is flagged (a heuristic threshold)


@dataclass(frozen=True)
class BenchPlan:
    """What one `probe --bench` run times (bench_plan builds it from the box and the model catalog)."""

    dtypes: tuple[str, ...]
    gemm_shapes: tuple[GemmShape, ...]
    buckets: tuple[str, ...]
    experts: tuple[tuple[int, GemmShape], ...]  # (local experts, one expert's projection)
    attention: tuple[AttentionPoint, ...]
    repeats: int
    copy_bytes: int  # device-memory copy
    p2p_bytes: int  # per GPU pair, and per host<->device copy
    comm_jobs: tuple[bench_comm.CommJob, ...]
    label: str = "full"  # full | quick | cpu: named in the profile's sources


def _torch():
    try:
        import torch
    except ImportError:
        raise MiTuneError("probe --bench needs torch: pip install 'mi-tune[gpu]'") from None
    if not torch.cuda.is_available():
        raise MiTuneError("probe --bench needs a CUDA device; none found")
    return torch


def serving_shapes(world: int, quick: bool) -> tuple[tuple[GemmShape, ...], tuple[tuple[int, GemmShape], ...]]:
    """Dense projection shapes (gate_up, down of each catalog model's dense FFN, split over TP = the largest power
    of two <= `world`, as the engines split) and expert shapes (experts per rank under EP over that many GPUs, at
    most 64, and one expert's gate_up / down)."""
    from autotune.catalog.models import list_models

    world = 1 << (max(world, 1).bit_length() - 1)
    dense: dict[tuple[int, int], GemmShape] = {}
    experts: dict[tuple[int, int, int], tuple[int, GemmShape]] = {}
    for model in sorted(list_models(), key=lambda m: m.name):
        h = model.hidden_size
        for ffn in {layer.ffn for layer in model.layers}:
            inter = ffn.params // (3 * h) if ffn.kind == "dense" else 0  # gated FFN: gate, up, down
            if inter:
                for n, k, what in ((2 * inter // world, h, "gate_up"), (h, inter // world, "down")):
                    dense.setdefault((n, k), GemmShape(n, k, f"{model.name} {what} tp{world}"))
            if ffn.kind == "moe" and ffn.expert_params:
                inter_e, local = ffn.expert_params // (3 * h), max(1, min(64, ffn.num_experts // world))
                for n, k, what in ((2 * inter_e, h, "gate_up"), (h, inter_e, "down")):
                    experts.setdefault((local, n, k), (local, GemmShape(n, k, f"{model.name} expert {what} ep{world}")))
    dense_shapes, expert_shapes = tuple(dense.values()), tuple(experts.values())
    if quick:  # the largest dense pair and the largest expert gate_up
        dense_shapes = tuple(sorted(dense_shapes, key=lambda s: -s.n * s.k)[:2])
        expert_shapes = tuple(sorted(expert_shapes, key=lambda e: -e[0] * e[1].n * e[1].k)[:1])
    return dense_shapes, expert_shapes


def attention_shapes(quick: bool) -> tuple[AttentionPoint, ...]:
    """GQA-like (Llama-70B / Qwen3 at TP 8: 8 query heads per KV head) and MLA-like (DeepSeek-V3 at TP 8: 16
    heads; absorbed decode over one 576-wide latent, prefill with 192-wide q.k and 128-wide v) points."""
    ctxs = (4096,) if quick else (2048, 8192)
    length = 2048 if quick else 4096
    points = []
    for ctx in ctxs:
        points.append(AttentionPoint("decode", "gqa", 32, 32, 4, 128, 128, ctx))
        points.append(AttentionPoint("decode", "mla", 32, 16, 1, 576, 512, ctx))
    points.append(AttentionPoint("prefill", "gqa", 1, 32, 4, 128, 128, length))
    points.append(AttentionPoint("prefill", "mla", 1, 16, 16, 192, 128, length))
    return tuple(points)


def bench_plan(hw: HardwareProfile, torch, world: int, quick: bool, nccl_settings: Sequence[dict] = ()) -> BenchPlan:
    """What to time on this box; `nccl_settings`: the NCCL_* settings to time all-reduce under, one at a time (the
    search's choices, search/bench_settings.py: the caller hands them in), skipped by a quick run."""
    cc = torch.cuda.get_device_capability(0)
    dtypes = ["bf16"]
    if hw.gpu.features.fp8 and cc >= CC_FP8 and hasattr(torch, "_scaled_mm"):
        dtypes.append("fp8")
    if not quick and hw.gpu.features.int8 and hasattr(torch, "_int_mm"):
        dtypes.append("int8")
    if hw.gpu.features.fp4 and cc >= CC_FP4 and hasattr(torch, "float4_e2m1fn_x2"):
        dtypes.append("fp4")
    dense, experts = serving_shapes(world, quick)
    return BenchPlan(
        dtypes=tuple(dtypes),
        gemm_shapes=dense,
        buckets=FULL_BUCKETS,
        experts=experts,
        attention=attention_shapes(quick),
        repeats=5 if quick else 20,
        copy_bytes=(256 if quick else 1024) << 20,
        p2p_bytes=(64 if quick else 256) << 20,
        comm_jobs=tuple(
            bench_comm.jobs(world, quick, "nccl", [] if quick else list(nccl_settings), pcie_ipc=has_pcie_ipc())
        ),
        label="quick" if quick else "full",
    )


def cpu_plan() -> BenchPlan:
    """The harness on CPU tensors (`--bench-device cpu`, tests): tiny shapes, collectives over 2 gloo processes."""
    return BenchPlan(
        dtypes=("bf16",),
        gemm_shapes=(GemmShape(96, 64, "cpu check"),),
        buckets=FULL_BUCKETS,
        experts=((2, GemmShape(64, 64, "cpu check")),),
        attention=(
            AttentionPoint("decode", "gqa", 2, 4, 2, 16, 16, 64),
            AttentionPoint("prefill", "gqa", 1, 4, 2, 16, 16, 32),
        ),
        repeats=5,
        copy_bytes=1 << 20,
        p2p_bytes=1 << 16,
        comm_jobs=(bench_comm.CommJob(2, "gloo", (), bench_comm.COLLECTIVES, (2,), (1024, 65536)),),
        label="cpu",
    )


def calibrate(result, quick: bool = False, device: str = "cuda", nccl_settings: Sequence[dict] = ()):
    """The probe result with `measured` filled by the benchmarks on this box's CUDA devices (`device="cpu"`:
    the harness check of cpu_plan, figures of this CPU); `nccl_settings` as in bench_plan."""
    if result.profile is None:
        raise MiTuneError("probe --bench: no accelerators found to benchmark")
    if device == "cpu":
        try:
            import torch
        except ImportError:
            raise MiTuneError("probe --bench needs torch: pip install 'mi-tune[gpu]'") from None
        return measure(result, cpu_plan(), torch, device="cpu", world=2)
    if device != "cuda":
        raise MiTuneError(f"--bench-device: expected cuda or cpu, got {device!r}")
    # the profile numbers GPUs as NVML does, in PCI bus order; CUDA's default order (fastest first) can differ,
    # so set it before CUDA initialises (the collectives' processes inherit it) unless the user chose one
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    torch = _torch()
    world = min(result.profile.num_gpus, torch.cuda.device_count())
    plan = bench_plan(result.profile, torch, world, quick, nccl_settings)
    return measure(result, plan, torch, device="cuda", world=world)


def measure(result, plan: BenchPlan, torch, device: str = "cuda", world: int = 1):
    """Run `plan` and return the result with `measured` and a `sources` line. `device="cpu"` runs the same
    harness on CPU tensors (tests; collectives then use gloo): figures of the CPU, not of any accelerator."""
    hw = result.profile
    t0 = time.perf_counter()
    cuda = device == "cuda"
    first = "cuda:0" if cuda else "cpu"
    timer = Timer(torch, first, plan.repeats)
    notes: list[str] = []
    ops = bench_ops.gemm_points(torch, timer, plan.dtypes, plan.gemm_shapes, plan.buckets, notes)
    ops += bench_ops.grouped_points(torch, timer, plan.experts, plan.buckets, notes)
    ops += bench_ops.attention_points(torch, timer, plan.attention, notes)
    t_ops = time.perf_counter()
    large = {}
    for dtype in plan.dtypes:
        rates = [p.tflops for p in ops if p.op_class == "gemm" and p.dtype == dtype and p.bucket == "m>1024"]
        if rates:
            large[dtype] = bench_ops.sig(statistics.median(rates))
    mem = _mem_bw_gbs(torch, timer, plan.copy_bytes)
    p2p = _p2p(torch, plan, world) if cuda and world > 1 else ()
    notes += p2p_notes(p2p)
    if cuda and world < 2:
        notes.append("P2P copies and collectives skipped: one GPU visible")
    host = _host_copies(torch, plan, hw, world, notes) if cuda else {}
    _free(torch, cuda, world)  # the collectives' processes need the memory this one cached
    t_copies = time.perf_counter()
    collectives: dict = {}
    for job in plan.comm_jobs:
        try:
            collectives.update(bench_comm.run(job, notes))
        except Exception as exc:  # a setting NCCL refuses, a hung group: keep the other curves
            setting = " ".join(f"{k}={v}" for k, v in job.env) or "defaults"
            notes.append(f"collectives at {setting} failed: {bench_ops.reason(exc)}")
    if not has_pcie_ipc():
        notes.append("PCIe-IPC all-reduce skipped: flashinfer (whose kernels vLLM and SGLang call) is not installed")
    versions = tool_versions(torch, result)
    measured = Measured(
        gemm_tflops=large,
        mem_bw_gbs=mem,
        p2p_gbs=p2p,
        collectives=collectives,
        ops=tuple(ops),
        host_copy_gbs=host,
        versions=versions,
        notes=tuple(notes),
    )
    took = time.perf_counter() - t0
    parts = f"kernels {t_ops - t0:.0f} s, copies {t_copies - t_ops:.0f} s, collectives {t0 + took - t_copies:.0f} s"
    where = "" if cuda else " on the CPU (harness check, not accelerator figures)"
    line = f"probe --bench ({plan.label}){where}: " + ", ".join(f"{k} {v}" for k, v in versions.items())
    profile = dataclasses.replace(hw, measured=measured, sources=(*hw.sources, line))
    return dataclasses.replace(
        result, profile=profile, notes=(*result.notes, f"probe --bench took {took:.0f} s ({parts})")
    )


def _free(torch, cuda: bool, world: int) -> None:
    for i in range(world if cuda else 0):
        with torch.cuda.device(i):
            torch.cuda.empty_cache()


def _mem_bw_gbs(torch, timer: Timer, nbytes: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device=timer.device)
    dst = torch.empty_like(src)
    us = timer.us(lambda: dst.copy_(src))
    return bench_ops.sig(2 * nbytes / (us * 1e-6) / 1e9)  # a copy reads and writes every byte


def _p2p(torch, plan: BenchPlan, world: int) -> tuple[tuple[float, ...], ...]:
    bufs = [torch.empty(plan.p2p_bytes, dtype=torch.uint8, device=f"cuda:{i}") for i in range(world)]
    rows = []
    for i in range(world):
        timer = Timer(torch, f"cuda:{i}", max(3, plan.repeats // 2))
        rows.append(tuple(0.0 if i == j else bench_ops.copy_gbs(torch, timer, bufs[i], bufs[j]) for j in range(world)))
    del bufs
    return tuple(rows)


def p2p_notes(p2p: tuple[tuple[float, ...], ...], slow_share: float = SLOW_P2P_SHARE) -> list[str]:
    """A pair whose copy runs far below the box's median pair: its peer access is likely staged through host
    memory (NVML may still report P2P, e.g. a patched GeForce driver, or ACS redirecting through the root)."""
    pairs = {(i, j): gbs for i, row in enumerate(p2p) for j, gbs in enumerate(row) if i != j}
    if not pairs:
        return []
    median = statistics.median(pairs.values())
    slow = [f"GPU{i}->GPU{j} {gbs:g}" for (i, j), gbs in sorted(pairs.items()) if gbs < slow_share * median]
    if not slow:
        return []
    return [f"P2P copies far below the median pair ({median:g} GB/s): {', '.join(slow)} GB/s; check ACS/IOMMU"]


def numa_cpus(sysfs_root: str = "/sys") -> dict[int, set[int]]:
    """NUMA node -> its CPUs, from <sysfs>/devices/system/node/node*/cpulist ("0-31,64-95")."""
    out = {}
    for node in sorted(Path(sysfs_root, "devices/system/node").glob("node[0-9]*")):
        try:
            text = (node / "cpulist").read_text().strip()
        except OSError:
            continue
        cpus: set[int] = set()
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        if cpus:
            out[int(node.name[4:])] = cpus
    return out


def _host_copies(torch, plan: BenchPlan, hw: HardwareProfile, world: int, notes: list[str]) -> dict[str, float]:
    """Pinned host<->device GB/s from a buffer on each NUMA node (the thread pinned to the node's CPUs, so the
    pages are allocated there) to the first GPU of each NUMA node (GPU 0 when none is reported). A node whose
    CPUs this process may not run on (a cpuset) is skipped with a note."""
    nodes = numa_cpus()
    if not hasattr(os, "sched_setaffinity") or not nodes:
        return {}
    gpus = sorted({next((a.index for a in hw.accelerators if a.numa_node == n and a.index < world), 0) for n in nodes})
    saved = os.sched_getaffinity(0)
    out = {}
    try:
        for node, cpus in nodes.items():
            try:
                os.sched_setaffinity(0, cpus)
            except OSError as exc:
                notes.append(f"host copies from NUMA node {node} skipped: cannot run on its CPUs ({exc.strerror})")
                continue
            host = torch.empty(plan.p2p_bytes, dtype=torch.uint8, pin_memory=True)
            host.fill_(1)
            for g in gpus:
                dev = torch.empty(plan.p2p_bytes, dtype=torch.uint8, device=f"cuda:{g}")
                timer = Timer(torch, f"cuda:{g}", max(3, plan.repeats // 2))
                out[f"h2d/numa{node}/gpu{g}"] = bench_ops.copy_gbs(torch, timer, host, dev)
                out[f"d2h/numa{node}/gpu{g}"] = bench_ops.copy_gbs(torch, timer, dev, host)
                del dev
            del host
    finally:
        os.sched_setaffinity(0, saved)
    return out


def has_pcie_ipc() -> bool:
    """Whether the library of the engines' PCIe-IPC all-reduce is installed (an import probe, no import)."""
    return importlib.util.find_spec("flashinfer") is not None


def tool_versions(torch, result) -> dict[str, str]:
    out = {"torch": str(torch.__version__), "cuda": str(torch.version.cuda or "none")}
    try:
        nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    except Exception:  # a torch built without NCCL
        nccl = None
    out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl or "none")
    driver = next((s.split("driver ", 1)[1].split(")", 1)[0] for s in result.profile.sources if "driver " in s), "")
    out["driver"] = driver or "unknown"
    return out
