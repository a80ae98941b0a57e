"""Datasheet table of accelerators: what the probe cannot measure (peak TFLOPS, memory bandwidth, features).

One row per device, matched case-insensitively against NVML names (`match`, a regex) or PCI ids
(`pci_ids`, from pci.ids). Every number is dense (never "with sparsity") and cites its source in a comment;
§ refers to /work/shared/reference/hardware.md. `confidence`: H datasheet/source read, M consistent
secondary sources or derived, L single weak source (defaults that a probe measurement should replace).
A 0.0 / missing figure means "not published": perf refuses a profile whose bf16 peak or bandwidth is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autotune.specs.hardware import Features


@dataclass(frozen=True)
class Vendor:
    name: str
    pci_vendor_id: int
    collective_library: str


# PCI vendor ids: pci.ids (pciutils/pciids, 2026-08-22) and gpustack/runtime detectors (§3); Biren is L.
VENDORS: dict[int, Vendor] = {
    v.pci_vendor_id: v
    for v in (
        Vendor("nvidia", 0x10DE, "nccl"),
        Vendor("amd", 0x1002, "rccl"),
        Vendor("huawei", 0x19E5, "hccl"),
        Vendor("cambricon", 0xCABC, "cncl"),
        Vendor("hygon", 0x1D94, "rccl"),
        Vendor("moorethreads", 0x1ED5, "mccl"),
        Vendor("metax", 0x9999, "mccl"),
        Vendor("iluvatar", 0x1E3E, "ixccl"),
        Vendor("enflame", 0x1E36, "eccl"),
        Vendor("kunlunxin", 0x1D22, "bkcl"),
        Vendor("biren", 0x1EE0, "bccl"),
    )
}


@dataclass(frozen=True)
class DeviceSpec:
    key: str
    vendor: str
    name: str  # as NVML (or the vendor's tool) prints it
    match: str  # regex, searched case-insensitively in NVML / marketing names
    memory_gib: float
    mem_bw_gbs: float
    peak_tflops: dict[str, float]  # dense, by dtype: bf16, fp8, fp4, int8 (omitted = unsupported or unknown)
    arch: str
    pcie_gen: int  # 0 = not published
    source: str
    confidence: str
    pci_ids: tuple[int, ...] = ()  # PCI device ids under the vendor's id
    nvlink_gbs: float = 0.0  # NVLink per direction per GPU when linked (datasheet bidirectional / 2)
    p2p_default: bool = True  # PCIe peer access with the stock driver
    pcie_width: int = 16

    @property
    def collective_library(self) -> str:
        return next(v.collective_library for v in VENDORS.values() if v.name == self.vendor)

    @property
    def features(self) -> Features:
        """Supported dtypes are the ones with a datasheet peak; the collective library is the vendor's."""
        p = self.peak_tflops
        return Features(
            bf16="bf16" in p,
            fp8="fp8" in p,
            fp4="fp4" in p,
            int8="int8" in p,
            collective_library=self.collective_library,
        )


_NV_DC = "https://www.nvidia.com/en-us/data-center"
_NV_GF = "https://www.nvidia.com/en-us/geforce/graphics-cards"

