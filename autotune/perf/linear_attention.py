"""Linear-attention layers (Gated DeltaNet, Kimi Delta Attention) in hybrid models: kernel FLOPs and bytes and the
per-request state, as pure functions of an AttentionSpec with state_elems_per_seq > 0. oplist.py turns them into
ops; memory.py holds the state per running request.

A linear-attention layer keeps, per request, a recurrent state of num_heads x d_k x d_v (ModelSpec.state_dtype)
and a short-convolution window, instead of KV per token: its cost per token does not grow with the context.
- Prefill runs the chunkwise delta rule (Yang et al., "Gated Delta Networks", ICLR 2025, section 3.2; the FLA
  chunk kernels both engines call: vLLM third_party/flash_linear_attention/ops/chunk.py, SGLang
  kernels/ops/attention/fla/chunk.py):
  per token and head, intra-chunk products over the chunk (q.k^T, the WY/UT transform and the value mix:
  2 x CHUNK x (2 d_k + d_v) FLOPs) and three state products against the chunk's state (q.S, k.S and the
  k^T.u update: 3 x 2 d_k d_v); one state per chunk is written and read back. A Gated DeltaNet layer's prompt
  tokens are priced kernel by kernel (prefill_path below: FlashInfer's one kernel or the FLA Triton chain, and the
  launches around it, as the engine picks them); another linear kind (KDA) as that one op.
- Decode runs the recurrent step: the same three state products per token, the state read once and written back
  once per verified token (speculative decoding keeps each draft position's state for the rollback: SGLang's
  intermediate_ssm buffers, srt/mem_cache/kv_cache_configurator.py:3295-3323; vLLM's per-token mamba states).
Heads are split over the attention TP group in both engines (vLLM layers/mamba/gdn/qwen_gdn_linear_attn.py:809,1050;
SGLang srt/models/glm5_next.py:401-412 linear_attn_tp_size, which asserts heads % tp == 0).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from autotune.capability.profiles import profile
from autotune.specs import DTYPE_BYTES, AttentionSpec, ModelSpec, PhasePlan

# tokens per chunk of the chunkwise scan: vLLM layers/mamba/ops/gdn_chunk_cutedsl/__init__.py:186, SGLang
# srt/layers/attention/linear/kda_prefill_graph.py:59 (KDA_CHUNK_SIZE)
CHUNK = 64  # FLA_CHUNK_SIZE too: vLLM third_party/flash_linear_attention/ops/utils.py:32, SGLang fla/chunk.py:33
ACT_BYTES = 2  # bf16 q/k/v/gates read and outputs written by the kernels
# The scan kernels reach a lower share of the prefill-attention rate than flash attention (more small GEMMs and a
# sequential pass over the chunks). A prior, not measured: 0.5 of the attention prefill rate. Kept for the linear kinds
# other than Gated DeltaNet (KDA: prefill_cost), whose kernels are not counted one by one (CHAIN_SPEED / FUSED_SPEED).
SCAN_SPEED = 0.5


class LinearCost(NamedTuple):
    flops: float
    nbytes: float


def head_dims(att: AttentionSpec) -> tuple[float, float]:
    """(d_k, d_v) of one state head from the spec: score_dim = d_k + d_v and the state = heads x d_k x d_v."""
    prod = att.state_elems_per_seq / att.num_heads
    total = att.score_dim
    disc = max(0.0, total * total - 4 * prod)
    d_k = (total - disc**0.5) / 2
    return d_k, total - d_k


def state_bytes_per_rank(att: AttentionSpec, tp: int, state_dtype: str) -> float:
    """One request's state of this layer on one TP rank: recurrent state + convolution window."""
    return (att.state_elems_per_seq * DTYPE_BYTES[state_dtype] + att.conv_elems_per_seq * ACT_BYTES) / tp


