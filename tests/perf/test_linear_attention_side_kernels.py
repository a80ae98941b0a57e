"""A Gated DeltaNet layer runs two kernels besides its recurrent step / chunked scan: the short convolution over
the q / k / v channels (causal_conv1d_update / causal_conv1d_fn) and the gated RMSNorm of the output with the z
gate (vLLM layers/mamba/gdn/qwen_gdn_linear_attn.py:2287-2309, :1256; SGLang gdn_backend.py:855,
qwen3_next.py:500). The op list carries both, each one launch, with the bytes they move."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import costing, linear_attention, oplist, rates
from autotune.perf.opcore import StepInput, context
from autotune.specs import PhasePlan

MODEL = "qwen3.5-35b-a3b"


def _gdn_layer():
    m = load_model(MODEL)
    return m, next(layer for layer in m.layers if layer.attention.kind == "gdn")


def _ctx(m, tp: int = 1):
    hw = load_preset("rtx-pro-6000-x8")
    return context(m, PhasePlan(gpus=tuple(range(tp)), tp=tp), "vllm", hw, tuple(range(tp)))


def _text_config() -> dict:
    config = json.loads((files("autotune.catalog") / "models" / f"{MODEL}.json").read_text())
    return config.get("text_config", config)


@pytest.mark.parametrize("x", [StepInput(decode_seqs=8, decode_ctx=100), StepInput(prefill_tokens=512)])
def test_gdn_layer_runs_conv_and_gated_norm(x):
    m, layer = _gdn_layer()
    ops = oplist.attention_ops(_ctx(m), layer.attention, x)
    conv = [op for op in ops if op.source == "linear attention conv"]
    norm = [op for op in ops if op.source == "linear attention gated norm"]
    assert len(conv) == 1 and conv[0].kind == "elementwise" and conv[0].count == 1
    assert len(norm) == 1 and norm[0].kind == "norm" and norm[0].count == 1


def test_full_attention_layer_has_no_linear_side_kernels():
    m = load_model(MODEL)
    layer = next(layer for layer in m.layers if not layer.attention.is_linear)
    ops = oplist.attention_ops(_ctx(m), layer.attention, StepInput(decode_seqs=8, decode_ctx=100))
    assert not [op for op in ops if op.source.startswith("linear attention")]


def test_side_kernel_bytes_follow_the_channels():
    """One prompt token on one rank: the convolution reads and writes the q / k / v channels of the config
    (2 x key heads x d_k + value heads x d_v), the gated norm reads the output and z and writes the output
    (3 x value heads x d_v), bf16; a decoding sequence also reads and writes its convolution window."""
    cfg = _text_config()
    _, layer = _gdn_layer()
    att = layer.attention
    channels = 2 * cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
    channels += cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
    out = cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
    conv, norm = linear_attention.side_kernel_bytes(att, 1.0, 0.0, 1)
    assert conv == pytest.approx(2 * channels * 2)
    assert norm == pytest.approx(3 * out * 2)
    window = (cfg["linear_conv_kernel_dim"] - 1) * channels * 2 * 2
    conv_decode, _ = linear_attention.side_kernel_bytes(att, 1.0, 1.0, 1)
    assert conv_decode == pytest.approx(conv + window)
    conv_tp, norm_tp = linear_attention.side_kernel_bytes(att, 1.0, 1.0, 2)
    assert conv_tp == pytest.approx(conv_decode / 2) and norm_tp == pytest.approx(norm / 2)


def test_one_token_decode_pays_both_kernel_floors():
    """At one decoding sequence the two kernels are launch bound: the layer's attention half costs at least
    the recurrent step plus the elementwise and norm floors (rates.MIN_US)."""
    m, layer = _gdn_layer()
    c = _ctx(m)
    ops = oplist.attention_ops(c, layer.attention, StepInput(decode_seqs=1, decode_ctx=10))
    side = [op for op in ops if op.source in ("linear attention conv", "linear attention gated norm")]
    side_s = costing.cost_ops(c, side).time_s
    assert side_s >= (rates.MIN_US["elementwise"] + rates.MIN_US["norm"]) * 1e-6 * 0.999
