"""A gated MLP (a dense FFN, or a MoE layer's shared experts) runs three kernels, not two: gate_up, the SiLU-and-mul
between them, down (vLLM 0.34 models/llama.py:118-122 through maybe_fused_act_quant, layers/fusion/
fused_act_quant.py:196-213, which quantises down's input in the same kernel where it can; SGLang models/
deepseek_v2.py DeepseekV2MLP.forward). The op list before had the GEMM pair and the quant kernels only: no kernel
read the gate and up outputs or wrote the activation. Each test fails on that model."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import opcore, precision, rates
from autotune.perf.oplist import ffn_kernel_ops
from autotune.perf.ops import cost_ops
from autotune.specs import PhasePlan
from tests.perf.boxes import b200_box

H200 = load_preset("h200-x8")
LLAMA70 = load_model("llama-3.1-70b")
R1 = load_model("deepseek-v3")


def _activation(c, ffn, tokens):
    return [op for op in ffn_kernel_ops(c, ffn, tokens) if op.source == "ffn activation"]


def _intermediate(model) -> float:
    """The MLP's intermediate width from the catalog config: params = 3 x hidden x I (gate, up, down)."""
    ffn = model.layers[0].ffn
    return ffn.params / model.hidden_size / 3


def test_dense_mlp_has_one_activation_kernel_reading_gate_and_up():
    """Llama-3.1-70B (I = 28672) at TP4: each rank's 7168-wide slice; 1,024 rows read 2 x 7168 bf16 and write 7168."""
    c = opcore.context(LLAMA70, PhasePlan(gpus=(0, 1, 2, 3), tp=4), "vllm", H200, (0, 1, 2, 3))
    (act,) = _activation(c, LLAMA70.layers[0].ffn, 1024.0)
    per_rank = _intermediate(LLAMA70) / 4
    assert per_rank == 7168
    assert act.kind == "elementwise" and act.count == 1
    assert act.nbytes == pytest.approx(1024 * per_rank * (2 + 2 + 2))


def test_activation_costs_at_least_an_elementwise_kernel_and_grows_with_rows():
    """At one row the kernel is its minimum time; at 8,192 rows it streams ~0.35 GB (TP4) and costs more."""
    c = opcore.context(LLAMA70, PhasePlan(gpus=(0, 1, 2, 3), tp=4), "vllm", H200, (0, 1, 2, 3))
    ffn = LLAMA70.layers[0].ffn
    one = cost_ops(c, _activation(c, ffn, 1.0)).time_s
    many = cost_ops(c, _activation(c, ffn, 8192.0)).time_s
    assert one >= rates.MIN_US["elementwise"] * 1e-6 * (1 - 1e-9)
    assert many > 10 * one


def test_moe_shared_experts_get_it_too():
    """DeepSeek-V3's MoE layers: one shared expert (I = 2048), TP8: 256 wide per rank."""
    moe = next(layer.ffn for layer in R1.layers if layer.ffn.kind == "moe")
    c = opcore.context(R1, PhasePlan(gpus=tuple(range(8)), tp=8), "sglang", H200, tuple(range(8)))
    (act,) = _activation(c, moe, 4.0)
    assert act.nbytes == pytest.approx(4 * (moe.params / R1.hidden_size / 3 / 8) * 6)


def test_nvfp4_activation_writes_the_quantised_input_of_down():
    """NVFP4 on sm_100 (vLLM): down's input quant is fused into the activation (precision.standalone_quants leaves
    one quant kernel of two), so the activation writes 4-bit values and their scales, not bf16."""
    model = dataclasses.replace(LLAMA70, dense_dtype="fp4", dense_format="nvfp4")
    c = opcore.context(model, PhasePlan(gpus=(0,)), "vllm", b200_box(), (0,))
    (act,) = _activation(c, model.layers[0].ffn, 16.0)
    assert precision.standalone_quants("fp4", "nvfp4", 2) == 1
    assert act.nbytes == pytest.approx(16 * _intermediate(model) * (4 + c.dense_quant_bytes))
    assert c.dense_quant_bytes < precision.ACTIVATION_BYTES
