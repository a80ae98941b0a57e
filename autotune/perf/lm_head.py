"""The LM head's ops (perf/oplist.py's head_ops): the vocab-parallel head GEMM, the logits all-gather over the TP
group, and sampling over the full vocabulary.

Under tensor parallelism each rank computes the logits of its vocab slice, then the engine all-gathers them over
the TP group every step and every rank samples over the whole vocabulary:
- vLLM 0.34: model_executor/layers/logits_processor.py:122-134 (`_gather_logits`: tensor_model_parallel_all_gather
  when current_platform.use_all_gather(), True on CUDA: platforms/interface.py:1290-1293; vllm-ascend keeps the
  default); the all-gather runs on pynccl (distributed/device_communicators/cuda_communicator.py:487-524; the NVLS
  symmetric-memory path is for dim 0 only, the logits gather over the last dim) and the sampler then reads [rows,
  vocab] in fp32.
- SGLang 0.5.23: srt/layers/logits_processor.py:477-486 and 1024-1036 (do_tensor_parallel_all_gather when
  tp_size > 1: `_logits_gatherer`, a multimem all-gather where the GPUs have multicast, NCCL's
  tensor_model_parallel_all_gather(x, dim=-1) elsewhere: srt/distributed/device_communicators/
  triton_symm_mem_ag.py:495-524).
Both NCCL paths gather into a [tp, rows, vocab / tp] buffer and move the rank axis behind the rows (vLLM
cuda_communicator.py:517-524, SGLang srt/distributed/parallel_state.py:1431-1438): a reshape of a non-contiguous
view, one more copy of the gathered logits when there is more than one row.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.perf import precision
from autotune.perf.opcore import Context, Op, _act_bytes, _collective, _gemm, _op_new, _tile_speed
from autotune.perf.sharding import head_over_dp
from autotune.specs import DTYPE_BYTES

SAMPLING_LOGIT_BYTES = 4.0  # the sampler reads the logits as fp32 (vLLM / SGLang samplers upcast them)


def head_ops(c: Context, rows: float) -> list[Op]:
    """LM head (bf16) on `rows` sampled positions of the instance, vocab-parallel over the attention TP group,
    or over all tp*dp ranks (head_over_dp): then every rank computes every DP rank's rows against its vocab
    slice, after an all-gather of the sampled hidden rows, and the logits are all-gathered back; then sampling.
    Runs once per step (on the last pipeline stage): callers scale it by 1/pp like the per-stage layers.
    head_kernel_ops, then logits_gather_ops (the TP all-gather of the logits)."""
    return head_kernel_ops(c, rows) + logits_gather_ops(c, rows)


@dataclass(frozen=True, slots=True)
class HeadShape:
    """The step-independent parts of head_kernel_ops under one Context (head_shape). Slots, like
    ffn_shape.FfnShape: its fields are read by name."""

    over_dp: bool  # sharding.head_over_dp: vocab-parallel over all tp x dp ranks
    source: str  # "dp_lm_head" under attention DP, else "tp"
    m_div: int  # the head GEMM's rows are the step's rows / this (1 over DP, dp otherwise)
    weights: float  # head parameters per rank
    flops: float  # 2 x head parameters: x rows / ranks
    ranks: int  # tp x dp
    weight_bytes: float  # bf16 head weight bytes per rank
    row_bytes: float  # activation bytes per GEMM row (opcore._act_bytes)
    vocab_per_rank: float  # the GEMM's output width per rank (_tile_speed)
    reorder: bool  # the TP-gathered logits are reordered (tp > 1, not over DP)


def head_shape(c: Context) -> HeadShape:
    """head_kernel_ops' step-independent parts, computed once per Context (kept in Context.memo_keys)."""
    hit = c.memo_keys.get("head_shape")
    if hit is not None:
        return hit
    model, phase = c.model, c.phase
    head_params = model.vocab_size * model.hidden_size
    ranks = phase.tp * phase.dp
    over_dp = head_over_dp(c.engine, phase)
    shards = ranks if over_dp else phase.tp
    vocab_per_rank = model.vocab_size / shards
    hit = c.memo_keys["head_shape"] = HeadShape(
        over_dp,
        "dp_lm_head" if phase.dp > 1 else "tp",
        1 if over_dp else phase.dp,
        head_params / shards,
        2 * head_params,
        ranks,
        head_params * DTYPE_BYTES["bf16"] / shards,
        _act_bytes(1.0, vocab_per_rank, model.hidden_size, 1.0, precision.ACTIVATION_BYTES),
        vocab_per_rank,
        phase.tp > 1 and not over_dp,
    )
    return hit


