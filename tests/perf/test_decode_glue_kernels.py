"""Two kernels every GQA decoder layer launches besides its GEMMs, attention and norms: RoPE on q and k after the
QKV projection (vLLM 0.34 runs it apart from the KV-cache write on CUDA, config/compilation.py:358-363; SGLang
srt/models/qwen3.py:256-268), and the gated FFN's SiluAndMul between gate_up and down where no activation quant
follows (bf16 and weight-only 4-bit: vLLM layers/activation.py SiluAndMul, SGLang sgl_kernel silu_and_mul). At one
request each costs at least the elementwise floor, the per-layer fixed time that weighs most on 4-bit decode."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from autotune.catalog import load_model, load_preset
from autotune.catalog.models import model_from_config
from autotune.perf import oplist
from autotune.perf.opcore import StepInput, context
from autotune.specs import PhasePlan
from tests.perf.qwen3_dense import AWQ, qwen3_8b

ONE = StepInput(decode_seqs=1, decode_ctx=300)


def _ctx(m, tp: int = 1):
    return context(m, PhasePlan(gpus=tuple(range(tp)), tp=tp), "vllm", load_preset("rtx-pro-6000-x8"), tuple(range(tp)))


@pytest.mark.parametrize("quant", [None, AWQ])
def test_dense_ffn_runs_its_activation(tmp_path, quant):
    """bf16 and AWQ (W4A16, Marlin) FFNs: one activation kernel reading gate_up's output (2 x intermediate per
    row) and writing intermediate, bf16; 12288 intermediate on Qwen3-8B."""
    m = qwen3_8b(tmp_path, quant)
    ops = oplist.ffn_kernel_ops(_ctx(m), m.layers[0].ffn, 4.0)
    act = [op for op in ops if op.source == "ffn activation"]
    assert len(act) == 1 and act[0].kind == "elementwise" and act[0].count == 1
    assert act[0].nbytes == pytest.approx(4 * 12288 * 3 * 2)


def test_activation_splits_with_tp(tmp_path):
    m = qwen3_8b(tmp_path)
    one, four = (oplist.ffn_kernel_ops(_ctx(m, tp), m.layers[0].ffn, 4.0) for tp in (1, 4))
    act1, act4 = ([op for op in ops if op.source == "ffn activation"][0] for ops in (one, four))
    assert act4.nbytes == pytest.approx(act1.nbytes / 4)


def test_fp8_ffn_keeps_its_quant_op_without_a_second_activation(tmp_path):
    """Where the down projection's input is quantised (per-tensor FP8 here), the standalone quant op stands as
    before and no separate activation op is added."""
    config = json.loads((files("autotune.catalog") / "models" / "llama-3.1-70b.json").read_text())
    config = {k: v for k, v in config.items() if k != "_mi_tune"} | {"quantization_config": {"quant_method": "fp8"}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    m = model_from_config(path)
    ops = oplist.ffn_kernel_ops(_ctx(m), m.layers[0].ffn, 4.0)
    assert [op for op in ops if op.kind == "quant"]
    assert not [op for op in ops if op.source == "ffn activation"]


def test_gqa_layer_runs_rope_once(tmp_path):
    """q (32 heads) and k (8 KV heads) of head dim 128, read and written once: 40 x 128 x 2 x 2 B per row."""
    m = qwen3_8b(tmp_path)
    ops = oplist.attention_ops(_ctx(m), m.layers[0].attention, ONE)
    rope = [op for op in ops if op.source == "rope"]
    assert len(rope) == 1 and rope[0].kind == "elementwise"
    assert rope[0].nbytes == pytest.approx(40 * 128 * 2 * 2)


def test_mla_layer_has_no_gqa_rope():
    m = load_model("deepseek-v3")
    ops = oplist.attention_ops(_ctx(m, 8), m.layers[0].attention, ONE)
    assert not [op for op in ops if op.source == "rope"]
