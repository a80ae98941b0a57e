"""The costed halves of a layer remembered across plans: the attention half's op terms (costing._op_terms) and
the FFN half's kernel and norm terms, in bounded memos. Plans that differ only in what a half does not read
(collectives, batching, the other half's kernels, the engine) share it; each key is built from exactly what the
half's builders (perf/oplist.py) and the costing pass read, listed in the function's docstring. A memo is
cleared when full, and by `cache_clear` (the name lru_cache uses, so tests/bench/calibration_check.py clears it
with the perf caches after patching a constant)."""

from __future__ import annotations

import dataclasses
import itertools
import operator

from autotune.capability.profiles import profile
from autotune.perf.costing import BoundedMemo, Cost, _add_terms, _op_terms, collective_term, cost_ops
from autotune.perf.linear_attention import prefill_path
from autotune.perf.lm_head import head_kernel_ops, head_ops, logits_gather
from autotune.perf.opcore import Context, StepInput
from autotune.perf.oplist import _projection_ops, attention_parts, dcp_ops, ffn_kernel_ops, ffn_norm_ops
from autotune.perf.sharding import dp_prefill_apart, head_over_dp
from autotune.specs import AttentionSpec, FfnSpec, ModelSpec

ATTENTION_MEMO_MAX = 16384  # entries of the memo of costed attention halves (attention_terms)
FFN_MEMO_MAX = 16384  # entries of the memo of costed FFN kernels (ffn_kernel_terms)
PREFIX_MEMO_MAX = 4096  # distinct key parts numbered (number): attention prefixes, step_fn's phases


_ATTENTION_TERMS = BoundedMemo(ATTENTION_MEMO_MAX)
_KIND = operator.itemgetter(0)  # an Op's kind (Op.kind), read in C: no generator frame per op
_SECONDS = operator.itemgetter(2)  # an op term's seconds (costing._op_terms)


def _attention_prefix(c: Context) -> int:
    """The Context's part of attention_terms' key, as a number (one per distinct part, built once per Context):
    what oplist.attention_ops and _op_terms read of the Context. That is the model (by identity; the attention
    specs are its layer kinds), the rates table (by identity) and SM count, tp / dp / dcp, the dense and KV dtypes'
    resolved sizes and kernel speeds, the decode kernel's split cap and FA2 rule, the MLA output copy,
    absorbed-prefill rows, Triton MLA split size, query concat and prefix up-projection, the FP8 and NVFP4 GEMMs'
    K-loop bounds (Context.fp8_kloop, fp4_kloop), FA3's paged prefill path and FP8 speed (Context.fa3_paged_prefill,
    fp8_prefill_speed), the latent-MLA decode
    query tile and fixed time (Context.mla_decode_q_tile, mla_decode_fixed_waves), the DSA prefill rule and its FP8
    sparse kernel's speed (Context.dsa_prefill, dsa_fp8_sparse_speed), the indexer's logits dtype
    (Context.dsa_indexer_dtype) and whether it scores V4.1 candidates only (dsa_candidate_sparse), the vllm-ascend
    platform options when the engine runs on it,
    whether each DP rank runs its prefill apart from its decodes (sharding.dp_prefill_apart: _apart_terms), noted
    in the Context's memo_keys as "dp_apart", and the linear-attention layers' prefill kernels (linear_paths)."""
    hit = c.memo_keys.get("attention")
    if hit is None:
        phase = c.phase
        apart = c.memo_keys["dp_apart"] = dp_prefill_apart(phase, c.engine)
        platform = tuple(sorted(phase.platform.items())) if profile(c.engine).ascend_platform else None
        prefix = (
            id(c.model), id(c.table), c.sms, phase.tp, phase.dp, phase.dcp, platform,
            c.dense_dtype, c.dense_speed, c.dense_bytes, c.dense_quant_bytes, c.act_in_bytes,
            c.kv_elem_bytes, c.attention_speed, c.decode_split_cap, c.fa2_decode, c.mla_output_copy, c.fp8_kloop,
            c.fp4_kloop,
            c.mla_absorbed_prefill_rows, c.triton_mla_split_tokens, c.mla_query_concat, c.mla_prefix_up_projection,
            c.mla_decode_q_tile, c.fa3_paged_prefill, c.dense_stream_gbs, c.fp8_prefill_speed, apart,
            c.mla_decode_fixed_waves, c.dsa_prefill, c.dsa_fp8_sparse_speed, c.mla_absorbed_step_tokens,
            c.dsa_indexer_dtype, c.dsa_candidate_sparse,
        )  # fmt: skip
        prefix += linear_paths(c)
        c.memo_keys["attention_ids"] = _attention_ids(c.model)
        hit = c.memo_keys["attention"] = number(prefix, (c.model, c.table))
    return hit


