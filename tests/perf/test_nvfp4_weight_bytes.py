"""NVFP4 weights carry one FP8 E4M3 scale per 16 values (0.5625 B a weight), MXFP4's one E8M0 scale per 32
(0.53125 B): the stored bytes follow the checkpoint format (specs.stored_bytes). Fails on the model before it,
which priced every FP4 weight at MXFP4's figure."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import memory, precision
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import layer_ops
from autotune.specs import PhasePlan, stored_bytes

PCIE = load_preset("rtx-pro-6000-x8")
QWEN3_MOE = load_model("qwen3-235b-a22b")
PHASE = PhasePlan(gpus=(0,))


def _fp4(fmt: str, dense: str = "bf16"):
    """Qwen3-235B-A22B with FP4 routed experts stored as `fmt` (dense layers at `dense`)."""
    return dataclasses.replace(QWEN3_MOE, expert_dtype="fp4", expert_format=fmt, dense_dtype=dense, dense_format=dense)


def test_stored_bytes_by_format():
    assert stored_bytes("fp4", "nvfp4") == 0.5 + 1 / 16
    assert stored_bytes("fp4", "nvfp4_w4a16") == 0.5 + 1 / 16
    assert stored_bytes("fp4", "mxfp4") == 0.5 + 1 / 32
    assert stored_bytes("fp8", "nvfp4") == 1.0  # a format applies to the dtype it stores only
    assert stored_bytes("int4", "int4_awq") == stored_bytes("int4")


def test_nvfp4_experts_stream_their_scales():
    """The routed experts' grouped GEMM reads 0.5625 B a weight for NVFP4, 0.53125 for MXFP4."""
    x = StepInput(decode_seqs=1.0, decode_ctx=1000.0)

    def moe_bytes(fmt: str) -> float:
        spec = _fp4(fmt)
        c = context(spec, PHASE, "vllm", PCIE, (0,))
        return sum(op.nbytes for op in layer_ops(c, spec.layers[0], x) if op.kind == "grouped_moe")

    assert moe_bytes("nvfp4") / moe_bytes("mxfp4") == pytest.approx(0.5625 / 0.53125, rel=1e-3)


def test_nvfp4_checkpoint_size_and_weights_per_gpu():
    nv, mx = _fp4("nvfp4", "fp4"), _fp4("mxfp4")
    nv = dataclasses.replace(nv, dense_format="nvfp4")
    dense_nv, experts_nv = nv.weight_bytes()
    _, experts_mx = mx.weight_bytes()
    assert experts_nv / experts_mx == pytest.approx(0.5625 / 0.53125)
    assert dense_nv == pytest.approx((nv.total_params - experts_nv / 0.5625) * 0.5625)
    assert precision.expert_weight_bytes(nv, PHASE) == 0.5625
    assert precision.dense_weight_bytes(nv, PHASE) == 0.5625
    assert memory.weights_per_gpu_bytes(nv, PHASE, "vllm") > memory.weights_per_gpu_bytes(
        dataclasses.replace(nv, expert_format="mxfp4", dense_format="mxfp4"), PHASE, "vllm"
    )
