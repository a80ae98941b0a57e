"""The evaluation round spd28 (tests/bench/bench_predict.py after stop 33): memos across plans whose keys carry
everything their values read. Each is checked against the value computed afresh and for what its key tells apart."""

from __future__ import annotations

import dataclasses

from autotune.catalog import load_model, load_preset
from autotune.perf import attention_shape, halves
from autotune.perf.opcore import StepInput, context
from autotune.specs import PhasePlan

H200 = load_preset("h200-x8")
V41 = load_model("deepseek-v4.1-flash")
GPUS = tuple(range(8))


def _costed(c):
    """The Context after a step's attention half: its attention prefix noted (memo_keys "attention")."""
    halves.attention_terms(c, V41.layers[0].attention, StepInput(decode_seqs=8.0, decode_ctx=2000.0))
    return c


def test_attention_shapes_are_shared_by_contexts_of_one_attention_prefix():
    """Two plans that differ in what the attention prefix leaves out (the collectives' algorithm) share one
    AttentionShape object per layer kind, which is the one each Context computes afresh."""
    one = _costed(context(V41, PhasePlan(gpus=GPUS, tp=8), "vllm", H200, GPUS))
    plan = PhasePlan(gpus=GPUS, tp=8)
    other = _costed(context(V41, dataclasses.replace(plan, comm=dataclasses.replace(plan.comm, allreduce="nccl")),
                            "vllm", H200, GPUS))  # fmt: skip
    assert one.memo_keys["attention"] == other.memo_keys["attention"]
    for layer in V41.layers[:3]:
        shared = attention_shape._attention_shape(one, layer.attention)
        assert attention_shape._attention_shape(other, layer.attention) is shared
        assert shared == attention_shape._shape(other, layer.attention)


def test_attention_shapes_of_another_prefix_are_their_own():
    """A Context differing only in a field the shape reads (tp: the heads per rank) has another attention prefix and
    gets its own shape, not the one remembered first."""
    tp8 = _costed(context(V41, PhasePlan(gpus=GPUS, tp=8), "vllm", H200, GPUS))
    tp4 = _costed(context(V41, PhasePlan(gpus=GPUS[:4], tp=4), "vllm", H200, GPUS[:4]))
    att = V41.layers[0].attention
    eight, four = attention_shape._attention_shape(tp8, att), attention_shape._attention_shape(tp4, att)
    assert four.heads_per_rank == 2 * eight.heads_per_rank
    assert four == attention_shape._shape(tp4, att)
