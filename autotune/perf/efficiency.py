"""Calibrated defaults: how close real kernels and collectives get to the datasheet.

Every figure here is a prior that a probe measurement (`HardwareProfile.measured`) replaces. Where a
public measurement backs it, the comment names the entry in shared/reference/calibration.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.specs import HardwareProfile


@dataclass(frozen=True)
class Efficiency:
    gemm_compute: float  # large GEMM, fraction of dense peak
    gemm_memory: float  # weight-streaming (small-M) GEMM, fraction of HBM bandwidth
    attention_compute: float  # prefill attention, fraction of dense peak
    attention_memory: float  # decode attention, fraction of HBM bandwidth


# kernel-l20-hgemm-cublas: cuBLAS reaches 0.88-0.96 of peak on large FP16 GEMMs; serving shapes are
# smaller and ragged (MoE), so 0.75 is used. kernel-flashmla-h800-decode: FlashMLA reaches ~0.90 of HBM
# bandwidth when memory bound and ~0.67 of dense peak when compute bound.
DEFAULT_EFFICIENCY = Efficiency(gemm_compute=0.75, gemm_memory=0.80, attention_compute=0.60, attention_memory=0.85)

# Relative speed of kernel variants against the engine's auto choice (1.0). Priors, not measurements:
# `mi-tune kernels bench` and measured trials are the way to replace them.
ATTENTION_VARIANT_SPEED = {"auto": 1.0, "flashinfer": 1.0, "triton": 0.85}
MOE_VARIANT_SPEED = {"auto": 1.0, "cutlass": 1.0, "deep_gemm": 1.1, "triton": 0.85, "marlin": 0.7}

# PCIe: usable fraction of raw lane bandwidth for NCCL rings. pcie-rtx6kpro-nccl-allreduce-8gpu:
# 8x RTX PRO 6000 Gen5 all_reduce busbw 37.6-41.1 GB/s against 63 GB/s raw -> 0.62.
PCIE_COLLECTIVE_EFFICIENCY = 0.62
# Point-to-point DMA: hardware.md 5.1, Gen4 24-26 / 31.5, Gen5 50-55 / 63 GB/s -> 0.82.
PCIE_COPY_EFFICIENCY = 0.82
# P2P impossible in hardware (GeForce): NCCL goes through host shared memory. tinygrad open-gpu-kernel-modules#44:
# 4090 P2P-disabled copy 6.3 GB/s against 31.5 raw -> 0.2.
SHM_EFFICIENCY = 0.20
# NVLink: NCCL all_reduce busbw ~360 of 450 GB/s per direction on H100/H200 SXM class.
NVLINK_COLLECTIVE_EFFICIENCY = 0.80

# NCCL latency (per protocol and ring step), protocols, P2P level, channels, PCIe-IPC: perf/comm_rates.py.
# pcie-rtx6kpro: custom one-shot PCIe all-reduce 7.5 us at 256 B - 1 KB.
CUSTOM_ALLREDUCE_LATENCY_US = 7.5

# Per-step CPU/launch overhead per engine, ms (scheduler + sampling + graph replay), and per-layer
# launch cost outside CUDA graphs (prefill), us. Priors from the engines' overlap-scheduler design:
# SGLang overlaps scheduling with the GPU step; vLLM's async scheduling does the same by default in 0.34.
STEP_OVERHEAD_MS = {"sglang": 0.4, "vllm": 0.5}
PREFILL_LAUNCH_US_PER_LAYER = 30.0
DECODE_LAUNCH_US_PER_LAYER = 3.0  # CUDA-graph replay

# MoE expert parallel: the most loaded rank gets this much more than the mean (no EPLB).
EP_IMBALANCE = 1.15


def efficiency(hw: HardwareProfile) -> Efficiency:
    return DEFAULT_EFFICIENCY


def peak_tflops(hw: HardwareProfile, dtype: str) -> float:
    """Achievable large-GEMM TFLOPS for `dtype` on one GPU: measured if probed, else peak x efficiency."""
    measured = hw.measured.gemm_tflops.get(dtype, 0.0) if hw.measured else 0.0
    if measured:
        return measured
    peaks = hw.gpu.peak_tflops
    peak = peaks.get(dtype) or peaks.get("bf16", 0.0)
    return peak * efficiency(hw).gemm_compute


def mem_bw_gbs(hw: HardwareProfile) -> float:
    """Achievable HBM/GDDR bandwidth of one GPU, GB/s."""
    if hw.measured and hw.measured.mem_bw_gbs:
        return hw.measured.mem_bw_gbs
    return hw.gpu.mem_bw_gbs * efficiency(hw).gemm_memory
