"""Host (CPU) time of a step that replays no CUDA graph: the engine's Python launches every kernel of every layer
itself, so the stage takes the longer of its GPU time and that host time (perf/ops.py). The host time is the
kernel launches of the stage's layers, counted from the op list the step is costed from (oplist.layer_ops: each
Op is `count` kernels), times the host cost of one launch (efficiency.EAGER_HOST_US_PER_LAUNCH): a dense layer
launches fewer kernels than a MoE layer (no router, top-k, permutes or grouped GEMMs) and pays less host time. On
such a step the host's excess over the GPU time stands in for the graph-replay terms of a graphed step
(efficiency.DECODE_LAUNCH_US_PER_LAYER, PREFILL_LAUNCH_US_PER_LAYER): ops._step counts one or the other, never both."""

from __future__ import annotations

from autotune.capability.profiles import profile
from autotune.perf import efficiency as eff
from autotune.perf import tiles
from autotune.perf.costing import BoundedMemo
from autotune.perf.halves import number
from autotune.perf.opcore import Context, StepInput
from autotune.perf.oplist import attention_ops, dcp_ops, decode_part, ffn_ops, layer_input, step_tokens
from autotune.specs import LayerSpec

LAUNCH_MEMO_MAX = 4096  # entries of each memo of launches (stage_launches, _half_launches)
_LAUNCHES = BoundedMemo(LAUNCH_MEMO_MAX)  # (step prefix number, launch_key) -> a stage's launches
_HALF_LAUNCHES = BoundedMemo(LAUNCH_MEMO_MAX)  # (half's prefix number, its spec's id, launch_key) -> its launches
# Ops that are no kernel of their own: the fixed time of a kernel's extra waves of tiles or CTAs (opcore._gemm_waves,
# oplist._attention_waves, _moe_waves: buckets "wave" / "paged_wave"), priced beside the kernel they belong to.
_WAVE_BUCKETS = frozenset(("wave", "paged_wave"))


def micro_batches(c: Context) -> int:
    """Forwards the host launches a step's layers in: two under two-batch overlap, where each micro-batch runs every
    layer's ops (SGLang: one _StageExecutor per sub-batch, each through all stages,
    srt/batch_overlap/operations.py:55-68; vLLM 0.34's DBO: one thread per micro-batch, each calling the model,
    v1/worker/gpu/ubatch_utils.py:505-545), else one."""
    return 2 if c.phase.overlap.two_batch else 1


def op_launches(ops) -> float:
    """Kernels the ops launch: each Op's `count`, none for the wave terms (_WAVE_BUCKETS) nor for a collective
    within one GPU (a group of one: no communication kernel runs)."""
    launches = 0.0
    for op in ops:
        if op.bucket in _WAVE_BUCKETS or (op.kind == "collective" and len(op.group) < 2):
            continue
        launches += op.count
    return launches


def launch_key(c: Context, x: StepInput) -> tuple:
    """What of the step input the op list's kernels (not their sizes) depend on: which parts the step has (decode
    rows, their width, prompt tokens, a prompt's cached prefix: MLA's prefix kernels, mla_ops.prefix_ops), whether
    the norms fold into the all-reduce (oplist._fused_norms: rows per rank within Context.fused_norm_max_tokens)
    and whether the prompts run on the absorbed-MLA decode path (mla_ops.absorbed_prefill's row rule) or a DSA
    layer's sparse path (mla_ops.sparse_prefill's). Under vLLM's FA2 decode (Context.fa2_decode) a swapped call
    (fa2_decode.swapped: one-token decodes, no prompt in the step) launches by its KV splits and the batch
    (fa2_decode.decode_fill: tiles.fa2_swapped_splits of the decode rows and context, the split kernel's combine in
    tiles.fa2_decode_launches, the strided copies of tiles.fa2_swap_copies), so that step's decode rows and context
    join the key; an unswapped call is one kernel whatever they are."""
    rank_tokens = x.prefill_rank_tokens or x.prefill_tokens / c.phase.dp
    absorbed = bool(
        x.prefill_tokens
        and c.mla_absorbed_prefill_rows
        and tiles.prefill_rows_per_seq(rank_tokens, x.prefill_ctx) <= c.mla_absorbed_prefill_rows
    )
    fused = step_tokens(x) / c.phase.dp <= c.fused_norm_max_tokens
    # a DSA layer's prompts on its sparse absorbed path (mla_ops.sparse_prefill's rule)
    limit = c.dsa_prefill[0]
    sparse = bool(x.prefill_tokens and limit)
    sparse = sparse and x.prefill_ctx + tiles.prefill_rows_per_seq(rank_tokens, x.prefill_ctx) / 2 > limit
    fa2 = c.fa2_decode and x.decode_seqs and x.decode_width == 1 and not x.prefill_tokens  # fa2_decode.swapped's rule
    seqs_ctx = (x.decode_seqs, x.decode_ctx) if fa2 else None
    return x.decode_seqs > 0, x.decode_width, x.prefill_tokens > 0, x.prefill_ctx > 0, fused, absorbed, sparse, seqs_ctx