def prefill_cost(att: AttentionSpec, tokens_per_rank: float, tp: int, state_dtype: str) -> LinearCost:
    """Chunkwise scan over `tokens_per_rank` prompt tokens (all sequences of the step) on one TP rank."""
    d_k, d_v = head_dims(att)
    heads = att.num_heads / tp
    per_token = heads * (2 * CHUNK * (2 * d_k + d_v) + 3 * 2 * d_k * d_v)
    io = tokens_per_rank * heads * (2 * d_k + 2 * d_v) * ACT_BYTES  # q, k, v (and gate) in, output out
    chunk_states = tokens_per_rank / CHUNK * heads * d_k * d_v * DTYPE_BYTES[state_dtype] * 2
    return LinearCost(per_token * tokens_per_rank, io + chunk_states)


# ---------------------------------------------------------------- Gated DeltaNet prefill, kernel by kernel

# FlashInfer's GDN prefill kernel takes head size 128 only (flashinfer gdn_prefill.py chunk_gated_delta_rule: "SM100
# path requires head_size == 128"; SGLang gdn_backend.py:218-219 asks linear_key / value_head_dim == 128 on every arch;
# sgl-project/sglang#20428's SM90 sweep skips head 64: "FlashInfer only supports head_size={128}")
FLASHINFER_HEAD_DIM = 128
# Kernel speeds against the attention prefill rate (the memory term too: costing.cost_ops), from
# flashinfer-ai/flashinfer#3902 (calibration.yaml kernel-flashinfer-gdn-prefill-gb200): Qwen3.5-35B shapes at TP1 (16
# key / 32 value heads of 128) on a GB200, 8 / 16 / 32 prompts of 8,192 tokens (256+ CTAs of one (sequence, head) each:
# the rows where the chunk walk fills the GPU), priced here on the B200 datasheet at speed 1 over the measured time.
# The FLA Triton chain (chain_prefill_cost, memory bound here): 0.425 / 0.426 / 0.431 -> 0.43. FlashInfer's kernel
# (fused_prefill_cost, compute bound here): 0.444 / 0.448 / 0.508 -> 0.45, their median (the GB200's GPU clocks above
# the B200's, ~1.1x its dense rate, make this up to ~10% high for a B200; no Hopper figure of the SM90 kernel found).
# Before: one prior, SCAN_SPEED, for both. calibration_check fla29_apart_rows shows the rows.
CHAIN_SPEED = 0.43
FUSED_SPEED = 0.45


# The chain's chunk walk: its state pass (chunk_gated_delta_rule_fwd_h) runs one program per (sequence, value head,
# BV-wide slice of d_v) that loops over the sequence's chunks in order (vLLM third_party/flash_linear_attention/ops/
# chunk_delta_h.py:142 `for i_t in range(NT)`, grid (cdiv(V, BV), N * H) at :320-321; SGLang kernels/ops/attention/
# fla/chunk_delta_h.py:167 and :401-402), so with few prompts the call takes about (chunks of a prompt) x (one chunk
# step), however many SMs sit idle. The step, from the FLA / Triton column of four public tables of Qwen3.5-397B's
# TP8 shape (2 key / 8 value heads of 128) at one prompt, (1 x 65,536 - 1 x 32,768) / 512 chunks (the fixed launch
# part cancels): GB200 1.785 us (flashinfer-ai/flashinfer#3902), H100 SXM 1.87 (#3866), B300 1.99 (#4078), RTX PRO
# 6000 Workstation 2.37 (#3659) -> 1.93, their median (calibration.yaml kernel-fla-gdn-prefill-one-prompt): nearly
# the same on every GPU, a latency-bound loop rather than the SM's rate.
CHAIN_WALK_STEP_US = 1.93
# d_v slice of one state-pass program: SGLang's default SGLANG_GDN_CHUNK_H_BV = 32 (fla/chunk_delta_h.py:24), one of
# vLLM's autotuned 32 / 64 (chunk_delta_h.py:34-39); one program resident per SM (a prior: the waves only matter
# where the walk is near the throughput time, which the source's multi-prompt rows never reach)
CHAIN_STATE_BV = 32