_LINEAR_SPECS = BoundedMemo(PREFIX_MEMO_MAX)  # id(model) -> (the model, its distinct linear-attention layer kinds)


def linear_paths(c: Context) -> tuple:
    """The prefill path (linear_attention.prefill_path) of each of the model's linear-attention layer kinds, () for
    a model without them: linear_attention_ops._prefill_ops reads the engine, the GPU's arch, the phase's
    chunked-prefill tokens and the state dtype through it (SGLang's FlashInfer GDN prefill on sm_90 only up to a
    32,768-token chunk: capability/profiles/sglang_0_5_23.py gdn_flashinfer_prefill), which pick the scan's kernels
    and their launches; the path, not those fields, keys the attention half, so plans of one path share it."""
    model = c.model
    hit = _LINEAR_SPECS.get(id(model))
    if hit is None or hit[0] is not model:
        specs = {id(layer.attention): layer.attention for layer in model.layers if layer.attention.is_linear}
        hit = _LINEAR_SPECS.put(id(model), (model, tuple(specs.values())))
    if not hit[1]:
        return ()
    chunk, arch = c.phase.batching.chunked_prefill_tokens, c.hw.gpu.arch
    return tuple(prefill_path(c.engine, att, arch, chunk, model.state_dtype) for att in hit[1])


_ATTENTION_IDS = BoundedMemo(PREFIX_MEMO_MAX)  # id(model) -> (the model, _attention_ids)
# AttentionSpec fields the projection ops (oplist._projection_ops, with the shape oplist._attention_shape gives them)
# do not read: they shape only the kernels. `kind` is read as whether it is "gqa" (its RoPE kernel)
PROJECTION_FREE = (
    "kind", "kv_read_elems_per_token", "compress_ratio", "attended_cap", "window", "window_only", "index_heads",
    "index_dim", "index_scored_cap", "index_pool",
)  # fmt: skip


def _attention_ids(model: ModelSpec) -> tuple[dict[int, int], dict[int, int]]:
    """(id(AttentionSpec) -> id of the model's first equal one, id(AttentionSpec) -> id of the model's first one
    of equal projections) over the model's layer kinds, once per model object (noted in the Context's memo_keys as
    "attention_ids"): attention_terms keys equal layer kinds' attention alike (DeepSeek-V3's dense and MoE layers
    have one attention), _projection_terms those whose projection ops are equal (V4's layer kinds that differ only
    in their kernels: compression, sparsity, window). The ids stay valid while the model lives, which the attention
    prefix (number) keeps alive."""
    hit = _ATTENTION_IDS.get(id(model))
    if hit is None or hit[0] is not model:
        first: dict = {}
        attentions = {id(layer.attention): layer.attention for layer in model.layers}
        same = {i: id(first.setdefault(att, att)) for i, att in attentions.items()}
        first.clear()
        projections = {}
        for i, att in attentions.items():
            key = (att.kind == "gqa", plain(att, PROJECTION_FREE))
            projections[i] = id(first.setdefault(key, att))
        hit = _ATTENTION_IDS.put(id(model), (model, (same, projections)))
    return hit[1]


_PREFIXES = BoundedMemo(PREFIX_MEMO_MAX)
_NEXT_PREFIX = itertools.count()


