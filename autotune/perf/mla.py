"""The kernels of an absorbed-MLA attention module (DeepSeek-V3 / GLM-5 `mla`, `mla-dsa`) besides its projection
GEMMs and the attention kernel, as vLLM runs them (vllm 0.34.0 model_executor/layers/mla.py:165-257 and
model_executor/layers/attention/mla_attention.py):
- the q_a / kv_a RMSNorms on the down-projections' outputs (mla.py:192 and :219; one fused kernel when
  fuse_qkv_rmsnorm, :205-217);
- the rotary embedding of the queries' and the key's rope part (mla.py:229-232);
- in decode, the absorbed kv_b: the query's nope part times W_UK_T before the kernel and the latent output times
  W_UV after it, two batched GEMMs (mla_attention.py:1362 torch.bmm(mqa_q_nope, W_UK_T), :1633 torch.bmm(x, W_UV))
  in place of kv_b_proj, which runs only in forward_mha (:3469, and over a cached prefix in
  _compute_prefill_context, :3260): vLLM splits a batch's rows, decodes first (:1096-1097), the MHA path on the
  rest (:1129-1138) and the absorbed one on the decodes (:1165); SGLang's forward_absorb runs the same two bmms
  (srt/models/deepseek_common/attention_forward_methods/forward_mla.py:586, :926) and calls kv_b_proj only in
  forward_normal (forward_mha.py:288, forward_normal_prepare; :461 and :509 over a cached prefix). Their FLOPs
  are kv_b's on those rows (W_UK: nope -> kv_lora, W_UV: kv_lora -> v, per head); their weights are kv_b's in
  the activation dtype, whatever the checkpoint's: vLLM dequantises kv_b_proj to act_dtype for them
  (split_kv_b_proj, :416-431, called at :1457-1464), SGLang dequantises a 128 x 128 block-FP8 kv_b to bf16
  unless SGLANG_USE_DEEPGEMM_BMM is set (srt/models/deepseek_common/deepseek_weight_loader.py:691-708; default
  False, srt/environ.py:1375), and vllm-ascend takes kv_b unquantised (vllm_ascend/attention/mla_v1.py:922-924).
  Their activations: the first reads the nope part (qk_nope_head_dim per head) and writes the latent query
  (kv_lora_rank), the second reads the latent output and writes the value (v_head_dim), per row and head. The TP-split
  projection op leaves kv_b out of these rows (mla_ops.split_projections).
The KV-cache write (concat_and_cache_mla) is the op list's `kv cache write`. A prefill row takes the MHA path
instead of the absorbed one (mla_attention.py:3444-3526, forward_mha): kv_b up-projects the new tokens' latent KV
(the projection op's kv_b, FP8 where the checkpoint's is), then
- the key is built whole in memory, its nope part from the up-projection and the shared rope part broadcast to
  every head (_concat_k_nope_k_pe, :3139-3172; SGLang the same: srt/models/deepseek_common/
  attention_forward_methods/forward_mha.py:718-750), one kernel (FlashInfer's concat_mla_k at 128 heads per rank,
  SGLang's concat_mla_k or its Triton concat elsewhere; vLLM's two-copy fallback at other head counts is counted
  as one);
- vLLM copies the attention output into the layer's output buffer (output.copy_, :3521-3526): the output is read
  and written once more.
Pure functions: oplist builds the ops.
"""

from __future__ import annotations

from typing import NamedTuple

from autotune.perf import precision
from autotune.specs import AttentionSpec

ROPE_DIM = 64  # qk_rope_head_dim of DeepSeek-V3 and GLM-5 (their config.json), the rope part of the latent key
NORM_KERNELS = 2  # q_a_layernorm, kv_a_layernorm (vLLM's default path, fuse_qkv_rmsnorm off)
ROPE_KERNELS = 1
ABSORB_GEMMS = 2  # the W_UK_T and W_UV batched GEMMs (above)
# their weights' bytes per element: the activation dtype's (bf16) in every engine (above)
ABSORB_WEIGHT_BYTES = precision.ACTIVATION_BYTES