def chain_walk_s(att: AttentionSpec, tokens_per_rank: float, seqs_per_rank: float, tp: int, sms: int) -> float:
    """The FLA chain's serial chunk walk over `seqs_per_rank` prompts of `tokens_per_rank` tokens in all on one TP
    rank: waves of (prompt, value head, d_v slice) programs over the SMs, each wave the chunks of a (mean) prompt
    times CHAIN_WALK_STEP_US. 0 without a prompt count (the throughput time alone)."""
    if seqs_per_rank <= 0:
        return 0.0
    _, d_v, heads, _ = _gdn_dims(att, tp)
    programs = seqs_per_rank * heads * math.ceil(d_v / CHAIN_STATE_BV)
    waves = math.ceil(programs / sms - 1e-9) if sms else 1
    chunks = math.ceil(tokens_per_rank / seqs_per_rank / CHUNK - 1e-9)
    return waves * chunks * CHAIN_WALK_STEP_US * 1e-6


def reads_prompt_count(model: ModelSpec) -> bool:
    """Whether a step's time reads its count of prompts (StepInput.prefill_seqs): a Gated DeltaNet layer's chain
    walk (chain_walk_s); the simulator keys its step cache on the count only then (sim/step_cache.StepCache)."""
    return any(layer.attention.kind == "gdn" for layer in model.layers)


class PrefillPath(NamedTuple):
    """How one linear-attention layer runs its prompt tokens on an engine and GPU: kernel by kernel (`counted`: a
    Gated DeltaNet layer on an engine whose profile lists its GDN kernels) as FlashInfer's one kernel or the FLA
    Triton chain (`fused`), the kernels of the scan and the launches around it (EngineProfile.gdn_*); else one scan
    op at the prior SCAN_SPEED (prefill_cost)."""

    counted: bool
    fused: bool
    scan_kernels: int
    side_launches: int


_PATHS: dict[tuple, PrefillPath] = {}


def prefill_path(engine: str, att: AttentionSpec, arch: str, chunk_tokens: int, state_dtype: str) -> PrefillPath:
    """The engine profile's Gated DeltaNet prefill on `arch` (memoised: one per engine, layer kind and phase); other
    linear kinds (KDA), and engines whose profile does not list the GDN kernels (vllm-ascend), keep the one scan op."""
    key = (engine, att.kind, att.num_heads, att.score_dim, att.state_elems_per_seq, arch, chunk_tokens, state_dtype)
    path = _PATHS.get(key)
    if path is None:
        prof = profile(engine)
        if att.kind != "gdn" or not prof.gdn_chain_kernels:
            path = PrefillPath(False, False, 1, 0)
        else:
            pick = prof.gdn_flashinfer_prefill
            heads_fit = head_dims(att) == (FLASHINFER_HEAD_DIM, FLASHINFER_HEAD_DIM)
            fused = heads_fit and pick is not None and pick(arch, chunk_tokens, state_dtype)
            path = PrefillPath(
                True, fused, 1 if fused else prof.gdn_chain_kernels, prof.gdn_prefill_side_launches[fused]
            )
        _PATHS[key] = path
    return path


def _gdn_dims(att: AttentionSpec, tp: int) -> tuple[float, float, float, float]:
    """(d_k, d_v, value heads on a rank, key heads per value head: q / k are shared by a group of value heads)."""
    d_k, d_v = head_dims(att)
    return d_k, d_v, att.num_heads / tp, att.num_kv_heads / att.num_heads


def _gdn_flops_per_token(d_k: float, d_v: float) -> float:
    """One token and value head of the chunkwise delta rule as the kernels multiply (full CHUNK-wide tiles): k.k^T,
    w = A.(k beta), u = A.(v beta), q.k^T and (q.k^T).v_new over the chunk: 2 CHUNK (3 d_k + 2 d_v); w.S, k^T.v_new
    and q.S against the chunk's state: 3 x 2 d_k d_v."""
    return 2 * CHUNK * (3 * d_k + 2 * d_v) + 3 * 2 * d_k * d_v