def number(prefix: tuple, alive: tuple = ()) -> int:
    """A number for `prefix` (a memo key's part shared by many lookups, hashed once), the same while it is
    remembered; a forgotten prefix gets a new one, and a number is never reused. `alive`: the objects whose id()
    the prefix holds, kept alive while it is remembered so that no other object takes their id meanwhile (the
    memos' entries then hold only plain values: fewer objects for the garbage collector to walk)."""
    hit = _PREFIXES.get(prefix)
    return hit[0] if hit is not None else _PREFIXES.put(prefix, (next(_NEXT_PREFIX), alive))[0]


# step_input(x): StepInput's fields as a plain tuple (equal exactly when the StepInputs are), for a memo key: a plain
# tuple of floats, which the garbage collector stops tracking, where the StepInput (a tuple subclass) would stay
# tracked. The tuple type itself, called without a Python frame (every step and layer kind builds such a key)
step_input = tuple


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # dataclass type -> its field names (() for other types)
_AS_IS = frozenset((int, float, str, bool, type(None), tuple))  # types plain returns unchanged, checked first


def plain(value, leave_out: tuple[str, ...] = ()):
    """A hashable copy of a plan value for a memo key: a dataclass as its type and fields (all but `leave_out`,
    field by field, so a field added later joins the key), a dict as its sorted items."""
    kind = type(value)
    if kind in _AS_IS:
        return value
    names = _FIELD_NAMES.get(kind)
    if names is None:
        is_data = dataclasses.is_dataclass(value) and not isinstance(value, type)
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(value)) if is_data else ()
    if names:  # a plain field as is, without a call (a phase's ~30 fields are mostly numbers and strings)
        out = [kind.__name__]
        for name in names:
            if name not in leave_out:
                field_value = getattr(value, name)
                out.append(field_value if type(field_value) in _AS_IS else plain(field_value))
        return tuple(out)
    if isinstance(value, dict):
        return tuple(sorted((k, plain(v)) for k, v in value.items()))
    return value


def attention_terms(c: Context, att: AttentionSpec, x: StepInput) -> tuple[tuple, ...]:
    """_op_terms of attention_ops(c, att, x), remembered across plans that resolve the attention half alike (they
    may differ in FFN, experts, collectives, batching, engine): keyed on the Context's part (_attention_prefix),
    the layer kind and the input; a layer kind equal to the model's first of its value (_attention_ids) takes that
    one's terms. attention_ops issues no collective (dcp_ops does). A step that carries prompt tokens and decodes
    on an engine whose DP ranks run them apart takes _apart_terms. Built as oplist.attention_parts splits it: the
    projections' terms (_projection_terms), then the kernels'."""
    prefix = c.memo_keys.get("attention")  # _attention_prefix's number, once the Context has it
    if prefix is None:
        prefix = _attention_prefix(c)
    if x.prefill_tokens and x.decode_seqs and c.memo_keys["dp_apart"]:
        return _apart_terms(c, att, x)
    key = (prefix, id(att), step_input(x))  # `att` is one of the prefix's model's layer kinds
    hit = _ATTENTION_TERMS.get(key)
    return _attention_miss(c, att, x, key) if hit is None else hit


def _attention_miss(c: Context, att: AttentionSpec, x: StepInput, key: tuple) -> tuple[tuple, ...]:
    """attention_terms of a step whose prompts do not run apart, its memo lacking `key` (attention_terms'):
    add_attention_halves, which looked the key up itself, calls it directly."""
    prefix = key[0]
    same = c.memo_keys["attention_ids"][0].get(id(att), id(att))  # the model's first equal layer kind
    if same != id(att):
        hit = _ATTENTION_TERMS.get((prefix, same, key[2]))  # an equal layer kind's (DeepSeek-V3's dense and MoE)
        if hit is not None:
            return _ATTENTION_TERMS.put(key, hit)
    parts = attention_parts(c, att, x)
    if parts is None:
        return _ATTENTION_TERMS.put(key, ())
    rows, absorbed_rows, kernels = parts
    op_terms = _projection_terms(c, att, rows, absorbed_rows) + _op_terms(c, kernels)
    if "collective" not in map(_KIND, kernels):  # a collective's cost depends on more than the key
        if len(_ATTENTION_TERMS) >= ATTENTION_MEMO_MAX:  # BoundedMemo.put without its call
            _ATTENTION_TERMS.clear()
        _ATTENTION_TERMS[key] = op_terms
    return op_terms


