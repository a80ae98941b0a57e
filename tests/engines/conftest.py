"""A small 8-GPU, 2-socket PCIe box and three tiny models (dense GQA, MoE GQA, MoE MLA) built from the contracts."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.specs import (
    Accelerator,
    AttentionSpec,
    Features,
    FfnSpec,
    HardwareProfile,
    HostInfo,
    LayerSpec,
    ModelSpec,
)

NUM_GPUS = 8
GPUS_PER_SOCKET = 4


def _link(i: int, j: int) -> str:
    if i == j:
        return "X"
    return "NODE" if i // GPUS_PER_SOCKET == j // GPUS_PER_SOCKET else "SYS"


@pytest.fixture(scope="session")
def box() -> HardwareProfile:
    features = Features(bf16=True, fp8=True, fp4=False, int8=True, collective_library="nccl")
    gpus = tuple(
        Accelerator(
            index=i,
            vendor="nvidia",
            name="NVIDIA L40S",
            pci_bdf=f"0000:{0x10 + i:02x}:00.0",
            memory_gib=48.0,
            mem_bw_gbs=864.0,
            peak_tflops={"bf16": 362.0, "fp8": 733.0},
            arch="sm_89",
            numa_node=i // GPUS_PER_SOCKET,
            pcie_gen=4,
            pcie_width=16,
            features=features,
        )
        for i in range(NUM_GPUS)
    )
    return HardwareProfile(
        name="test-8xl40s",
        source="file",
        host=HostInfo(cpu_model="test cpu", sockets=2, cores=64, numa_nodes=2, memory_gib=512.0),
        accelerators=gpus,
        links=tuple(tuple(_link(i, j) for j in range(NUM_GPUS)) for i in range(NUM_GPUS)),
        p2p=tuple(tuple(i != j for j in range(NUM_GPUS)) for i in range(NUM_GPUS)),
    )


@pytest.fixture(scope="session")
def nvlink_box(box) -> HardwareProfile:
    """The same 8 GPUs as Hopper (sm_90) with NVLink between every pair: where DeepEP, DBO and the
    FlashInfer all-reduce fusion are admitted by the engines' rules."""
    gpus = tuple(
        dataclasses.replace(g, name="NVIDIA H100 80GB HBM3", arch="sm_90", nvlink_gbs=450.0) for g in box.accelerators
    )
    links = tuple(tuple("X" if i == j else "NV18" for j in range(NUM_GPUS)) for i in range(NUM_GPUS))
    return dataclasses.replace(box, name="test-8xh100", accelerators=gpus, links=links)


def _model(name: str, hf_id: str, attention: AttentionSpec, ffn: FfnSpec, dense_dtype: str = "bf16") -> ModelSpec:
    return ModelSpec(
        name=name,
        family="qwen3_moe" if ffn.kind == "moe" else "llama",  # families the engines' rules know
        hf_id=hf_id,
        hidden_size=1024,
        vocab_size=32000,
        max_position=8192,
        layers=tuple(LayerSpec(index=i, attention=attention, ffn=ffn) for i in range(2)),
        embed_params=32000 * 1024,
        dense_dtype=dense_dtype,
        expert_dtype=dense_dtype,
        kv_dtype="bf16",
    )


GQA = AttentionSpec(
    kind="gqa", num_heads=16, num_kv_heads=4, params=4_000_000, score_dim=128, kv_elems_per_token=512,
    kv_read_elems_per_token=512,
)  # fmt: skip
MLA = AttentionSpec(
    kind="mla", num_heads=16, num_kv_heads=1, params=6_000_000, score_dim=192, kv_elems_per_token=576,
    kv_read_elems_per_token=576, latent_shared=True,
)  # fmt: skip
DENSE_FFN = FfnSpec(kind="dense", params=12_000_000)
MOE_FFN = FfnSpec(kind="moe", params=0, num_experts=64, experts_per_token=8, expert_params=1_500_000)


@pytest.fixture(scope="session")
def dense_model() -> ModelSpec:
    return _model("tiny-dense", "test-org/tiny-dense", GQA, DENSE_FFN)


@pytest.fixture(scope="session")
def moe_model() -> ModelSpec:
    return _model("tiny-moe", "test-org/tiny-moe", GQA, MOE_FFN)


@pytest.fixture(scope="session")
def mla_model() -> ModelSpec:
    return _model("tiny-mla", "test-org/tiny-mla", MLA, MOE_FFN)


@pytest.fixture(scope="session")
def fp8_model() -> ModelSpec:
    return _model("tiny-fp8", "test-org/tiny-fp8", GQA, DENSE_FFN, dense_dtype="fp8")