def chain_prefill_cost(att: AttentionSpec, tokens_per_rank: float, tp: int) -> LinearCost:
    """The FLA Triton chain over `tokens_per_rank` prompt tokens on one TP rank, its bytes as vLLM's vendored kernels
    move them (third_party/flash_linear_attention/ops/chunk.py:37-81), per token and value head: k read by four
    kernels (kkt, w / u, the state pass, the output) and q by one, v read and the output written (bf16); A written in
    fp32 (chunk_scaled_dot_kkt.py:156), read and rewritten in bf16 by solve_tril, read by recompute_w_u (12 CHUNK
    bytes); w, u and v_new each written and read once (wy_fast.py:118-119, chunk_delta_h.py v_new); the per-chunk
    state h (chunk_delta_h.py `h = k.new_empty(B, NT, H, V, K)`: bf16, not the state dtype) written by the state pass
    and read by chunk_fwd_o; the fp32 gate read six times and beta twice. SGLang's chain fuses kkt, solve_tril and
    w / u (chunk_fwd.py), sparing most of A's traffic (~15% of these bytes): not modelled."""
    d_k, d_v, heads, kk = _gdn_dims(att, tp)
    per_token = (5 * kk * d_k + 2 * d_v) * ACT_BYTES + 12 * CHUNK + 2 * (d_k + 2 * d_v) * ACT_BYTES
    per_token += 2 * d_k * d_v * ACT_BYTES / CHUNK + 8 * 4
    rows = tokens_per_rank * heads
    return LinearCost(rows * _gdn_flops_per_token(d_k, d_v), rows * per_token)


def fused_prefill_cost(att: AttentionSpec, tokens_per_rank: float, tp: int) -> LinearCost:
    """FlashInfer's one-kernel GDN prefill: the same products, the state kept on chip across the chunks (one kernel
    per call: flashinfer gdn_prefill.py chunk_gated_delta_rule_sm90 / _sm100 / _sm120), so only q, k, v, the fp32
    gate and beta are read and the output written."""
    d_k, d_v, heads, kk = _gdn_dims(att, tp)
    rows = tokens_per_rank * heads
    return LinearCost(rows * _gdn_flops_per_token(d_k, d_v), rows * ((2 * kk * d_k + 2 * d_v) * ACT_BYTES + 2 * 4))


def prep_bytes(att: AttentionSpec, tokens_per_rank: float, tp: int) -> float:
    """The launches around a GDN scan (PrefillPath.side_launches): the q / k / v channels read and written once
    (vLLM's fused_post_conv_prep, SGLang's split and q / k L2 norm), the a / b projections read (bf16) and the gate
    and beta written (fp32). The states of the prompts are the scan's (scan_state_bytes)."""
    d_k, d_v = head_dims(att)
    channels = (2 * att.num_kv_heads * d_k + att.num_heads * d_v) / tp
    return tokens_per_rank * (2 * channels * ACT_BYTES + att.num_heads / tp * (2 * ACT_BYTES + 2 * 4))


def scan_state_bytes(att: AttentionSpec, seqs_per_rank: float, tp: int, state_dtype: str) -> float:
    """The recurrent states a GDN scan reads and writes on one TP rank: each prompt's initial state read and its
    final state written once (both kernels take initial_state and output_final_state: vLLM
    qwen_gdn_linear_attn.py:2141-2157, whose gather_initial_states copy before the call, ops/gather_initial_states.py:
    45-80, is left out; SGLang's kernels read and write the pool's slots in place, gdn_backend.py:1010-1013). Priced
    with the scan's bytes once the step counts its prompts (StepInput.prefill_seqs)."""
    return seqs_per_rank * 2 * att.state_elems_per_seq / tp * DTYPE_BYTES[state_dtype]