_PROJECTION_TERMS = BoundedMemo(ATTENTION_MEMO_MAX)


def _projection_terms(c: Context, att: AttentionSpec, rows: float, absorbed_rows: float) -> tuple[tuple, ...]:
    """_op_terms of oplist._projection_ops(c, att, rows, absorbed_rows), remembered across layer kinds and plans:
    keyed on the Context's part (_projection_prefix), the model's first layer kind of equal projections
    (_attention_ids), the rows and the absorbed rows."""
    projection = c.memo_keys["attention_ids"][1].get(id(att))  # None: a layer kind not of the model (tests)
    prefix = c.memo_keys.get("projection")
    if prefix is None:
        prefix = _projection_prefix(c)
    key = (prefix, projection, rows, absorbed_rows)
    hit = _PROJECTION_TERMS.get(key) if projection is not None else None
    if hit is None:
        ops: list = []
        _projection_ops(ops, c, att, rows, absorbed_rows)
        hit = _op_terms(c, ops)
        if projection is not None:
            if len(_PROJECTION_TERMS) >= ATTENTION_MEMO_MAX:  # BoundedMemo.put without its call
                _PROJECTION_TERMS.clear()
            _PROJECTION_TERMS[key] = hit
    return hit


def _projection_prefix(c: Context) -> int:
    """The Context's part of _projection_terms' key, as a number (built once per Context): what oplist
    ._projection_ops (with the shape's projection fields, oplist._attention_shape) and _op_terms read of the
    Context, a subset of _attention_prefix's (plans that differ in the attention kernels, dp or dcp share it). That
    is the model (by identity), the rates table (by identity) and SM count, tp, the vllm-ascend platform options
    when the engine runs on it, the dense dtype's resolved sizes and kernel speed, the KV dtype's size (the cache
    write), the FP8 and NVFP4 GEMMs' K-loop bounds (Context.fp8_kloop, fp4_kloop), the W4A16 weight-stream cap and
    the MLA query concat."""
    phase = c.phase
    platform = tuple(sorted(phase.platform.items())) if profile(c.engine).ascend_platform else None
    prefix = (
        "projection", id(c.model), id(c.table), c.sms, phase.tp, platform, c.dense_dtype, c.dense_speed,
        c.dense_bytes, c.dense_quant_bytes, c.act_in_bytes, c.kv_elem_bytes, c.fp8_kloop, c.fp4_kloop,
        c.dense_stream_gbs, c.mla_query_concat,
    )  # fmt: skip
    hit = c.memo_keys["projection"] = number(prefix, (c.model, c.table))
    return hit


def _apart_terms(c: Context, att: AttentionSpec, x: StepInput) -> tuple[tuple, ...]:
    """The attention half of a step that carries prompt tokens and decodes where each attention-DP rank runs
    either a prefill or its own decodes (sharding.dp_prefill_apart; SGLang: get_next_batch_to_run picks the
    rank's prefill batch when it has one, else its running decode batch, srt/managers/scheduler.py:3971-4002,
    and the ranks meet at the MLP sync / MoE gather, maybe_prepare_mlp_sync_batch, scheduler.py:4005-4008): the
    layer waits for the longer of the busiest rank's prefill (its prompt tokens: opcore.rank_prompt_tokens) and a
    decoding rank's share of the decode rows, not their sum. Both halves are the prefill-only and decode-only
    steps' own (attention_terms), so the mixed steps of such an engine share them; with the busiest rank's prompt
    tokens placed (x.prefill_rank_tokens) the prefill half reads only those (opcore.attention_rows), so it is
    the one of a lone prompt of that many tokens on one rank, whatever the other ranks prefill."""
    rank = x.prefill_rank_tokens
    seqs = x.prefill_seqs * rank / x.prefill_tokens if rank else x.prefill_seqs  # the rank's prompts among them
    prefill = attention_terms(c, att, StepInput(0.0, 0.0, rank or x.prefill_tokens, x.prefill_ctx, 1.0, rank, seqs))
    decode = attention_terms(c, att, StepInput(x.decode_seqs, x.decode_ctx, decode_width=x.decode_width))
    return prefill if sum(map(_SECONDS, prefill)) >= sum(map(_SECONDS, decode)) else decode


