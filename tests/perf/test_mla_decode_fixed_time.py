"""FlashInfer's sm_90 MLA decode (SGLang's flashinfer MLA backend) is one cooperative launch that splits the KV, meets
at a grid-wide barrier and merges the partials (flashinfer include/flashinfer/attention/mla_hopper.cuh); on an H200
a call of almost no work takes 14.87 us (calibration.yaml kernel-flashinfer-mla-sm90-h200: 2 sequences x 1,024 keys,
128 heads), where the op list charged the 6 us attention floor. The op list now adds the kernel's fixed time beyond
the floor as a zero-work wave term (tiles.MLA_DECODE_FIXED_US; not a launch). Fails on the model before sgmla28."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import rates, tiles
from autotune.perf.eager_host import op_launches
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import cost_ops
from autotune.specs import Kernels, PhasePlan

H200 = load_preset("h200-x8")
DSV3 = dataclasses.replace(load_model("deepseek-v3"), dense_dtype="bf16")
SOURCE = "kernels.attention (MLA decode fixed time)"


def _attention(kernel: str, x: StepInput, hw=H200):
    c = context(DSV3, PhasePlan(gpus=(0,), kernels=Kernels(attention=kernel, kv_cache_dtype="auto")), "sglang", hw,
                (0,))  # fmt: skip
    return c, [op for op in attention_ops(c, DSV3.layers[-1].attention, x) if op.kind == "attention"]


def _b200():
    from autotune.catalog.devices import DEVICES_BY_KEY

    spec = DEVICES_BY_KEY["b200"]
    gpus = tuple(dataclasses.replace(a, name=spec.name, arch=spec.arch) for a in H200.accelerators)
    return dataclasses.replace(H200, accelerators=gpus)


def test_flashinfer_mla_decode_on_hopper_pays_its_fixed_time():
    """A near-empty call (2 x 1,024 keys) costs at least the kernel's fixed time, not the 6 us floor plus ~1 us; the
    fixed-time term adds no launch (one cooperative kernel)."""
    c, ops = _attention("flashinfer", StepInput(decode_seqs=2, decode_ctx=1024))
    fixed = [op for op in ops if op.source == SOURCE]
    assert len(fixed) == 1 and fixed[0].bucket == "wave" and not fixed[0].nbytes
    assert fixed[0].count == pytest.approx((tiles.MLA_DECODE_FIXED_US[("flashinfer", "sm_90")]
                                            - rates.MIN_US["attention"]) / tiles.CTA_FIXED_US)  # fmt: skip
    assert cost_ops(c, ops).time_s * 1e6 >= tiles.MLA_DECODE_FIXED_US[("flashinfer", "sm_90")]
    assert op_launches(ops) == 1.0


@pytest.mark.parametrize("kernel", ["auto", "triton"])
def test_other_kernels_keep_the_floor(kernel):
    """FA3 (the sm_90 default) and Triton MLA have no public small-shape figure: no fixed-time term."""
    _, ops = _attention(kernel, StepInput(decode_seqs=2, decode_ctx=1024))
    assert not [op for op in ops if op.source == SOURCE]


def test_flashinfer_on_blackwell_keeps_the_floor():
    """The figure is FlashInfer's sm_90 template; sm_100 runs another kernel."""
    _, ops = _attention("flashinfer", StepInput(decode_seqs=2, decode_ctx=1024), _b200())
    assert not [op for op in ops if op.source == SOURCE]


def test_fixed_time_matters_less_as_the_work_grows():
    """At 64 x 32,768 keys the term (13.9 us less one kernel's 3 us floor) is ~1.1% of the ~1 ms call: the kernel's
    work, not its fixed time, sets it."""
    c, ops = _attention("flashinfer", StepInput(decode_seqs=64, decode_ctx=32768))
    fixed = cost_ops(c, [op for op in ops if op.source == SOURCE]).time_s
    assert fixed / cost_ops(c, ops).time_s < 0.015


def test_sparse_mla_layer_keeps_the_floor():
    """A DSA layer (GLM-5.3: an indexer, sparse attended set) runs another kernel than the dense MLA one timed."""
    glm = load_model("glm-5.3")
    att = next(layer.attention for layer in glm.layers if layer.attention.index_heads)
    c = context(glm, PhasePlan(gpus=(0,), kernels=Kernels(attention="flashinfer")), "sglang", H200, (0,))
    ops = attention_ops(c, att, StepInput(decode_seqs=2, decode_ctx=1024))
    assert not [op for op in ops if op.source == SOURCE]
