"""Activation quantisation by checkpoint format (precision.act_quant_bytes): fails on the model before it."""

from __future__ import annotations

import dataclasses

from autotune.catalog import load_model, load_preset
from autotune.perf import precision
from autotune.perf.opcore import context
from autotune.perf.oplist import linear_ops
from autotune.specs import PhasePlan

PCIE = load_preset("rtx-pro-6000-x8")  # sm_120: FP4 tensor cores
LLAMA70 = load_model("llama-3.1-70b")


def _quant_ops(fmt: str):
    spec = dataclasses.replace(LLAMA70, dense_dtype="fp4", dense_format=fmt)
    c = context(spec, PhasePlan(gpus=(0,)), "vllm", PCIE, (0,))
    assert c.dense_dtype == "fp4"
    return [op for op in linear_ops(c, 256, 8192, 8192, "t") if op.kind == "quant"]


def test_nvfp4_linear_quantises_its_input_mxfp4_does_not():
    """NVFP4 is W4A4: vLLM runs scaled_fp4_quant in front of every NVFP4 linear; MXFP4 is weight-only (W4A16)."""
    (quant,) = _quant_ops("nvfp4")
    assert quant.nbytes == 256 * (8192 * (2 + 0.5 + 1 / 16) + 4)  # bf16 in, 4-bit + an FP8 scale per 16 out
    assert not _quant_ops("mxfp4")


def test_act_quant_bytes_by_format():
    assert precision.act_quant_bytes("fp8", "fp8_block") == 1.0
    assert precision.act_quant_bytes("fp4", "nvfp4") == 0.5625
    assert precision.act_quant_bytes("fp4", "mxfp4") == 0.0
    assert precision.act_quant_bytes("bf16", "int4_awq") == 0.0


def test_nvfp4_layers_quantise_one_input_per_gemm_pair_under_vllm_fusions():
    """vLLM -O2 fuses the NVFP4 quant of o_proj's and down's inputs into the attention output and SiLU-and-mul;
    qkv's and gate_up's inputs keep a kernel each. FP8 keeps two per pair."""
    from autotune.perf.oplist import layer_ops
    from autotune.perf.ops import StepInput

    x = StepInput(decode_seqs=64, decode_ctx=1000)
    nvfp4 = dataclasses.replace(LLAMA70, dense_dtype="fp4", dense_format="nvfp4")
    c = context(nvfp4, PhasePlan(gpus=(0,)), "vllm", PCIE, (0,))
    assert [op.count for op in layer_ops(c, nvfp4.layers[0], x) if op.kind == "quant"] == [1, 1]
    fp8 = dataclasses.replace(LLAMA70, dense_dtype="fp8", dense_format="fp8_tensor")
    c8 = context(fp8, PhasePlan(gpus=(0,)), "vllm", PCIE, (0,))
    assert [op.count for op in layer_ops(c8, fp8.layers[0], x) if op.kind == "quant"] == [2, 2]


def test_w4a16_nvfp4_computes_in_bf16_without_activation_quant():
    """ModelOpt W4A16_NVFP4 (MIXED_PRECISION checkpoints) is weight-only: FP4 weights streamed at 4 bits, bf16
    tensor cores, no scaled_fp4_quant in front (vLLM modelopt.py:771), unlike NVFP4 W4A4 on the same chip."""
    spec = dataclasses.replace(LLAMA70, dense_dtype="fp4", dense_format="nvfp4_w4a16")
    c = context(spec, PhasePlan(gpus=(0,)), "vllm", PCIE, (0,))
    assert c.dense_dtype == "bf16" and c.dense_quant_bytes == 0.0
    gemm = [op for op in linear_ops(c, 256, 8192, 8192, "t") if op.kind == "gemm"]
    assert gemm and all(op.dtype == "bf16" for op in gemm)
    w4a4 = context(dataclasses.replace(LLAMA70, dense_dtype="fp4", dense_format="nvfp4"), PhasePlan(gpus=(0,)),
                   "vllm", PCIE, (0,))  # fmt: skip
    assert w4a4.dense_dtype == "fp4" and c.dense_bytes == w4a4.dense_bytes  # same 4-bit weights streamed