class ModuleKernels(NamedTuple):
    norm_kernels: int
    norm_bytes: float  # read + write of the down-projections' outputs
    rope_kernels: int
    rope_bytes: float  # read + write of the rope parts of the queries and the key
    absorb_gemms: int  # the absorbed batched GEMMs' launches (absorbed rows only)
    absorb_flops: float  # their FLOPs
    absorb_bytes: float  # their weights (ABSORB_WEIGHT_BYTES) and activation reads and writes


def is_absorbed_mla(att: AttentionSpec) -> bool:
    """MLA whose decode runs in the latent space (score_dim_decode: kv_lora + rope + kv_lora per head)."""
    return att.latent_shared and att.score_dim_decode > 0


def module_kernels(att: AttentionSpec, rows: float, heads_per_rank: float, down_width: float, absorbed_rows: float,
                   act_bytes: float) -> ModuleKernels:  # fmt: skip
    """The module's extra kernels for `rows` tokens on a rank holding `heads_per_rank` heads, `absorbed_rows` of
    them on the absorbed (decode) path; `down_width` is the replicated down-projections' output width per row
    (q_a + kv_a, and the indexer's where the model has one). The nope and value widths are score_dim's halves
    less the rope part (as in prefill_kernels), the latent width score_dim_decode's (kv_lora + rope + kv_lora)."""
    norm_bytes = 2 * rows * down_width * act_bytes
    rope_bytes = 2 * rows * (heads_per_rank + 1) * ROPE_DIM * act_bytes
    if not absorbed_rows:
        return ModuleKernels(NORM_KERNELS, norm_bytes, ROPE_KERNELS, rope_bytes, 0, 0.0, 0.0)
    k_width = (att.score_dim + ROPE_DIM) / 2
    nope, v_width = k_width - ROPE_DIM, att.score_dim - k_width
    kv_lora = (att.score_dim_decode - ROPE_DIM) / 2
    weights = kv_b_params(att) * heads_per_rank / att.num_heads  # the rank's heads' W_UK and W_UV
    absorb = absorbed_rows * heads_per_rank * (nope + 2 * kv_lora + v_width) * act_bytes
    absorb += weights * ABSORB_WEIGHT_BYTES
    flops = 2 * absorbed_rows * weights
    return ModuleKernels(NORM_KERNELS, norm_bytes, ROPE_KERNELS, rope_bytes, ABSORB_GEMMS, flops, absorb)


def kv_b_params(att: AttentionSpec) -> float:
    """kv_b_proj's parameters: kv_lora x heads x (nope + v) (DeepSeek-V3: 512 x 128 x 256); nope + v is score_dim
    less the rope part, kv_lora score_dim_decode's (kv_lora + rope + kv_lora)."""
    return (att.score_dim_decode - ROPE_DIM) / 2 * att.num_heads * (att.score_dim - ROPE_DIM)


class PrefixKernels(NamedTuple):
    gather_bytes: float  # the prefix's latent KV read from the paged cache, written to the workspace (bf16)
    up_n: float  # kv_b's output width per rank: (nope + v) per head
    up_k: float  # its input width: kv_lora
    concat_bytes: float  # the prefix's keys built per head (as prefill_kernels' concat)
    merge_bytes: float  # the prefix's and the new tokens' outputs merged (read both, write one)


def prefix_kernels(att: AttentionSpec, prefix_tokens: float, tokens: float, heads_per_rank: float,
                   kv_elem_bytes: float, act_bytes: float) -> PrefixKernels:  # fmt: skip
    """The kernels an MHA-path prefill of `tokens` new rows runs over its `prefix_tokens` cached rows (summed over
    its sequences): EngineProfile.mla_prefill_prefix_up_projection. Widths as prefill_kernels takes them."""
    k_width = (att.score_dim + ROPE_DIM) / 2
    v_width = att.score_dim - k_width
    kv_lora = (att.score_dim_decode - ROPE_DIM) / 2
    latent = kv_lora + ROPE_DIM
    gather = prefix_tokens * latent * (kv_elem_bytes + act_bytes)
    up_n = heads_per_rank * (k_width - ROPE_DIM + v_width)
    concat = prefix_tokens * (heads_per_rank * (2 * k_width - ROPE_DIM) + ROPE_DIM) * act_bytes
    merge = 3 * tokens * heads_per_rank * v_width * act_bytes
    return PrefixKernels(gather, up_n, kv_lora, concat, merge)


