"""An attention op's `count` is the kernels its call launches (Op.count), read alike by the costing (count x the
rate's per-kernel floor) and by the host's launch count of a graphless step (eager_host.op_launches): a split-KV
decode call is its split kernel and its combine (tiles.ATTENTION_DECODE_LAUNCHES), FA2 unsplit is one kernel, a
prefill call is one (tiles.PREFILL_LAUNCHES)."""

from __future__ import annotations

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import eager_host, tiles
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import attention_ops
from autotune.specs import Kernels, PhasePlan
from tests.perf.boxes import mha_model, sm80_box

LLAMA70 = load_model("llama-3.1-70b")  # 64 query heads, 8 KV heads
TP8 = PhasePlan(gpus=tuple(range(8)), tp=8, kernels=Kernels())


def _kernel_ops(c, x):
    """The attention kernel ops of the last layer at `x` (not the CTA-wave terms, which launch nothing)."""
    ops = attention_ops(c, c.model.layers[-1].attention, x)
    return [op for op in ops if op.kind == "attention" and op.bucket in ("decode", "prefill")]


CASES = (
    (LLAMA70, "h200-x8", "vllm"),
    (LLAMA70, "h200-x8", "sglang"),
    (LLAMA70, "a100", "vllm"),
    (mha_model(LLAMA70), "a100", "vllm"),
    (load_model("deepseek-v3"), "h200-x8", "sglang"),
    (load_model("deepseek-v4.1-flash"), "rtx-pro-6000-x8", "vllm"),
)
STEPS = (
    StepInput(decode_seqs=1.0, decode_ctx=32768.0),
    StepInput(decode_seqs=256.0, decode_ctx=2000.0),
    StepInput(decode_seqs=8.0, decode_ctx=900.0, decode_width=4.0),
    StepInput(prefill_tokens=4096.0, prefill_ctx=2048.0),
)


def _box(preset: str):
    return sm80_box() if preset == "a100" else load_preset(preset)


@pytest.mark.parametrize("model, preset, engine", CASES)
def test_every_attention_call_launches_whole_kernels_and_the_host_counts_them(model, preset, engine):
    """Old: FA2's unsplit decode call was half a launch (count 0.5 of a two-kernel floor) and the host counted
    that half; a count is a number of kernels, 1 or 2 for a decode call, 1 for a prefill one."""
    c = context(model, TP8, engine, _box(preset), TP8.gpus)
    for x in STEPS:
        for op in _kernel_ops(c, x):
            assert op.count in (1.0, 2.0)
            if op.bucket == "prefill" and not model.layers[-1].attention.is_linear:
                assert op.count == tiles.PREFILL_LAUNCHES
            assert eager_host.op_launches([op]) == op.count


def test_a_split_decode_call_launches_its_combine_on_the_host_too():
    """FA3 on H200 under vLLM: the decode op is the split kernel and its combine, two launches, and the host's
    count of the attention half holds both (old: one). The costing's floor is unchanged: 2 x 3 us."""
    c = context(LLAMA70, TP8, "vllm", load_preset("h200-x8"), TP8.gpus)
    x = StepInput(decode_seqs=1.0, decode_ctx=32768.0)
    (decode,) = _kernel_ops(c, x)
    assert decode.count == tiles.ATTENTION_DECODE_LAUNCHES == 2
    assert decode.count * c.table.get("attention", "bf16", "decode").min_us == pytest.approx(6.0)
    ops = attention_ops(c, c.model.layers[-1].attention, x)
    without = [op for op in ops if (op.kind, op.bucket) != ("attention", "decode")]
    assert eager_host.op_launches(ops) - eager_host.op_launches(without) == 2.0


def test_fa2_unsplit_is_one_launch_and_one_kernel_floor():
    """An MHA decode on vLLM's FA2 never splits (tiles.py): one kernel, no combine, on the host and in the floor
    (old: half a launch on the host)."""
    c = context(mha_model(LLAMA70), TP8, "vllm", sm80_box(), TP8.gpus)
    (decode,) = _kernel_ops(c, StepInput(decode_seqs=1.0, decode_ctx=32768.0))
    assert eager_host.op_launches([decode]) == 1.0
    assert decode.count * c.table.get("attention", "bf16", "decode").min_us == pytest.approx(3.0)


def test_a_prefill_call_is_one_kernel_at_its_own_floor():
    c = context(LLAMA70, TP8, "vllm", load_preset("h200-x8"), TP8.gpus)
    (prefill,) = _kernel_ops(c, StepInput(prefill_tokens=4096.0, prefill_ctx=2048.0))
    assert eager_host.op_launches([prefill]) == 1.0
    assert prefill.count * c.table.get("attention", "bf16", "prefill").min_us == tiles.PREFILL_ATTENTION_MIN_US