def decode_cost(att: AttentionSpec, seqs_per_rank: float, width: float, tp: int, state_dtype: str) -> LinearCost:
    """Recurrent step of `seqs_per_rank` sequences, each running `width` tokens (1 + drafts verified)."""
    d_k, d_v = head_dims(att)
    heads = att.num_heads / tp
    flops = seqs_per_rank * width * heads * 3 * 2 * d_k * d_v
    state = state_bytes_per_rank(att, tp, state_dtype)
    io = seqs_per_rank * width * heads * (2 * d_k + 2 * d_v) * ACT_BYTES
    return LinearCost(flops, seqs_per_rank * state * (1 + width) + io)


def side_kernel_bytes(
    att: AttentionSpec, tokens_per_rank: float, decode_seqs_per_rank: float, tp: int
) -> tuple[float, float]:
    """The two kernels around the scan / recurrent step, for `tokens_per_rank` rows of the layer on one TP rank:
    the depthwise short convolution over the q / k / v channels (2 x key heads x d_k + value heads x d_v: vLLM
    layers/mamba/gdn/qwen_gdn_linear_attn.py:1893 / 2287 causal_conv1d_update in decode, causal_conv1d_fn in
    prefill; SGLang srt/layers/attention/linear/gdn_backend.py:855), which reads the projected channels and
    writes them back and, per decoding sequence, reads and writes its convolution window; then the gated
    RMSNorm of the kernel output with the z gate (vLLM RMSNormGated, qwen_gdn_linear_attn.py:824 / 1256, or its
    fused form before out_proj, :1400; SGLang srt/models/qwen3_next.py:500), which reads the output and z and
    writes the normed rows. Each is one launch; neither is fused into the recurrent kernel (:2297).
    Returns (convolution bytes, norm bytes) moved on one rank."""
    d_k, d_v = head_dims(att)
    conv_channels = (2 * att.num_kv_heads * d_k + att.num_heads * d_v) / tp
    window = 2 * decode_seqs_per_rank * att.conv_elems_per_seq / tp * ACT_BYTES
    conv = 2 * tokens_per_rank * conv_channels * ACT_BYTES + window
    norm = 3 * tokens_per_rank * att.num_heads / tp * d_v * ACT_BYTES
    return conv, norm


# ---------------------------------------------------------------- the state each running request pins

# States a running request pins: the engine profile's `states_per_request` (the engines' own arithmetic, cited in
# the rule tables' MAMBA_* constants), drawn from the shared KV pool per request (vLLM) or a separate pool
# (SGLang --max-mamba-cache-size: the profile's `separate_state_pool`).


def states_per_request(engine: str, draft_tokens: int) -> int:
    return profile(engine).states_per_request + max(0, draft_tokens)


def one_state_bytes_per_gpu(model: ModelSpec, tp: int, pp: int) -> float:
    """One copy of a request's linear-attention state (all its layers of one pipeline stage) on one GPU."""
    per_layer = [
        state_bytes_per_rank(layer.attention, tp, model.state_dtype)
        for layer in model.layers
        if layer.attention.is_linear
    ]
    return sum(per_layer) / pp


def state_bytes_per_seq_per_gpu(model: ModelSpec, phase: PhasePlan, engine: str) -> float:
    """The state memory one running request takes on one GPU: its copies (states_per_request) of the state."""
    if not model.is_hybrid:
        return 0.0
    drafts = phase.speculative.draft_tokens if phase.speculative.method != "none" else 0
    return one_state_bytes_per_gpu(model, phase.tp, phase.pp) * states_per_request(engine, drafts)


def state_pool_bytes_per_gpu(model: ModelSpec, phase: PhasePlan, engine: str) -> float:
    """SGLang's separate state pool on one GPU, sized for the plan's max_running requests (0 for vLLM, whose
    states share the KV pool per request)."""
    if not profile(engine).separate_state_pool or not model.is_hybrid:
        return 0.0
    return state_bytes_per_seq_per_gpu(model, phase, engine) * phase.batching.max_running / phase.dp
