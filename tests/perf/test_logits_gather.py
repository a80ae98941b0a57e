"""The TP logits all-gather and full-vocabulary sampling of the LM head (perf/lm_head.py): under tensor parallelism
vLLM and SGLang all-gather each rank's vocab slice of the logits over the TP group every step and every rank
samples over the whole vocabulary. Each test fails on the model before them (no gather, sampling over vocab / tp)."""

from __future__ import annotations

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import comm, halves, precision
from autotune.perf.costing import Cost, cost_ops
from autotune.perf.memory import ACTIVATION_ROWS_PER_TOKEN, GB, memory_fit
from autotune.perf.opcore import context
from autotune.perf.oplist import head_ops
from autotune.perf.ops import StepInput, step_cost
from autotune.specs import Batching, Comm, PhasePlan

PRO = load_preset("rtx-pro-6000-x8")  # PCIe, no NVLink
QWEN = load_model("qwen3-235b-a22b")


def _phase(tp: int, **comm_fields) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(tp)), tp=tp, ep=tp, comm=Comm(**comm_fields))


def _gathers(ops) -> list:
    return [op for op in ops if op.kind == "collective" and op.bucket == "allgather"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_tp4_head_all_gathers_rows_times_vocab_logits_on_the_tp_group(engine):
    phase = _phase(4)
    c = context(QWEN, phase, engine, PRO, phase.gpus)
    for rows in (1.0, 64.0, 256.0):
        (gather,) = _gathers(head_ops(c, rows))
        assert gather.group == (0, 1, 2, 3)
        assert gather.nbytes == rows * QWEN.vocab_size * precision.ACTIVATION_BYTES
    one = cost_ops(c, head_ops(c, 1.0)).comm_s["allgather"]
    many = cost_ops(c, head_ops(c, 256.0)).comm_s["allgather"]
    # 256 rows x 151,936 x 2 B = 78 MB gathered: far more than one row's latency-bound gather on PCIe
    assert many > 20 * one
    assert many == pytest.approx(comm.all_gather_s(PRO, (0, 1, 2, 3), 256 * QWEN.vocab_size * 2.0), rel=1e-9)


def test_tp1_head_gathers_nothing():
    phase = _phase(1)
    c = context(QWEN, phase, "vllm", PRO, phase.gpus)
    assert not _gathers(head_ops(c, 64.0))


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_every_rank_samples_over_the_whole_vocabulary(tp):
    phase = _phase(tp)
    c = context(QWEN, phase, "vllm", PRO, phase.gpus)
    (sampling,) = [op for op in head_ops(c, 32.0) if op.kind == "sampling"]
    assert sampling.nbytes == 32.0 * QWEN.vocab_size * 4.0  # fp32 logits, the same on every TP width


def test_tp4_decode_step_pays_the_gather_growing_with_the_batch():
    phase = _phase(4)
    steps = [step_cost(QWEN, phase, "vllm", PRO, phase.gpus, StepInput(seqs, 2048.0), "decode") for seqs in (8, 128)]
    small, large = (s.comm_ms["allgather"] for s in steps)
    assert large > 4 * small > 0


def test_remembered_head_cost_follows_the_gpus_and_nccl_settings():
    """halves.head_cost remembers the head across plans; the gather's cost depends on the TP group's GPUs and the
    NCCL environment, so plans differing only there get their own (each equal to the uncached cost)."""
    phases = (
        _phase(2),
        PhasePlan(gpus=(0, 4), tp=2, ep=2),  # across the two switches / sockets
        _phase(2, nccl={"NCCL_P2P_DISABLE": "1"}),
    )
    halves._HEADS.cache_clear()
    seen = []
    for phase in phases + phases:  # the second pass meets the first's entries
        c = context(QWEN, phase, "vllm", PRO, phase.gpus)
        remembered = halves.head_cost(c, 96.0)
        assert remembered == cost_ops(c, head_ops(c, 96.0), Cost())
        seen.append(remembered.comm_s["allgather"])
    assert len(set(seen[:3])) == 3 and seen[:3] == seen[3:]


def test_gathered_logits_are_reordered_once_when_there_are_several_rows():
    """Both engines' NCCL all-gather fills a [tp, rows, vocab / tp] buffer and moves the rank axis behind the rows:
    one copy (read and write, bf16) of the gathered logits for more than one row; a view for one row or tp = 1."""

    def reorder_bytes(tp: int, rows: float) -> float:
        phase = _phase(tp)
        c = context(QWEN, phase, "vllm", PRO, phase.gpus)
        return sum(op.nbytes for op in head_ops(c, rows) if op.kind == "elementwise")

    assert reorder_bytes(4, 64.0) == 2 * 64.0 * QWEN.vocab_size * precision.ACTIVATION_BYTES
    assert reorder_bytes(4, 1.0) == 0.0 and reorder_bytes(1, 64.0) == 0.0


def test_sglang_dp_attention_head_samples_each_ranks_own_rows_over_the_whole_vocabulary():
    """SGLang under DP attention without --enable-dp-lm-head: after the logits all-gather each DP rank keeps its own
    rows (_scatter_dp_attn_logits, one copy) and samples them over the full vocabulary: rows / dp x vocab x 4 B,
    not the old rows x vocab / tp."""
    phase = PhasePlan(gpus=tuple(range(8)), tp=1, dp=8, ep=8, dp_attention=True)
    c = context(QWEN, phase, "sglang", PRO, phase.gpus)
    rows = 256.0
    ops = head_ops(c, rows)
    (sampling,) = [op for op in ops if op.kind == "sampling"]
    assert sampling.nbytes == rows / 8 * QWEN.vocab_size * 4.0
    (scatter,) = [op for op in ops if op.source == "dp_lm_head (logits scatter)"]
    assert scatter.nbytes == 2 * rows / 8 * QWEN.vocab_size * precision.ACTIVATION_BYTES


def test_vllm_profile_run_holds_full_vocabulary_fp32_logits_on_every_tp_rank():
    """vLLM's profile run samples max_num_seqs rows after compute_logits all-gathers them (model_runner.py:1039-1062):
    the activations it reserves grow by max_running x vocab x 4 B whatever the TP width, not by a 1/tp slice."""

    def activations_gb(tp: int, max_running: int) -> float:
        phase = PhasePlan(gpus=tuple(range(tp)), tp=tp, ep=tp, batching=Batching(max_running, 8192))
        return memory_fit(QWEN, phase, PRO, 2048, "vllm").activations_gb

    for tp in (1, 8):
        grown = activations_gb(tp, 1024) - activations_gb(tp, 512)
        hidden = 512 * QWEN.hidden_size * precision.ACTIVATION_BYTES
        expected = (512 * QWEN.vocab_size * 4 + hidden * ACTIVATION_ROWS_PER_TOKEN / tp) / GB
        assert grown == pytest.approx(expected, rel=1e-9)