def stage_launches(c: Context, groups: tuple[tuple[LayerSpec, int], ...], x: StepInput) -> float:
    """Kernel launches of one pipeline stage's layers for a step of `x`: every layer kind's op list
    (oplist.layer_ops: its attention half, its FFN half and the dcp gather) counted (op_launches) times its layers
    and the micro-batches, over the pp stages. Remembered (_stage_key) and each half across plans
    (_half_launches); tests/perf/test_eager_host.py checks the count against the op list. A Context that no step
    costed counts afresh."""
    step_key = launch_key(c, x)
    parts: dict = {True: (x, step_key)}  # in_prefill -> (the layer's input, its launch_key): each worked out once
    if x.prefill_tokens:  # the decode part a layer outside prefill runs (layer_input), in the key (_stage_key)
        part_x = decode_part(x)
        parts[False] = (part_x, launch_key(c, part_x))
    key = _stage_key(c, step_key, parts)
    hit = None if key is None else _LAUNCHES.get(key)
    if hit is None:
        launches = 0.0
        for layer, count in groups:
            part = parts.get(layer.in_prefill)
            if part is None:
                part_x = layer_input(layer, x)
                part = parts[layer.in_prefill] = (part_x, launch_key(c, part_x))
            launches += count * _half_launches(c, "attention", layer.attention, *part)
            launches += count * _half_launches(c, "ffn", layer.ffn, *part)
        hit = launches * micro_batches(c) / c.phase.pp
        if key is not None:
            _LAUNCHES.put(key, hit)
    return hit


def _stage_key(c: Context, step_key: tuple, parts: dict) -> tuple | None:
    """stage_launches' memo key: what its count reads, field by field. The layer kinds (`groups`: the caller's
    layers.layer_groups(c.model), as ops.step_fn passes them); each half's launches, which _half_launches keys on
    the attention prefix's number (memo_keys "attention") or the FFN's launch prefix (ffn_launch_prefix; both hold
    id(c.model), the layer kinds' owner), the layer kind and its input's launch_key: the step's for the layers in
    prefill, its decode part's for the others (which the step's fixes without prompt tokens, not with them: the
    fused-norm row rule then reads the decode rows alone); micro_batches (overlap.two_batch) and pp. Plans that
    differ in what no half's launches read (the box, NCCL, batching, the collectives' algorithms, the FFN's kernel
    speeds and byte sizes) share it. Without the attention prefix (a Context no step costed): the step's number
    (ops.step_fn) in its place, or None (counted afresh)."""
    part = parts.get(False)
    part_key = None if part is None else part[1]  # parts[False] is set where the step has prompt tokens
    memo_keys = c.memo_keys
    attention = memo_keys.get("attention")
    if attention is not None:
        return (attention, ffn_launch_prefix(c), c.phase.overlap.two_batch, c.phase.pp, step_key, part_key)
    number_ = memo_keys.get("step")
    return None if number_ is None else (number_, step_key, part_key)


