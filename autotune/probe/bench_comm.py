"""Collective curves for `probe --bench`: all-reduce, all-gather, reduce-scatter, all-to-all over each group size
and message size, with torch.distributed spawned locally (torch.multiprocessing, tcp://127.0.0.1:<free port>).

NCCL reads its environment once, at communicator creation, so every NCCL setting runs in its own spawned process
group: the children drop the box's NCCL_* variables and set only that setting's (the defaults run with none,
perf/comm.py MEASURED_CURVE_ENV). Figures follow nccl-tests' conventions (NVIDIA/nccl-tests doc/PERFORMANCE.md):
`message_bytes` is the size nccl-tests reports (all-reduce: the buffer; all-gather / reduce-scatter: the gathered
buffer; all-to-all: what each rank sends), `latency_us` the mean time of one call (the slowest rank),
`busbw_gbs` = algbw x 2(p-1)/p for all-reduce and x (p-1)/p for the others. The `gloo` backend on CPU tensors
runs the same code (tests).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from autotune.specs.hardware import CollectivePoint

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
PCIE_IPC = "pcie_ipc_all_reduce"  # the engines' FlashInfer PCIe-IPC all-reduce (perf/comm.py pcie_ipc)
PCIE_IPC_HIDDEN = 4096  # row width of the PCIe-IPC reductions timed (a decode step's rows x hidden)
# decode-sized reductions: 8 KiB (2 rows of 2,048) to 8 MiB (1,024 rows of 4,096), where the engines use it
PCIE_IPC_SIZES = tuple(8192 * 4**i for i in range(6))
BUS_FACTOR = {"all_reduce": lambda p: 2 * (p - 1) / p, "all_gather": lambda p: (p - 1) / p}
BUS_FACTOR[PCIE_IPC] = BUS_FACTOR["all_reduce"]
BUS_FACTOR["reduce_scatter"] = BUS_FACTOR["all_to_all"] = BUS_FACTOR["all_gather"]
WARMUP = 2
BYTES_PER_ITER_TARGET = 1 << 30  # iterations per size: enough that each size moves ~1 GiB, within [MIN, MAX]
MIN_ITERS, MAX_ITERS = 3, 50


@dataclass(frozen=True)
class CommJob:
    """One spawned process group: the collectives x group sizes x message sizes it times under one setting."""

    world: int
    backend: str  # nccl | gloo
    env: tuple[tuple[str, str], ...]  # NCCL_* settings, () = NCCL defaults
    collectives: tuple[str, ...]
    groups: tuple[int, ...]  # group sizes (the first p ranks)
    sizes: tuple[int, ...]  # message bytes
    timeout_s: float = 600.0  # idle ranks wait at a barrier while a sub-group (or PCIe-IPC tuning) runs


def key(name: str, p: int, env: tuple[tuple[str, str], ...] = ()) -> str:
    """Measured.collectives key: "all_reduce/8", or "all_reduce/8 NCCL_PROTO=LL" under a setting."""
    return f"{name}/{p}" + "".join(f" {k}={v}" for k, v in env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iterations(nbytes: int) -> int:
    return max(MIN_ITERS, min(MAX_ITERS, BYTES_PER_ITER_TARGET // max(nbytes, 1)))


def run(job: CommJob, notes: list[str] | None = None) -> dict[str, tuple[CollectivePoint, ...]]:
    """Spawn `job.world` processes, time the job's collectives, return curves keyed by `key` (what the processes
    skipped, e.g. a PCIe-IPC shape its kernels do not take, goes to `notes`)."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="mi-tune-comm-") as tmp:
        out = Path(tmp, "rank0.json")
        mp.spawn(_worker, args=(job, free_port(), str(out)), nprocs=job.world, join=True)
        result = json.loads(out.read_text())
    rows = result["rows"]
    if notes is not None:
        notes.extend(result["notes"])
    curves: dict[str, list[CollectivePoint]] = {}
    for name, p, nbytes, us in rows:
        busbw = nbytes / (us * 1e-6) / 1e9 * BUS_FACTOR[name](p)
        curves.setdefault(key(name, p, job.env), []).append(
            CollectivePoint(nbytes, float(f"{busbw:.4g}"), float(f"{us:.4g}"))
        )
    return {k: tuple(v) for k, v in curves.items()}


