"""Predicted vs measured, side by side, for the public measurements in shared/reference/calibration.yaml
that the model can express. Run: `.venv/bin/python tests/bench/calibration_check.py`.

Measured rows are TensorRT-LLM offline max-throughput runs (FP4/FP8 checkpoints) and nccl-tests; the model
predicts vLLM with FP8 weights at the engine's batch limits, so ratios show the model's bias, not a fit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autotune.api import restrict_gpus
from autotune.catalog import load_model, load_preset
from autotune.perf import comm, predict
from autotune.specs import Batching, Kernels, PhasePlan, Plan, Workload

FIXTURES = Path(__file__).parents[1] / "fixtures"
FP8 = Kernels(gemm_dtype="fp8", kv_cache_dtype="fp8")
OFFLINE = Batching(max_running=1024, chunked_prefill_tokens=8192)


def agg(n: int, **layout) -> Plan:
    phase = PhasePlan(gpus=tuple(range(n)), kernels=FP8, batching=OFFLINE, **layout)
    return Plan("vllm", "aggregated", {"both": phase})


def dep(n: int, pp: int = 1) -> dict:
    return dict(tp=1, dp=n, ep=n, pp=pp, dp_attention=n > 1)


# (label, model, preset, gpus, plan layout, isl, osl, measured output tok/s/GPU, calibration id)
CASES = [
    (
        "Qwen3-30B-A3B TP1",
        "qwen3-30b",
        "rtx-pro-6000-x8",
        1,
        dict(tp=1),
        1000,
        1000,
        9938,
        "pcie-trtllm-qwen3-30b-a3b-fp4-rtx6000pro",
    ),
    ("Qwen3-30B-A3B DEP2", "qwen3-30b", "rtx-pro-6000-x8", 2, dep(2), 1000, 1000, 8409, "same"),
    ("Qwen3-30B-A3B DEP2 PP2", "qwen3-30b", "rtx-pro-6000-x8", 4, dep(2, pp=2), 1000, 1000, 7059, "same"),
    ("Qwen3-30B-A3B DEP8", "qwen3-30b", "rtx-pro-6000-x8", 8, dep(8), 1000, 1000, 3985, "same"),
    ("Qwen3-30B-A3B TP1 8k/1k", "qwen3-30b", "rtx-pro-6000-x8", 1, dict(tp=1), 8192, 1024, 1914, "same"),
    (
        "Llama-70B TP1",
        "llama-3.1-70b",
        "rtx-pro-6000-x8",
        1,
        dict(tp=1),
        1000,
        1000,
        1724,
        "pcie-trtllm-llama33-70b-fp4-rtx6000pro",
    ),
    ("Llama-70B PP2", "llama-3.1-70b", "rtx-pro-6000-x8", 2, dict(tp=1, pp=2), 1000, 1000, 1901, "same"),
    ("Llama-70B PP2 8k/1k", "llama-3.1-70b", "rtx-pro-6000-x8", 2, dict(tp=1, pp=2), 8192, 1024, 327, "same"),
    (
        "DeepSeek-V3 DEP8 8xH200",
        "deepseek-v3",
        "h200-x8",
        8,
        dep(8),
        1000,
        1000,
        1627,
        "nvl-trtllm-deepseek-r1-fp8-8xh200",
    ),
]


def model_of(name: str):
    return load_model(str(FIXTURES / "qwen3-30b-a3b" / "config.json")) if name == "qwen3-30b" else load_model(name)


def serving_rows() -> list[tuple]:
    rows = []
    for label, model, preset, gpus, layout, isl, osl, measured, source in CASES:
        hw = restrict_gpus(load_preset(preset), gpus)
        p = predict(agg(gpus, **layout), model_of(model), hw, Workload(isl=isl, osl=osl))
        value = p.output_tok_s_per_gpu if p.feasible else float("nan")
        rows.append((label, f"{isl}/{osl}", measured, value, value / measured, p.reason or source))
    return rows


def allreduce_rows() -> list[tuple]:
    hw = dataclasses.replace(load_preset("rtx-pro-6000-x8"), measured=None)  # the model, not the recorded curve
    rows = []
    for size in (256, 32 << 20, 512 << 20):
        seconds = comm.all_reduce_s(hw, tuple(range(8)), size)
        busbw = size * 2 * 7 / 8 / seconds / 1e9
        rows.append((size, seconds * 1e6, busbw))
    return rows


def main() -> None:
    print(f"{'case':28} {'isl/osl':>9} {'measured':>9} {'predicted':>10} {'ratio':>6}  source")
    for label, lengths, measured, predicted, ratio, source in serving_rows():
        print(f"{label:28} {lengths:>9} {measured:>9,} {predicted:>10,.0f} {ratio:>6.2f}  {source}")
    print("\n8-GPU PCIe all-reduce, rtx-pro-6000-x8 topology (pcie-rtx6kpro-nccl-allreduce-8gpu: small messages")
    print("24-25 us; busbw 37.6-41.1 GB/s at 8 MB-2 GB with tuned channels, 22.2 GB/s at 32 MB with defaults)")
    for size, micros, busbw in allreduce_rows():
        print(f"  {size:>11,} B: {micros:10.1f} us, busbw {busbw:5.1f} GB/s")


if __name__ == "__main__":
    main()