_ATTENTION_SUMS = BoundedMemo(ATTENTION_MEMO_MAX)


def add_attention_halves(total: Cost, c: Context, groups: tuple, inputs: dict, x: StepInput) -> None:
    """Add the attention halves of every layer kind of `groups` (perf/layers.layer_groups of the Context's model,
    each kind times its layers / pp) at its input (`inputs`: x or x's decode part, by the kind's in_prefill) to
    the step's fresh `total`, in the order of `groups`. Without dcp the result is remembered across plans by
    the attention prefix, pp and x, which is all the additions read; it is restored as the same floats and the
    same by_rate notes (Cost.parts: op terms and times) in the same order."""
    phase = c.phase
    prefix = c.memo_keys.get("attention")  # _attention_prefix's number, once the Context has it
    if prefix is None:
        prefix = _attention_prefix(c)
    key = (prefix, phase.pp, step_input(x))
    hit = _ATTENTION_SUMS.get(key) if phase.dcp == 1 else None
    if hit is not None:
        total.compute_s, total.memory_s = hit[0], hit[1]
        total.parts.extend(hit[2])  # the additions' by_rate notes (Cost.parts), replayed when read
        return
    if phase.dcp > 1:
        for layer, count in groups:
            layer_x, times = inputs[layer.in_prefill], count / phase.pp
            _add_terms(total, attention_terms(c, layer.attention, layer_x), times)
            cost_ops(c, dcp_ops(c, layer.attention, layer_x), total, times)
        return
    pp = phase.pp
    # attention_terms' memo looked up here (its key: the prefix, the layer kind, the input as a plain tuple), a call
    # only on a miss or for the step's own input where its DP ranks run the prompts apart (_apart_terms)
    terms_get = _ATTENTION_TERMS.get
    x_keys = {True: key[2]}
    if x.prefill_tokens and x.decode_seqs and c.memo_keys["dp_apart"]:
        x_keys[True] = None
    for layer, count in groups:
        in_prefill, att = layer.in_prefill, layer.attention
        layer_x, times = inputs[in_prefill], count / pp
        x_key = x_keys.get(in_prefill, False)
        if x_key is False:  # the decode part (a layer outside prefill), keyed once a step
            x_key = x_keys[in_prefill] = step_input(layer_x)
        if x_key is None:
            op_terms = attention_terms(c, att, layer_x)
        else:
            term_key = (prefix, id(att), x_key)
            op_terms = terms_get(term_key)
            if op_terms is None:
                op_terms = _attention_miss(c, att, layer_x, term_key)
        _add_terms(total, op_terms, times)
    if not total.comm_s:
        if len(_ATTENTION_SUMS) >= ATTENTION_MEMO_MAX:  # BoundedMemo.put without its call
            _ATTENTION_SUMS.clear()
        _ATTENTION_SUMS[key] = (total.compute_s, total.memory_s, tuple(total.parts))


_FFN_KERNEL_TERMS = BoundedMemo(FFN_MEMO_MAX)