def _worker(rank: int, job: CommJob, port: int, out: str) -> None:
    for name in [k for k in os.environ if k.startswith("NCCL_")]:
        del os.environ[name]
    os.environ.update(dict(job.env))
    import datetime

    import torch
    import torch.distributed as dist

    cuda = job.backend == "nccl"
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        job.backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=job.world,
        timeout=datetime.timedelta(seconds=job.timeout_s),
    )
    try:
        rows, notes = [], []
        for p in job.groups:
            # every rank creates every group (new_group is collective); ranks >= p only wait at the barrier
            group = dist.new_group(list(range(p))) if p < job.world else None
            host_group = dist.new_group(list(range(p)), backend="gloo") if PCIE_IPC in job.collectives else None
            for name in job.collectives:
                if name == PCIE_IPC:
                    times = _pcie_ipc_us(torch, dist, p, job.sizes, device, group, host_group, notes)
                    times = times if rank < p else [0.0] * len(job.sizes)
                else:
                    times = [_time_us(torch, dist, name, p, b, device, group) if rank < p else 0.0 for b in job.sizes]
                rows += [(name, p, nbytes, us) for nbytes, us in zip(job.sizes, times, strict=True)]
            dist.barrier()
        slowest = torch.tensor([us for *_, us in rows], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            done = [(n, p, b, us) for (n, p, b, _), us in zip(rows, slowest.tolist(), strict=True) if us > 0]
            Path(out).write_text(json.dumps({"rows": done, "notes": sorted(set(notes))}))
    finally:
        dist.destroy_process_group()


def _pcie_ipc_us(torch, dist, p: int, sizes, device, group, host_group, notes: list[str]) -> list[float]:
    """Mean microseconds of FlashInfer's PCIe-IPC all-reduce (`PcieIpcAllReduceWorkspace`, what vLLM's and
    SGLang's PCIe-IPC switches call) at each size on the first `p` ranks, built and tuned as the engines do
    (workspace sized for the largest size, tactics tuned over a gloo group); 0.0 for a size its kernels do
    not take. Ranks outside the group return zeros without building anything."""
    if dist.get_rank() >= p:
        return [0.0] * len(sizes)
    try:
        from flashinfer.comm import PcieIpcAllReduceWorkspace
    except ImportError as exc:
        notes.append(f"PCIe-IPC all-reduce skipped: flashinfer.comm has no PcieIpcAllReduceWorkspace ({exc})")
        return [0.0] * len(sizes)
    shapes = [_ipc_shape(nbytes) for nbytes in sizes]
    max_numel = max(rows * hidden for rows, hidden in shapes)
    try:
        ws = PcieIpcAllReduceWorkspace(
            group=group or dist.group.WORLD,
            max_numel=max_numel,
            dtype=torch.bfloat16,
            tune_batches=tuple(sorted({rows for rows, _ in shapes})),
            tune_cache=None,
        )
    except Exception as exc:  # world size, peer access, a build without the kernels
        notes.append(f"PCIe-IPC all-reduce on {p} GPUs skipped: workspace failed: {type(exc).__name__}: {exc}")
        return [0.0] * len(sizes)
    try:
        try:
            ws.tune(sorted({hidden for _, hidden in shapes}), dtype=torch.bfloat16, tune_group=host_group)
        except Exception as exc:
            notes.append(f"PCIe-IPC all-reduce: autotune failed ({type(exc).__name__}); FlashInfer's seed policy")
        times = []
        for nbytes, (rows, hidden) in zip(sizes, shapes, strict=True):
            inp = torch.ones(rows, hidden, dtype=torch.bfloat16, device=device)
            if not ws.supports(inp):
                notes.append(f"PCIe-IPC all-reduce on {p} GPUs: its kernels do not take {nbytes} B ({rows}x{hidden})")
                times.append(0.0)
                continue
            times.append(_time_call(torch, dist, lambda inp=inp: ws.all_reduce(inp), device, group, nbytes))
        return times
    finally:
        ws.destroy()


def _ipc_shape(nbytes: int) -> tuple[int, int]:
    """(rows, hidden) of a bf16 reduction of `nbytes`: rows of PCIE_IPC_HIDDEN elements, or one shorter row."""
    numel = max(1, nbytes // 2)
    hidden = min(PCIE_IPC_HIDDEN, numel)
    return max(1, numel // hidden), hidden


def _time_us(torch, dist, name: str, p: int, nbytes: int, device, group) -> float:
    """Mean microseconds of one call of collective `name` on `p` ranks with nccl-tests' message size `nbytes`."""
    elems = max(p, nbytes // 2 // p * p)  # bf16 elements, a multiple of p
    if name == "all_reduce":
        buf = torch.ones(elems, dtype=torch.bfloat16, device=device)

        def call():
            dist.all_reduce(buf, group=group)
    elif name == "all_gather":
        out = torch.empty(elems, dtype=torch.bfloat16, device=device)
        inp = torch.ones(elems // p, dtype=torch.bfloat16, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def call():
            gather(out, inp, group=group)
    elif name == "reduce_scatter":
        inp = torch.ones(elems, dtype=torch.bfloat16, device=device)
        out = torch.empty(elems // p, dtype=torch.bfloat16, device=device)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

        def call():
            scatter(out, inp, group=group)
    elif name == "all_to_all":
        inp = torch.ones(elems, dtype=torch.bfloat16, device=device)
        out = torch.empty(elems, dtype=torch.bfloat16, device=device)

        def call():
            dist.all_to_all_single(out, inp, group=group)
    else:
        raise ValueError(f"unknown collective {name!r}")
    return _time_call(torch, dist, call, device, group, nbytes)


def _time_call(torch, dist, call, device, group, nbytes: int) -> float:
    """Mean microseconds of `call` after a warm-up, the group's ranks starting together."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    for _ in range(WARMUP):
        call()
    sync()
    dist.barrier(group=group)
    iters = iterations(nbytes)
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    sync()
    return (time.perf_counter() - t0) / iters * 1e6


def jobs(
    world: int, quick: bool, backend: str = "nccl", settings: Iterable[dict[str, str]] = (), pcie_ipc: bool = False
) -> list[CommJob]:
    """The spawned groups `probe --bench` runs: at NCCL defaults every collective over every group size 2, 4, 8
    (<= world) at 1 KiB-256 MiB (x4 steps); then each NCCL setting the search can set, all-reduce only.
    `quick`: defaults only, x16 steps."""
    groups = tuple(p for p in (2, 4, 8) if p <= world)
    if not groups:
        return []
    step = 16 if quick else 4
    sizes = tuple(1024 * step**i for i in range(20) if 1024 * step**i <= 256 << 20)
    sizes = sizes if sizes[-1] == 256 << 20 else (*sizes, 256 << 20)
    out = [CommJob(world, backend, (), COLLECTIVES, groups, sizes)]
    if pcie_ipc:  # world sizes 2/4/8 only: the kernels build IPC channels for those
        out.append(CommJob(world, backend, (), (PCIE_IPC,), groups, PCIE_IPC_SIZES))
    if not quick:
        out += [CommJob(world, backend, tuple(sorted(env.items())), ("all_reduce",), groups, sizes) for env in settings]
    return out