# Order matters: the first row whose `match` hits wins, so specific names come before general ones.
# fmt: off
DEVICES: tuple[DeviceSpec, ...] = (
    # ---- NVIDIA, §4 (BF16 / FP8 / INT8 dense, memory, bandwidth, PCIe, NVLink, P2P columns) ----
    DeviceSpec(
        "rtx-pro-6000-server", "nvidia", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        r"RTX PRO 6000 Blackwell Server",
        pci_ids=(0x2BB5,),
        memory_gib=96, mem_bw_gbs=1600,  # §4: 96 GB GDDR7; 1.6 TB/s server datasheet
        peak_tflops={"bf16": 504, "fp8": 1008, "int8": 1008,  # §4 (derived 188 SM x ~2.6 GHz)
                     "fp4": 2000},  # §4: "4000 AI TOPS" FP4 with sparsity / 2
        arch="sm_120", pcie_gen=5, confidence="M",
        source=f"{_NV_DC}/rtx-pro-6000-blackwell-server-edition/ (hardware.md §4, not fetched)",
    ),
    DeviceSpec(
        "rtx-5090", "nvidia", "NVIDIA GeForce RTX 5090", r"RTX 5090(?!\s*D)",
        pci_ids=(0x2B85,), p2p_default=False,  # §4: no P2P by default
        memory_gib=32, mem_bw_gbs=1792,  # §4: 32 GB GDDR7, 1.792 TB/s
        peak_tflops={"bf16": 209.5, "fp8": 419, "int8": 838,  # §4 (FP32 accumulate)
                     "fp4": 1676},  # 50-series page: 3352 AI TOPS (FP4 with sparsity) / 2; conf M
        arch="sm_120", pcie_gen=5, confidence="M", source=f"{_NV_GF}/50-series/rtx-5090/ (hardware.md §4)",
    ),
    DeviceSpec(
        "rtx-4090", "nvidia", "NVIDIA GeForce RTX 4090", r"RTX 4090(?!\s*D)",
        pci_ids=(0x2684,), p2p_default=False,  # §4: driver blocks P2P
        memory_gib=24, mem_bw_gbs=1008,  # §4: 24 GB GDDR6X, 1.008 TB/s
        peak_tflops={"bf16": 165, "fp8": 330, "int8": 660},  # §4 (FP32 accumulate)
        arch="sm_89", pcie_gen=4, confidence="M", source=f"{_NV_GF}/40-series/rtx-4090/ (hardware.md §4)",
    ),
    DeviceSpec(
        "l40s", "nvidia", "NVIDIA L40S", r"\bL40S\b", pci_ids=(0x26B9,),
        memory_gib=48, mem_bw_gbs=864,  # §4: 48 GB GDDR6, 0.864 TB/s
        peak_tflops={"bf16": 362, "fp8": 733, "int8": 733},  # §4
        arch="sm_89", pcie_gen=4, confidence="M", source=f"{_NV_DC}/l40s/ (hardware.md §4)",
    ),
    DeviceSpec(
        "l20", "nvidia", "NVIDIA L20", r"\bL20\b", pci_ids=(0x26BA, 0x26B7),  # pci.ids lists two L20 ids
        memory_gib=48, mem_bw_gbs=864,  # §4: 48 GB GDDR6, 0.864 TB/s (technical.city, topcpu.net)
        peak_tflops={"bf16": 119.5, "fp8": 239, "int8": 239},  # §4 (1cnz.cn / taoguba, conf M)
        arch="sm_89", pcie_gen=4, confidence="M", source="hardware.md §4 L20 row (technical.city; 1cnz.cn)",
    ),
    DeviceSpec(
        "l4", "nvidia", "NVIDIA L4", r"\bL4\b", pci_ids=(0x27B8,),
        memory_gib=24, mem_bw_gbs=300,  # §4: 24 GB GDDR6, 0.300 TB/s
        peak_tflops={"bf16": 121, "fp8": 242, "int8": 242},  # §4
        arch="sm_89", pcie_gen=4, confidence="M", source=f"{_NV_DC}/l4/ (hardware.md §4)",
    ),
    DeviceSpec(
        "a100-pcie-80gb", "nvidia", "NVIDIA A100 80GB PCIe", r"A100[- ]80GB[- ]PCIe|A100-PCIE-80GB", pci_ids=(0x20B5,),
        memory_gib=80, mem_bw_gbs=1935,  # §4: 80 GB HBM2e, 1.935 TB/s
        peak_tflops={"bf16": 312, "int8": 624},  # §4: no FP8
        arch="sm_80", pcie_gen=4, confidence="H",
        nvlink_gbs=300,  # §4: 600 GB/s (bidirectional) via 2-GPU bridge
        source=f"{_NV_DC}/a100/ (hardware.md §4)",
    ),
    DeviceSpec(
        "a800-pcie-80gb", "nvidia", "NVIDIA A800 80GB PCIe", r"A800[- ]80GB[- ]PCIe|A800-PCIE-80GB", pci_ids=(0x20F5,),
        memory_gib=80, mem_bw_gbs=1935,  # §4
        peak_tflops={"bf16": 312, "int8": 624},  # §4
        arch="sm_80", pcie_gen=4, confidence="M", nvlink_gbs=200,  # §4: 400 GB/s bridge
        source="hardware.md §4 A800 PCIe row",
    ),
    DeviceSpec(
        "a100-sxm-80gb", "nvidia", "NVIDIA A100-SXM4-80GB", r"A100[- ]SXM4?[- ]80GB", pci_ids=(0x20B2,),
        memory_gib=80, mem_bw_gbs=2039,  # A100 datasheet: 80 GB HBM2e, 2,039 GB/s (SXM4 80GB column)
        peak_tflops={"bf16": 312, "int8": 624},  # datasheet: 312 BF16 / 624 INT8 dense (x2 with sparsity); no FP8
        arch="sm_80", pcie_gen=4, confidence="H",
        nvlink_gbs=300,  # datasheet: NVLink3 600 GB/s bidirectional (12 links through NVSwitch on HGX A100)
        source=f"{_NV_DC}/a100/ (A100 datasheet, SXM4 80GB column; 108 SMs: A100 whitepaper)",
    ),
    DeviceSpec(
        "a800-sxm-80gb", "nvidia", "NVIDIA A800-SXM4-80GB", r"A800[- ]SXM4?[- ]80GB", pci_ids=(0x20F3,),
        memory_gib=80, mem_bw_gbs=2039,  # the A100 SXM4 80GB die and memory (A800 = A100 with NVLink cut to 400)
        peak_tflops={"bf16": 312, "int8": 624},
        arch="sm_80", pcie_gen=4, confidence="M",
        nvlink_gbs=200,  # 400 GB/s NVLink bidirectional (hardware.md §4 A800 row: the A800's 400 GB/s NVLink)
        source="A800 SXM4: A100 SXM4 80GB datasheet figures with NVLink 400 GB/s (hardware.md §4 A800 row)",
    ),
    DeviceSpec(
        "h100-pcie", "nvidia", "NVIDIA H100 PCIe", r"H100.*PCIe", pci_ids=(0x2331,),
        memory_gib=80, mem_bw_gbs=2000,  # §4: 80 GB HBM2e, 2.0 TB/s
        peak_tflops={"bf16": 756, "fp8": 1513, "int8": 1513},  # §4
        arch="sm_90", pcie_gen=5, confidence="M", nvlink_gbs=300,  # §4: 600 GB/s bridge (2-way)
        source=f"{_NV_DC}/h100/ (hardware.md §4)",
    ),
    DeviceSpec(
        "h800-pcie", "nvidia", "NVIDIA H800 PCIe", r"H800.*PCIe", pci_ids=(0x2322,),
        memory_gib=80, mem_bw_gbs=2000,  # §4
        peak_tflops={"bf16": 756, "fp8": 1513, "int8": 1513},  # §4
        arch="sm_90", pcie_gen=5, confidence="M", nvlink_gbs=200,  # §4: 400 GB/s bridge
        source="hardware.md §4 H800 PCIe row",
    ),
    DeviceSpec(
        "h20", "nvidia", "NVIDIA H20", r"\bH20\b(?!-3e| HBM3e)", pci_ids=(0x2329,),
        memory_gib=96, mem_bw_gbs=4000,  # §4: 96 GB HBM3, 4.0 TB/s
        peak_tflops={"bf16": 148, "fp8": 296, "int8": 296},  # §4 (willitrunai.com, 1cnz.cn)
        arch="sm_90", pcie_gen=5, confidence="H", nvlink_gbs=450,  # §4: 900 GB/s NVLink4 (HGX)
        source="hardware.md §4 H20 row (willitrunai.com, 1cnz.cn)",
    ),
    DeviceSpec(
        "h200-nvl", "nvidia", "NVIDIA H200 NVL", r"H200 NVL", pci_ids=(0x233B,),
        memory_gib=141, mem_bw_gbs=4800,  # §4: 141 GB HBM3e, 4.8 TB/s
        peak_tflops={"bf16": 835, "fp8": 1671, "int8": 1671},  # §4
        arch="sm_90", pcie_gen=5, confidence="M", nvlink_gbs=450,  # §4: 900 GB/s via 2/4-way bridge
        source=f"{_NV_DC}/h200/ (hardware.md §4)",
    ),
    DeviceSpec(
        "h200-sxm", "nvidia", "NVIDIA H200", r"\bH200\b", pci_ids=(0x2335,),
        memory_gib=141, mem_bw_gbs=4800,  # §4: 141 GB HBM3e, 4.8 TB/s
        peak_tflops={"bf16": 989, "fp8": 1979, "int8": 1979},  # §4 (dense = half the sparse datasheet figure)
        arch="sm_90", pcie_gen=5, confidence="H", nvlink_gbs=450,  # §4: 900 GB/s
        source=f"{_NV_DC}/h200/ (hardware.md §4)",
    ),
    DeviceSpec(
        "h100-sxm", "nvidia", "NVIDIA H100 80GB HBM3", r"H100(?!.*(PCIe|NVL))", pci_ids=(0x2330,),
        memory_gib=80, mem_bw_gbs=3350,  # §4: 80 GB HBM3, 3.35 TB/s
        peak_tflops={"bf16": 989, "fp8": 1979, "int8": 1979},  # §4
        arch="sm_90", pcie_gen=5, confidence="H", nvlink_gbs=450,  # §4: 900 GB/s (NV18 via NVSwitch)
        source=f"{_NV_DC}/h100/ (hardware.md §4)",
    ),
    DeviceSpec(
        "b200", "nvidia", "NVIDIA B200", r"\bB200\b", pci_ids=(0x2901,),
        memory_gib=180, mem_bw_gbs=8000,  # §4: 180-192 GB HBM3e, ~8.0 TB/s
        peak_tflops={"bf16": 2250, "fp8": 4500, "int8": 4500, "fp4": 9000},  # §4
        arch="sm_100", pcie_gen=6, confidence="M", nvlink_gbs=900,  # §4: 1.8 TB/s NVLink5
        source="hardware.md §4 B200 row",
    ),
    # ---- domestic accelerators, §3 headline specs (FP16 figures stored as bf16 where BF16 is not listed) ----
    DeviceSpec(
        "ascend-910b", "huawei", "Huawei Ascend 910B", r"910B",
        pci_ids=(0xD802,),  # §3: d802 = 910B (L, not in pci.ids)
        memory_gib=64, mem_bw_gbs=1600,  # §3: 64 GB HBM2e; ~1.6 TB/s (L)
        peak_tflops={"bf16": 280, "int8": 560},  # §3: 280 FP16 (ai.gitee.com, M); INT8 ~2x FP16 (derived)
        arch="ascend910b", pcie_gen=4, confidence="M/L",  # §3: PCIe4 x16; HCCS ~392 GB/s aggregate (L)
        nvlink_gbs=196,  # HCCS per direction: §3's 392 GB/s aggregate / 2 (L)
        source="hardware.md §3 (ai.gitee.com/docs/compute/clusters_gpu/ascend_gpu; boardor.com)",
    ),
    DeviceSpec(
        "ascend-910c", "huawei", "Huawei Ascend 910C", r"910C|910_93", pci_ids=(0xD803,),  # §3: d803 (L)
        memory_gib=128, mem_bw_gbs=3200,  # §3: 128 GB HBM, 3.2 TB/s
        peak_tflops={"bf16": 780},  # §3: ~780-800 FP16 (2 dies), M/L
        arch="ascend910c", pcie_gen=0, confidence="M/L",  # host link not published in §3
        source="hardware.md §3 (dzcnc.com/item/272811; reportify.cn)",
    ),
    DeviceSpec(
        "ascend-310p", "huawei", "Huawei Ascend 310P", r"310P", pci_ids=(0xD500,),  # §3: d500 = 310P (L)
        # Atlas 300I Duo card = two 310P chips sharing 96 GB LPDDR4X at 408 GB/s, 280 TOPS INT8, PCIe 4.0 x16,
        # 150 W (avalanchenoticias.com.br / infogioco.it reports of the Gamers Nexus teardown; accio.com buyer
        # guide: two 48 GB chips): per chip 48 GB, 204 GB/s, 140 TOPS INT8. FP16 = INT8 / 2 is a prior.
        memory_gib=48, mem_bw_gbs=204,
        peak_tflops={"bf16": 70, "int8": 140},
        arch="ascend310p", pcie_gen=4, confidence="M/L",
        source="Atlas 300I Duo press figures (avalanchenoticias.com.br, infogioco.it; accio.com); FP16 prior",
    ),
    DeviceSpec(
        "mlu370-x8", "cambricon", "Cambricon MLU370-X8", r"MLU370-X8",
        memory_gib=48, mem_bw_gbs=614.4,  # §3: 48 GB LPDDR5, 614.4 GB/s
        peak_tflops={"bf16": 96, "int8": 256},  # §3: 96 BF16, 256 INT8
        arch="mlu370", pcie_gen=4, confidence="H",  # §3: PCIe4 x16; MLU-Link 200 GB/s per card
        source="hardware.md §3 (guangxilong.com/c/032129635H022.html; rencaizhenjiang.com)",
    ),
    DeviceSpec(
        "mlu590", "cambricon", "Cambricon MLU590", r"MLU590",
        memory_gib=96, mem_bw_gbs=2700,  # §3: 96 GB (cnmon, H); ~2.7 TB/s (L)
        peak_tflops={"bf16": 314, "int8": 628},  # §3: ~314 FP16, ~628 INT8 (L)
        arch="mlu590", pcie_gen=0, confidence="M/L", source="hardware.md §3 (code-index note, 8x MLU590-M9)",
    ),
    DeviceSpec(
        "mtt-s4000", "moorethreads", "Moore Threads MTT S4000", r"S4000", pci_ids=(0x0323, 0x0327, 0x0328),  # pci.ids
        memory_gib=48, mem_bw_gbs=768,  # §3: 48 GB GDDR6, 768 GB/s
        peak_tflops={"bf16": 98, "int8": 196},  # §3: 98-100 FP16/BF16, 196-200 INT8 (lower bound)
        arch="mtt_s4000", pcie_gen=5, confidence="H",  # §3: PCIe5 x16; MTLink 1.0 240 GB/s
        source="hardware.md §3 (io-tech.fi 2023-12; m.itbear.com.cn 2025-12)",
    ),
    DeviceSpec(
        "mtt-s5000", "moorethreads", "Moore Threads MTT S5000", r"S5000",
        memory_gib=80, mem_bw_gbs=1600,  # §3: 80 GB, 1.6 TB/s; peak precision unstated -> omitted
        peak_tflops={}, arch="mtt_s5000", pcie_gen=0, confidence="M/L", source="hardware.md §3 (rutab.net 2026-02)",
    ),
    DeviceSpec(
        "hygon-k100-ai", "hygon", "Hygon K100-AI", r"K100[_ -]?AI", pci_ids=(0x6211,),  # pci.ids: 6211 K100_AI
        memory_gib=64, mem_bw_gbs=1800,  # §3: 64 GB HBM2e (L); ~1.8 TB/s (L)
        peak_tflops={"bf16": 196, "int8": 392},  # §3: ~196 FP16, ~392 INT8 (L)
        arch="k100_ai", pcie_gen=4, confidence="L", source="hardware.md §3 (memory; L)",  # §3: PCIe4/5
    ),
    DeviceSpec(
        "hygon-z100", "hygon", "Hygon Z100", r"Z100",
        memory_gib=32, mem_bw_gbs=1000,  # §3: 32 GB HBM2; ~1 TB/s (L)
        peak_tflops={"bf16": 32},  # §3: ~32 FP16 (L)
        arch="z100", pcie_gen=4, confidence="L", source="hardware.md §3 (memory; L)",
    ),
    DeviceSpec(
        "metax-c500", "metax", "MetaX C500", r"C500", pci_ids=(0x0A01,),  # pci.ids: 0a01 C500
        memory_gib=64, mem_bw_gbs=1800,  # §3: 64 GB HBM2e (L); ~1.8 TB/s (L)
        peak_tflops={"bf16": 280, "int8": 560},  # §3: ~280 FP16/BF16, ~560 INT8 (L)
        arch="c500", pcie_gen=5, confidence="L", source="hardware.md §3 (memory; vllm-metax platform.py)",
    ),
    DeviceSpec(
        "iluvatar-bi-v150", "iluvatar", "Iluvatar BI-V150", r"BI-V150",
        memory_gib=64, mem_bw_gbs=1600,  # §3: 64 GB HBM2e (L); ~1.6 TB/s (L)
        peak_tflops={"bf16": 192, "int8": 384},  # §3: ~192 FP16, ~384 INT8 (L)
        arch="bi_v150", pcie_gen=4, confidence="L", source="hardware.md §3 (memory; L)",
    ),
    DeviceSpec(
        "iluvatar-mr-v100", "iluvatar", "Iluvatar MR-V100", r"MR-V100",
        memory_gib=32, mem_bw_gbs=800,  # §3: 32 GB (L); ~800 GB/s (L)
        peak_tflops={"bf16": 96, "int8": 192},  # §3: ~96 FP16, ~192 INT8 (L)
        arch="mr_v100", pcie_gen=4, confidence="L", source="hardware.md §3 (memory; L)",
    ),
    DeviceSpec(
        "biren-br100", "biren", "Biren BR100", r"BR100",
        memory_gib=64, mem_bw_gbs=1640,  # §3: 64 GB HBM2e, 1.64 TB/s (Hot Chips 34, L)
        peak_tflops={"bf16": 1024, "int8": 2048},  # §3: vendor "peak" (L)
        arch="br100", pcie_gen=5, confidence="L", source="hardware.md §3 (Hot Chips 34; L)",
    ),
    DeviceSpec(
        "biren-br104", "biren", "Biren BR104", r"BR104",
        memory_gib=32, mem_bw_gbs=819,  # §3: 32 GB HBM2e, 819 GB/s (L)
        peak_tflops={"bf16": 512, "int8": 1024},  # §3 (L)
        arch="br104", pcie_gen=5, confidence="L", source="hardware.md §3 (memory; L)",
    ),
    DeviceSpec(
        "enflame-i20", "enflame", "Enflame i20", r"\bi20\b", pci_ids=(0x8001,),  # pci.ids: 8001 I20
        memory_gib=16, mem_bw_gbs=819,  # §3: 16 GB HBM2e; 819 GB/s (L)
        peak_tflops={"bf16": 128, "int8": 256},  # §3: ~128 FP16, ~256 INT8 (L)
        arch="enflame_i20", pcie_gen=4, confidence="L", source="hardware.md §3 (memory; L)",
    ),
    DeviceSpec(
        "enflame-s60", "enflame", "Enflame S60", r"Enflame.*S60", pci_ids=(0xC035,),  # pci.ids: c035 S60
        memory_gib=48, mem_bw_gbs=0.0,  # §3: 48 GB (L); bandwidth and peaks not published
        peak_tflops={}, arch="enflame_s60", pcie_gen=0, confidence="L", source="hardware.md §3 (memory; L)",
    ),
    DeviceSpec(
        "kunlunxin-r200", "kunlunxin", "Kunlunxin R200", r"R200",
        memory_gib=32, mem_bw_gbs=512,  # §3: 32 GB GDDR6, 512 GB/s (M)
        peak_tflops={"bf16": 128, "int8": 256},  # §3: 128 FP16, 256 INT8 (M)
        arch="kunlun_r200", pcie_gen=4, confidence="M", source="hardware.md §3 (PaddlePaddle hardware list; M)",
    ),
    DeviceSpec(
        "kunlunxin-p800", "kunlunxin", "Kunlunxin P800", r"P800",
        memory_gib=96, mem_bw_gbs=0.0,  # §3: 96 GB (L); the rest not published
        peak_tflops={}, arch="kunlun_p800", pcie_gen=0, confidence="L", source="hardware.md §3 (memory; L)",
    ),
)
# fmt: on

DEVICES_BY_KEY: dict[str, DeviceSpec] = {d.key: d for d in DEVICES}


def find_device(name: str, vendor: str | None = None) -> DeviceSpec | None:
    """The first row whose pattern occurs in `name` (case-insensitive), optionally of one vendor."""
    for spec in DEVICES:
        if (vendor is None or spec.vendor == vendor) and re.search(spec.match, name, re.IGNORECASE):
            return spec
    return None


def find_device_by_pci(vendor_id: int, device_id: int) -> DeviceSpec | None:
    vendor = VENDORS.get(vendor_id)
    if vendor is None:
        return None
    return next((d for d in DEVICES if d.vendor == vendor.name and device_id in d.pci_ids), None)


def vendor_of(vendor_id: int) -> Vendor | None:
    return VENDORS.get(vendor_id)


__all__ = [
    "DEVICES",
    "DEVICES_BY_KEY",
    "VENDORS",
    "DeviceSpec",
    "Vendor",
    "find_device",
    "find_device_by_pci",
    "vendor_of",
]
