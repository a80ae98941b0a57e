"""A weight-only INT4 checkpoint's dense GEMMs (AWQ / GPTQ on Marlin) stream their weights at most SMs x
rates.MARLIN_DENSE_PER_SM_STREAM_GBS (calibration.yaml kernel-marlin-dense-w4a16-h100-humming2 / -h200-tileops:
26.95 us on an H100 and ~21.8 us on an H200 at m=1, n=k=8192, where 0.80 of the HBM would take 12-16 us). The cap
binds on HBM parts, not on GDDR ones, and leaves bf16 GEMMs (the same rates-table entry's) alone."""

from __future__ import annotations

import pytest

from autotune.catalog import load_preset
from autotune.inputs import restrict_gpus
from autotune.perf import oplist, rates
from autotune.perf.opcore import DENSE_W4A16, StepInput, context
from autotune.perf.ops import cost_ops
from autotune.specs import PhasePlan
from tests.perf.qwen3_dense import AWQ, qwen3_8b


def _probe_us(m, preset: str, engine: str = "vllm") -> tuple[float, object]:
    hw = restrict_gpus(load_preset(preset), 1)
    c = context(m, PhasePlan(gpus=(0,)), engine, hw, (0,))
    return cost_ops(c, oplist.linear_ops(c, 1, 8192, 8192, "probe")).time_s * 1e6, c


def test_hopper_w4a16_gemm_streams_at_the_sm_cap(tmp_path):
    t_us, c = _probe_us(qwen3_8b(tmp_path, AWQ), "h200-x8")
    weights = 8192 * 8192 * 0.53125
    cap = c.sms * rates.MARLIN_DENSE_PER_SM_STREAM_GBS
    assert c.dense_stream_gbs == pytest.approx(cap)
    assert t_us >= weights / (cap * 1e3) + rates.MIN_US["gemm"] - 0.01  # at most the cap, plus the floor
    assert t_us > weights / (0.8 * 4800 * 1e3) * 1.8  # well above the HBM stream it read before


def test_gddr_part_keeps_its_memory_bound(tmp_path):
    """RTX PRO 6000: 188 SMs x 12.8 GB/s exceeds the GDDR7 stream, so the op costs what a bf16-labelled one would."""
    t_us, c = _probe_us(qwen3_8b(tmp_path, AWQ), "rtx-pro-6000-x8")
    assert c.dense_stream_gbs > 0.8 * c.hw.gpu.mem_bw_gbs
    weights = 8192 * 8192 * 0.53125
    assert t_us == pytest.approx(weights / (0.8 * c.hw.gpu.mem_bw_gbs * 1e3) + rates.MIN_US["gemm"], rel=0.02)


def test_bf16_checkpoint_has_no_cap(tmp_path):
    t_us, c = _probe_us(qwen3_8b(tmp_path, None), "h200-x8")
    assert c.dense_stream_gbs == 0.0
    ops = oplist.linear_ops(c, 1, 8192, 8192, "probe")
    assert all(op.dtype != DENSE_W4A16 for op in ops)


def test_layer_ops_label_the_capped_gemms(tmp_path):
    """The attention projections and the dense FFN of an AWQ layer carry the capped label; the LM head (bf16) does
    not."""
    m = qwen3_8b(tmp_path, AWQ)
    hw = restrict_gpus(load_preset("h200-x8"), 1)
    c = context(m, PhasePlan(gpus=(0,)), "vllm", hw, (0,))
    ops = oplist.layer_ops(c, m.layers[0], StepInput(decode_seqs=1, decode_ctx=100))
    gemms = [op for op in ops if op.kind == "gemm" and op.bucket != "wave"]
    assert gemms and all(op.dtype == DENSE_W4A16 for op in gemms)
    assert all(op.dtype != DENSE_W4A16 for op in oplist.head_ops(c, 1.0) if op.kind == "gemm")