def ffn_kernel_terms(
    c: Context, ffn: FfnSpec, tokens: float, rows: float | None = None
) -> tuple[tuple, tuple, float, float]:
    """(_op_terms of oplist.ffn_kernel_ops, of oplist.ffn_norm_ops, and the compute and memory seconds _add_terms sums
    over both at times 1.0, in their order: ops._shared_ffn_cost adds the FFN's collectives between them, which add to
    neither sum), off vllm-ascend, remembered across plans. The kernels compute `rows` where attention DP's gather pads
    the step (oplist.padded_ffn_rows), else the step's `tokens`; the norms run the tokens. The key is what those
    builders and _op_terms read: the model and its FFN (by identity), the rates table (by identity) and SM count, tp /
    dp / ep, dense_dp and the engine profile's tp_spans_dp (the dense and shared layouts), the fused-norm limit
    (Context.fused_norm_max_tokens) and comm.all2all (the fused norms), the dense and expert dtypes' resolved sizes and
    kernel speeds and weight-stream cap (Context.moe_stream_gbs), the EP imbalance (oplist.ep_imbalance), the FP8 and
    NVFP4 GEMMs' K-loop bounds (Context.fp8_kloop, fp4_kloop), the routed GEMMs that pay tile-wave fixed time
    (Context.moe_tile_waves, read by ffn_shape.moe_wave_gemms), the shared experts fused into the routed ones
    (Context.fused_shared) and the quantised DP dispatch (Context.dispatch_act_bytes: the shared experts' layout,
    sharding.shared_expert_layout); then the FFN, the tokens and the padded rows. Equal FfnSpecs of the model's layer
    kinds share their terms."""
    prefix = c.memo_keys.get("ffn")
    if prefix is None:
        phase = c.phase
        parts = (
            "ffn", id(c.model), id(c.table), c.sms, profile(c.engine).ascend_platform,
            phase.tp, phase.dp, phase.ep, phase.dense_dp,
            profile(c.engine).tp_spans_dp, c.fused_norm_max_tokens, phase.comm.all2all,
            c.dense_dtype, c.dense_speed, c.dense_bytes, c.dense_quant_bytes, c.act_in_bytes,
            c.expert_dtype, c.expert_bytes, c.expert_quant_bytes, c.moe_speed, c.imbalance, c.fp8_kloop,
            c.fp4_kloop, c.moe_stream_gbs, c.dense_stream_gbs, c.moe_tile_waves, c.fused_shared, c.dispatch_act_bytes,
        )  # fmt: skip
        prefix = c.memo_keys["ffn"] = number(parts, (c.model, c.table))
    # `ffn` is one of the prefix's model's FFN halves; equal ones as the model's first (ops._ffn_facts' id map, in the
    # Context's memo_keys as "ffn_ids" once ops._ffn_cost has costed one): V4's layers that skip prompt tokens
    # hold FfnSpecs equal to the others'
    ids = c.memo_keys.get("ffn_ids")
    key = (prefix, ids.get(id(ffn), id(ffn)) if ids else id(ffn), tokens)
    if rows is not None:
        key += (rows,)
    hit = _FFN_KERNEL_TERMS.get(key)
    if hit is not None:
        return hit
    kernel_ops = ffn_kernel_ops(c, ffn, tokens if rows is None else rows)
    kernels, norms = _op_terms(c, kernel_ops), _op_terms(c, ffn_norm_ops(c, ffn, tokens))
    compute_s = memory_s = 0.0  # _add_terms' sums at times 1.0 over kernels + norms (its collectives add neither)
    for _, name, seconds, t_compute in kernels + norms:
        if name is None:
            compute_s += t_compute
            memory_s += seconds - t_compute
    if len(_FFN_KERNEL_TERMS) >= FFN_MEMO_MAX:  # BoundedMemo.put without its call
        _FFN_KERNEL_TERMS.clear()
    hit = _FFN_KERNEL_TERMS[key] = (kernels, norms, compute_s, memory_s)
    return hit


_HEADS = BoundedMemo(ATTENTION_MEMO_MAX)


def _head_prefix(c: Context) -> int:
    """The Context's part of the LM head kernels' memo key (_head_terms): what lm_head.head_kernel_ops and the
    costing pass read besides the rows, off the vocab-parallel-over-DP head: the model (by identity), the rates
    table (by identity) and SM count, tp / dp, and the vllm-ascend platform options when the engine runs on it."""
    prefix = c.memo_keys.get("head")
    if prefix is None:
        phase = c.phase
        platform = tuple(sorted(phase.platform.items())) if profile(c.engine).ascend_platform else None
        parts = ("head", id(c.model), id(c.table), c.sms, phase.tp, phase.dp, platform)
        prefix = c.memo_keys["head"] = number(parts, (c.model, c.table))
    return prefix