def ffn_launch_prefix(c: Context) -> int:
    """The Context's part of an FFN half's launch key, as a number (halves.number), once per Context (its memo_keys'
    "ffn_launches"): exactly what the `count` of oplist.ffn_ops' ops and which of them exist read of the Context,
    beside the FFN spec and the step's launch_key (op_launches skips the wave ops and one-GPU collectives). Proof,
    op by op. ffn_kernel_ops (oplist._ffn_ops, ffn_shape.router_ops): the dense / shared GEMM pair (count 2) exists
    where the FFN has parameters and its shared experts are not fused into the routed ones (ffn_shape._dense_part:
    bool(c.fused_shared)), followed by its activation quants (precision.standalone_quants of c.dense_dtype and the
    model's dense format, where c.dense_quant_bytes) or else the activation (1); a MoE FFN (the spec) adds the
    grouped GEMM (1), the fused shared experts' op (count 0), the quants of c.expert_dtype and the expert format
    (where c.expert_quant_bytes), the permutes (2), the router GEMM and top-k (1 each); the rest (rows, bytes, FLOPs,
    speeds: c.dense_speed, moe_speed, imbalance, the byte sizes, stream caps, K-loop bounds, the tile waves' GEMMs)
    is no count. ffn_comm_ops (oplist._comm_ops): the collectives by tp, dp, ep, comm.all2all, the stage's length
    and the dense layout (sharding.dense_layout: phase.dense_dp and the engine profile's tp_spans_dp), each counted
    unless its group is one GPU; a group's length follows tp and the stage's, which is tp x dp (ops.step_fn's
    phase.stage_ranks GPUs); the fused-norm rewrite changes a bucket, no count. ffn_norm_ops: NORMS_PER_LAYER less
    _fused_norms, which reads tp, dp, ep, comm.all2all, the dense layout and whether the rows per rank are within
    c.fused_norm_max_tokens (the launch_key's `fused`). The
    model by identity (its formats, hidden size and FFN specs); the engine profile's ascend_platform beside, as the
    FFN prefix (halves.ffn_kernel_terms) holds it. Plans that differ in the FFN's kernels, imbalance or byte sizes
    share the count (V4.1's sampled plans: 160 FFN prefixes, 33 layouts)."""
    hit = c.memo_keys.get("ffn_launches")
    if hit is None:
        phase, prof = c.phase, profile(c.engine)
        parts = (
            "ffn launches", id(c.model), prof.ascend_platform, prof.tp_spans_dp, phase.tp, phase.dp, phase.ep,
            phase.dense_dp, phase.comm.all2all, c.dense_dtype, bool(c.dense_quant_bytes),
            c.expert_dtype, bool(c.expert_quant_bytes), bool(c.fused_shared),
        )  # fmt: skip
        hit = c.memo_keys["ffn_launches"] = number(parts, (c.model,))
    return hit


def _half_launches(c: Context, half: str, spec, x: StepInput, x_key: tuple) -> float:
    """Launches of one layer half for the layer's own input `x` (x_key: its launch_key): the attention half with
    the dcp gather (oplist.attention_ops, dcp_ops) or the FFN half with its collectives and norms (oplist.ffn_ops).
    Remembered across plans: the attention half by its prefix number in the Context's memo_keys ("attention":
    halves._attention_prefix, what attention_ops reads of the Context, dcp included), set once the step has costed
    the half, counted afresh without it; the FFN half by ffn_launch_prefix; equal specs of different layer kinds
    as one."""
    tokens = step_tokens(x)
    if tokens <= 0:
        return 0.0
    if half == "attention":
        prefix = c.memo_keys.get("attention")
        # equal AttentionSpecs as one (halves._attention_ids, noted with the prefix: DeepSeek-V3's dense and MoE
        # layers hold equal ones), as attention_terms keys them
        ids = c.memo_keys.get("attention_ids")
        spec_id = ids[0].get(id(spec), id(spec)) if ids else id(spec)
    else:
        prefix = ffn_launch_prefix(c)
        ids = c.memo_keys.get("ffn_ids")  # equal FfnSpecs as one (ops._ffn_cost's map)
        spec_id = ids.get(id(spec), id(spec)) if ids else id(spec)
    key = None if prefix is None else (prefix, spec_id, *x_key)
    hit = None if key is None else _HALF_LAUNCHES.get(key)
    if hit is None:
        if half == "attention":
            hit = op_launches(attention_ops(c, spec, x)) + op_launches(dcp_ops(c, spec, x))
        else:
            hit = op_launches(ffn_ops(c, spec, tokens))
        if key is not None:
            _HALF_LAUNCHES.put(key, hit)
    return hit


def eager_host_s(c: Context, groups: tuple[tuple[LayerSpec, int], ...], x: StepInput) -> float:
    """Seconds the host takes to launch one stage's kernels in a step without CUDA graph."""
    return stage_launches(c, groups, x) * eff.EAGER_HOST_US_PER_LAUNCH * 1e-6
