"""Kernel times `mi-tune kernels tune-moe` measured, as rates-table points (provenance `probe`).

A tune-moe benchmark (the `.mi-tune.json` beside a tuned config file) times the fused-MoE layer of one shape at
each batch size with its tuned config on the GPU. Each batch becomes a `grouped_moe` OpPoint in the bucket of the
rows one expert got (perf/rates.py reads HardwareProfile.measured.ops per bucket). Pure: the caller reads the file
(kernels/moe_readback.py hardware_with_tuned_moe) and passes the parsed document in.
"""

from __future__ import annotations

from collections.abc import Mapping

from autotune.perf.rates import m_bucket
from autotune.perf.routing import distinct_experts
from autotune.specs.hardware import OpPoint

RATES_DTYPE = {"bf16": "bf16", "fp16": "bf16", "fp8_w8a8": "fp8", "int8_w8a8": "int8"}
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp8_w8a8": 1, "int8_w8a8": 1}
ACTIVATION_BYTES = 2  # bf16 activations in and out, and the bf16 intermediate between the two GEMMs


def moe_tuning_points(benchmark: Mapping) -> tuple[OpPoint, ...]:
    """One grouped_moe point per timed batch of a GPU-timed tune-moe benchmark; none for an interpreter run or a
    dtype the rates table has no class for."""
    shape = benchmark["shape"]
    dtype = shape["dtype"]
    if benchmark.get("device") != "cuda" or dtype not in RATES_DTYPE:
        return ()
    e, n, k, topk = int(shape["E"]), int(shape["N"]), int(shape["K"]), int(shape["topk"])
    points = []
    for batch, row in sorted(benchmark["batches"].items(), key=lambda item: int(item[0])):
        tokens, time_us = int(batch), float(row["time_us"])
        if time_us <= 0:
            continue
        rows = tokens * topk
        # gate+up GEMM (2N outputs over K) and down GEMM (K outputs over N) for every routed row
        flops = 2.0 * rows * 3 * n * k
        weights = distinct_experts(e, min(topk, e), tokens) * 3 * n * k * ELEMENT_BYTES[dtype]
        activations = (2 * tokens * k + rows * 3 * n) * ACTIVATION_BYTES
        points.append(
            OpPoint(
                op_class="grouped_moe",
                dtype=RATES_DTYPE[dtype],
                bucket=m_bucket(rows / e),
                shape=f"tuned fused_moe E={e} N={n} K={k} top-k={topk} tokens={tokens}",
                time_us=time_us,
                tflops=flops / time_us / 1e6,
                gbs=(weights + activations) / time_us / 1e3,
            )
        )
    return tuple(points)