def _gather_prefix(c: Context) -> int:
    """The Context's part of the whole LM head's memo keys (head_cost, add_head): _head_prefix and, where the head
    all-gathers its logits over the TP group (lm_head.logits_gather_ops: tp > 1), what that collective's cost
    reads besides its bytes (costing.collective_s): the box (by identity), the TP group's GPUs and the NCCL
    environment; the rates table's collective scale and the vllm-ascend platform options are _head_prefix's.
    -1 for the head vocab-parallel over the DP ranks (head_over_dp), which is not remembered."""
    prefix = c.memo_keys.get("head_gather")
    if prefix is None:
        if head_over_dp(c.engine, c.phase):
            prefix = -1
        else:
            prefix = _head_prefix(c)
            tp = c.phase.tp
            if tp > 1:
                prefix = number(("head_gather", prefix, id(c.hw), c.stage[:tp], c.nccl), (c.hw,))
        c.memo_keys["head_gather"] = prefix
    return prefix


_HEAD_KERNEL_TERMS = BoundedMemo(ATTENTION_MEMO_MAX)
_HEAD_TERMS = BoundedMemo(ATTENTION_MEMO_MAX)


def _head_terms(c: Context, rows: float) -> tuple[tuple, ...]:
    """_op_terms(c, lm_head.head_ops(c, rows)) off the vocab-parallel-over-DP head: the kernels' terms, remembered
    across plans by _head_prefix and the rows (plans on other GPUs or NCCL settings share them), then the logits
    all-gather's (tp > 1), costed on the Context (its cost function is shared across Contexts: costing._comm_fn)."""
    key = (_head_prefix(c), rows)
    terms = _HEAD_KERNEL_TERMS.get(key)
    if terms is None:
        if len(_HEAD_KERNEL_TERMS) >= ATTENTION_MEMO_MAX:  # BoundedMemo.put without its call
            _HEAD_KERNEL_TERMS.clear()
        terms = _HEAD_KERNEL_TERMS[key] = _op_terms(c, head_kernel_ops(c, rows))
    if c.phase.tp > 1 and rows:
        terms += (collective_term(c, logits_gather(c, rows)),)
    return terms


def head_cost(c: Context, rows: float) -> Cost:
    """cost_ops(c, lm_head.head_ops(c, rows)), remembered across plans when the head is not vocab-parallel over the
    DP ranks (then its only collective is the TP logits all-gather), keyed on _gather_prefix and the rows. Callers
    must not mutate the Cost."""
    prefix = c.memo_keys.get("head_gather")  # _gather_prefix's, once the Context has it
    if prefix is None:
        prefix = _gather_prefix(c)
    if prefix < 0:
        return cost_ops(c, head_ops(c, rows))
    key = (prefix, rows)
    hit = _HEADS.get(key)
    if hit is not None:
        return hit
    if len(_HEADS) >= ATTENTION_MEMO_MAX:  # BoundedMemo.put without its call
        _HEADS.clear()
    hit = _HEADS[key] = _add_terms(Cost(), _head_terms(c, rows), 1.0)
    return hit


def add_head(total: Cost, c: Context, rows: float, times: float) -> None:
    """cost_ops(c, lm_head.head_ops(c, rows), total, times): the ops' terms (_head_terms) remembered across plans by
    _gather_prefix and the rows (the draft passes of speculative decoding add the head `times` over)."""
    prefix = c.memo_keys.get("head_gather")  # _gather_prefix's, once the Context has it
    if prefix is None:
        prefix = _gather_prefix(c)
    if prefix < 0:
        cost_ops(c, head_ops(c, rows), total, times)
        return
    key = (prefix, rows)
    terms = _HEAD_TERMS.get(key)
    if terms is None:
        terms = _HEAD_TERMS.put(key, _head_terms(c, rows))
    _add_terms(total, terms, times)