def head_kernel_ops(c: Context, rows: float) -> list[Op]:
    """head_ops less the TP logits all-gather: the head GEMM, the vocab-parallel-over-DP head's collectives
    (head_over_dp), the gathered logits' reorder copy, sampling. Off head_over_dp, a function of the model, the
    rates table, tp / dp and the rows only (perf/halves.py remembers its terms across plans). The step-independent
    parts come from head_shape."""
    s, model = head_shape(c), c.model
    m = rows / s.m_div
    flops, nbytes = s.flops * rows / s.ranks, s.weight_bytes + m * s.row_bytes
    speed = _tile_speed(c, "bf16", m, s.vocab_per_rank)
    ops = [_gemm(s.source, "bf16", m, s.weights, model.hidden_size, flops, nbytes, 1.0, speed)]
    if not rows:
        return ops
    act = precision.ACTIVATION_BYTES
    if s.over_dp:
        dp = c.phase.dp
        # the rows' hidden states gathered SUM_LEN (SGLang 0.5.23 srt/layers/logits_processor.py:419, every step): each
        # rank's rows at its offset of a zeroed buffer, all-reduced (srt/layers/dp_attention.py:661-713, perf/dp_gather)
        ops.append(_collective("allreduce", c.stage, rows * model.hidden_size * act, "dp_lm_head"))
        ops.append(_collective("allgather", c.stage, rows * model.vocab_size * act, "dp_lm_head"))
        # each DP rank keeps its own rows of the gathered logits, whole vocabulary (SGLang 0.5.23
        # srt/layers/logits_processor.py:1045-1047 -> _scatter_dp_attn_logits, :1320-1333: dp_scatter into a
        # [local rows, vocab] buffer), then samples them: one copy, then fp32 reads of rows / dp x vocab
        own = rows / dp * model.vocab_size
        ops.append(_op_new(Op, ("elementwise", "bf16", "any", rows / dp, 0.0, 0.0, 0.0, 2 * own * act, 1.0,
                                "dp_lm_head (logits scatter)", 1.0, ())))  # fmt: skip
        sampled = own * SAMPLING_LOGIT_BYTES
    else:
        if s.reorder and m > 1:  # the gathered logits moved rank-major -> row-major (module docstring)
            ops.append(_op_new(Op, ("elementwise", "bf16", "any", m, 0.0, 0.0, 0.0, 2 * m * model.vocab_size * act,
                                    1.0, "tp (logits gather reorder)", 1.0, ())))  # fmt: skip
        sampled = m * model.vocab_size * SAMPLING_LOGIT_BYTES  # every rank samples over the whole vocabulary
    ops.append(_op_new(Op, ("sampling", "bf16", "any", m, 0.0, 0.0, 0.0, sampled, 1.0, "engine", 1.0, ())))
    return ops


def logits_gather_ops(c: Context, rows: float) -> list[Op]:
    """The all-gather of the logits over the TP group (bf16, each rank's rows x its vocab slice in, rows x the
    vocabulary out; module docstring) on the plain vocab-parallel head: tp > 1, not head_over_dp (whose
    all-gathers head_kernel_ops issues), some rows. Costed like the layers' TP collectives (costing.collective_s)."""
    phase = c.phase
    if phase.tp == 1 or not rows or head_over_dp(c.engine, phase):
        return []
    return [logits_gather(c, rows)]


def logits_gather(c: Context, rows: float) -> Op:
    """logits_gather_ops' all-gather, for callers that know it runs (tp > 1, not head_over_dp, rows > 0)."""
    phase = c.phase
    nbytes = rows / phase.dp * c.model.vocab_size * precision.ACTIVATION_BYTES
    return _collective("allgather", c.stage[: phase.tp], nbytes, "tp")