def query_concat_bytes(att: AttentionSpec, rows: float, heads_per_rank: float, act_bytes: float) -> float:
    """The decode query's concat (Context.mla_query_concat): the latent part (kv_lora) and the rope part of every
    row and head read, the joined query written."""
    return 2 * rows * heads_per_rank * ((att.score_dim_decode - ROPE_DIM) / 2 + ROPE_DIM) * act_bytes


def triton_decode_splits(ctx: float, sms: int, split_tokens: int) -> int:
    """KV splits of the Triton MLA decode kernel at context `ctx`: the power of two at or above ctx / split_tokens
    (at least 1), at most 2 per SM (vLLM's _compute_num_kv_splits: EngineProfile.triton_mla_split_tokens)."""
    ideal = max(1, int(ctx // split_tokens))
    splits = 1 << (ideal - 1).bit_length()
    return min(splits, 2 * sms) if sms > 0 else splits


def triton_scratch_bytes(att: AttentionSpec, rows: float, heads_per_rank: float, splits: int) -> float:
    """The fp32 partial outputs (kv_lora + 1 values: the latent output and its log-sum-exp) of every (query row,
    head, split) that the Triton MLA decode's first stage writes and its second stage reads back."""
    kv_lora = (att.score_dim_decode - ROPE_DIM) / 2
    return 2 * rows * heads_per_rank * splits * (kv_lora + 1) * 4


class PrefillKernels(NamedTuple):
    concat_bytes: float  # the key concat: reads the up-projected nope part and the rope part, writes the key
    copy_bytes: float  # vLLM's output copy (0 where the engine writes the output in place)


def prefill_kernels(att: AttentionSpec, tokens: float, heads_per_rank: float, act_bytes: float,
                    output_copy: bool) -> PrefillKernels:  # fmt: skip
    """The MHA-path kernels of `tokens` prefill rows on a rank holding `heads_per_rank` heads. The key width
    (nope + rope) and the value width are taken as score_dim's halves around ROPE_DIM ((score_dim +- ROPE_DIM) / 2:
    DeepSeek-V3's 192 and 128 exactly)."""
    k_width = (att.score_dim + ROPE_DIM) / 2
    v_width = att.score_dim - k_width
    concat = tokens * (heads_per_rank * (2 * k_width - ROPE_DIM) + ROPE_DIM) * act_bytes
    copy = 2 * tokens * heads_per_rank * v_width * act_bytes if output_copy else 0.0
    return PrefillKernels(concat, copy)


def query_quant_width(att: AttentionSpec, down_width: float, hidden: int) -> float:
    """The input width of the split query projection of an absorbed-MLA layer, which an FP8 checkpoint quantises in a
    kernel of its own besides the down-projections' and o_proj's inputs: q_b reads q_a_layernorm's bf16 output,
    q_lora wide (the replicated down-projections' width `down_width` less the latent KV's, kv_lora + ROPE_DIM);
    without a query down-projection q_proj reads the hidden rows. SGLang 0.5.23: every block-FP8 linear quantises
    its input first (srt/layers/quantization/fp8_utils.py:1556-1578, sglang_per_token_group_quant_fp8 then
    DeepGEMM), q_b_proj runs on the norm's output (srt/models/deepseek_v2.py:2565-2570), and the RMSNorm fuses only
    a static per-tensor quant (srt/layers/layernorm.py:554-567); DeepSeek's own H800 decode trace times it as its
    own kernel (calibration.yaml trace-deepseek-h800-decode-kernels: q_b_quant 2 us). vLLM the same by the op
    list's reading of FP8 quants (precision.standalone_quants). On a DSA layer (GLM-5.x) the replicated width also
    holds the indexer's projections, whose own quant kernels are not modelled: the wider read stands in for them.
    Reads only fields the projection memo keys (halves.PROJECTION_FREE). 0 for other layers."""
    if not is_absorbed_mla(att) or not att.replicated_params:
        return 0.0
    q_lora = down_width - ((att.score_dim_decode - ROPE_DIM) / 2 + ROPE_DIM)
    return q_lora if q_lora > 0 else float(hidden)
