"""HardwareProfile: what the box is (from `mi-tune probe`, a preset, or a file)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import ClassVar

LINK_LABELS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "HCCS")  # plus NV<k>, as `nvidia-smi topo -m` prints
# device-to-device fabrics: NVLink (NV<k>) and Huawei HCCS (`npu-smi info -t topo` prints HCCS); a box whose every
# pair is on one has interconnect "nvlink" (the fabric's per-direction bandwidth is Accelerator.nvlink_gbs)
FABRIC_LABELS = ("HCCS",)


def on_fabric(label: str) -> bool:
    return label.startswith("NV") or label in FABRIC_LABELS


SCHEMA = "mi-tune/hardware/v1"
# keys files written before the rename still carry -> the field they fill (specs/io.py reads them): memory_gb held
# GiB all along, so an old best.yaml or probe output loads unchanged
MEMORY_ALIASES = {"memory_gb": "memory_gib"}

# PCIe usable bytes per lane per direction after line coding (8b/10b Gen1-2, 128b/130b Gen3-5,
# FLIT Gen6), GB/s: PCIe base specification arithmetic.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


@dataclass(frozen=True)
class HostInfo:
    cpu_model: str
    sockets: int
    cores: int
    numa_nodes: int
    memory_gib: float  # host DRAM, GiB (binary) like the accelerators'
    inter_socket_gbs: float = 0.0  # usable socket-interconnect bandwidth for PCIe peer traffic; 0 = unknown
    FIELD_ALIASES: ClassVar[dict[str, str]] = MEMORY_ALIASES

    def __post_init__(self) -> None:
        _non_negative(self, ("sockets", "cores", "numa_nodes", "memory_gib", "inter_socket_gbs"))


@dataclass(frozen=True)
class Features:
    bf16: bool
    fp8: bool
    fp4: bool
    int8: bool
    collective_library: str  # nccl, rccl, hccl, cncl, mccl ...


@dataclass(frozen=True)
class Accelerator:
    index: int
    vendor: str
    name: str
    pci_bdf: str
    memory_gib: float  # binary: NVML total / 2^30 (datasheet sizes such as '96 GB' are GiB)
    mem_bw_gbs: float
    peak_tflops: dict[str, float]  # dense, by dtype: bf16, fp8, fp4, int8
    arch: str  # "sm_120", "sm_90", "ascend910b" ...
    numa_node: int
    pcie_gen: int
    pcie_width: int
    features: Features
    nvlink_gbs: float = 0.0  # NVLink bandwidth per direction per GPU, 0 when there is none
    FIELD_ALIASES: ClassVar[dict[str, str]] = MEMORY_ALIASES

    def __post_init__(self) -> None:  # 0 = unknown (probe leaves what it cannot read at 0); never negative
        _non_negative(self, ("index", "memory_gib", "mem_bw_gbs", "pcie_gen", "pcie_width", "nvlink_gbs"))
        for dtype, tflops in self.peak_tflops.items():
            if tflops < 0:
                raise ValueError(f"peak_tflops.{dtype}: expected a value >= 0, got {tflops:g}")
        if self.numa_node < -1:
            raise ValueError(f"numa_node: expected a node index, or -1 when unknown, got {self.numa_node}")

    @property
    def pcie_gbs(self) -> float:
        """Raw PCIe bandwidth per direction, GB/s."""
        return PCIE_LANE_GBS.get(self.pcie_gen, 0.0) * self.pcie_width


@dataclass(frozen=True)
class CollectivePoint:
    message_bytes: int
    busbw_gbs: float
    latency_us: float


@dataclass(frozen=True)
class OpPoint:
    """One timed kernel of `probe --bench`: an op class x dtype x rates-table bucket at one shape."""

    op_class: str  # gemm | grouped_moe | attention (perf/rates.py op classes)
    dtype: str  # bf16 | fp8 | int8 | fp4
    bucket: str  # m<=16 ... m>1024, decode, prefill; "launch": a tiny shape timing the kernel floor
    shape: str  # what ran, e.g. "m=16 n=4096 k=7168" or "b=32 hq=32 hkv=8 d=128 ctx=4096"
    time_us: float  # median GPU time of one call
    tflops: float  # achieved: the op's FLOPs / time_us
    gbs: float  # achieved: bytes the op must move (weights, activations, KV) / time_us


@dataclass(frozen=True)
class Measured:
    """Micro-benchmark curves that replace the datasheet defaults in perf when present (`probe --bench`)."""

    gemm_tflops: dict[str, float] = field(default_factory=dict)  # dtype -> achieved large-GEMM TFLOPS
    mem_bw_gbs: float = 0.0
    p2p_gbs: tuple[tuple[float, ...], ...] = ()
    # "all_reduce/8" -> curve at NCCL defaults; "all_reduce/8 NCCL_PROTO=LL": under that NCCL setting;
    # "pcie_ipc_all_reduce/8": the engines' PCIe-IPC kernel
    collectives: dict[str, tuple[CollectivePoint, ...]] = field(default_factory=dict)
    ops: tuple[OpPoint, ...] = ()  # GEMM / grouped-MoE / attention points (perf/rates.py reads them per bucket)
    host_copy_gbs: dict[str, float] = field(default_factory=dict)  # "h2d/numa0/gpu0" -> pinned-memory GB/s
    versions: dict[str, str] = field(default_factory=dict)  # torch, cuda, nccl, driver the figures were taken with
    notes: tuple[str, ...] = ()  # what was skipped and why


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    source: str  # probe | preset | file
    host: HostInfo
    accelerators: tuple[Accelerator, ...]
    links: tuple[tuple[str, ...], ...]  # N x N, `nvidia-smi topo -m` labels
    p2p: tuple[tuple[bool, ...], ...]  # N x N, peer access possible
    pcie_switch_uplink_gbs: float = 0.0  # per switch, per direction; 0 = same as one GPU link
    measured: Measured | None = None
    # op class (perf/rates.py: gemm, grouped_moe, attention, norm, elementwise, quant, sampling, collective) ->
    # multiplier on its predicted time, fitted from measured runs (`mi-tune measure`, provenance measured-run)
    corrections: dict[str, float] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # where the numbers come from (datasheets, probe)
    schema: str = SCHEMA
    interconnect: str = field(init=False)  # derived: nvlink | pcie | mixed
    fingerprint: str = field(init=False)  # derived: hash of what perf depends on

    def __post_init__(self) -> None:
        n = len(self.accelerators)
        if not n:
            raise ValueError("accelerators: expected at least one")
        if len(self.links) != n or any(len(row) != n for row in self.links):
            raise ValueError(f"links: expected a {n}x{n} matrix")
        if len(self.p2p) != n or any(len(row) != n for row in self.p2p):
            raise ValueError(f"p2p: expected a {n}x{n} matrix")
        for row in self.links:
            for label in row:
                if label not in LINK_LABELS and not (label.startswith("NV") and label[2:].isdigit()):
                    raise ValueError(f"links: unknown label {label!r} (expected {', '.join(LINK_LABELS)} or NV<k>)")
        object.__setattr__(self, "interconnect", _interconnect(self.links))
        object.__setattr__(self, "fingerprint", "")
        object.__setattr__(self, "fingerprint", _fingerprint(self))

    @property
    def num_gpus(self) -> int:
        return len(self.accelerators)

    @property
    def gpu(self) -> Accelerator:
        """The first accelerator; perf assumes a homogeneous box."""
        return self.accelerators[0]


def _non_negative(obj, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(obj, name) < 0:
            raise ValueError(f"{name}: expected a value >= 0, got {getattr(obj, name):g}")


def _interconnect(links: tuple[tuple[str, ...], ...]) -> str:
    pairs = [label for i, row in enumerate(links) for j, label in enumerate(row) if i != j]
    nv = sum(on_fabric(label) for label in pairs)
    if pairs and nv == len(pairs):
        return "nvlink"
    return "mixed" if nv else "pcie"


def _fingerprint(hw: HardwareProfile) -> str:
    from autotune.specs.io import to_dict

    body = {k: v for k, v in to_dict(hw).items() if k not in ("name", "source", "sources", "fingerprint")}
    if not body.get("corrections"):
        body.pop("corrections", None)  # profiles without fitted corrections keep the fingerprint they had
    # hashed under the key memory_gib had before its rename, so a box keeps its fingerprint (best.yaml, storages)
    renamed = {new: old for old, new in MEMORY_ALIASES.items()}
    body["host"] = {renamed.get(k, k): v for k, v in body["host"].items()}
    body["accelerators"] = [{renamed.get(k, k): v for k, v in a.items()} for a in body["accelerators"]]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
