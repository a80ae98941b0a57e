"""A linear-attention layer's kernel ops (perf/linear_attention.py prices them): the short convolution, the gated
norm, the recurrent decode step and the prompt scan, kernel by kernel as each engine launches them. The op list
(perf/oplist.py attention_parts) adds them after the layer's projections."""

from __future__ import annotations

from autotune.perf import linear_attention
from autotune.perf.opcore import Context, Op, StepInput
from autotune.specs import AttentionSpec


def linear_kernel_ops(c: Context, att: AttentionSpec, x: StepInput, rows: float) -> list[Op]:
    """Linear-attention kernels (perf/linear_attention.py): the recurrent step for the decode rows, the chunked
    scan for the prompt tokens; no KV is read, the per-request state is. `rows`: the step's rows on the rank
    (oplist._rows)."""
    tp, dp, dtype = c.phase.tp, c.phase.dp, c.model.state_dtype
    conv, norm = linear_attention.side_kernel_bytes(att, rows, x.decode_seqs / dp, tp)
    # the short convolution (an elementwise pass) and the gated RMSNorm (a plain norm, no residual add): the
    # elementwise and norm floors of rates.MIN_US and the stream rate of their classes
    ops = [
        Op("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, conv, 1.0, "linear attention conv"),
        Op("norm", "bf16", "any", rows, 0.0, 0.0, 0.0, norm, 1.0, "linear attention gated norm"),
    ]
    if x.decode_seqs:
        seqs = x.decode_seqs / dp
        cost = linear_attention.decode_cost(att, seqs, x.decode_width, tp, dtype)
        # one kernel: vLLM's fused recurrent / sigmoid-gating decode (layers/mamba/gdn/qwen_gdn_linear_attn.py:82-83)
        ops.append(Op("attention", "bf16", "decode", seqs * x.decode_width, 0.0, 0.0, cost.flops, cost.nbytes,
                      1.0, f"linear attention ({att.kind})"))  # fmt: skip
    if x.prefill_tokens:
        tokens = x.prefill_rank_tokens or x.prefill_tokens / dp  # rank_prompt_tokens
        # the rank's prompts: its share of the step's, as of its tokens
        ops += _prefill_ops(c, att, tokens, x.prefill_seqs * tokens / x.prefill_tokens)
    return ops


def _prefill_ops(c: Context, att: AttentionSpec, tokens: float, seqs: float = 0.0) -> list[Op]:
    """A linear-attention layer's scan over `tokens` prompt tokens of `seqs` prompts (0: not counted) on one rank,
    kernel by kernel (linear_attention.prefill_path): a Gated DeltaNet layer's launches around the scan as one
    elementwise op of that many kernels, then the scan, FlashInfer's one kernel or the FLA Triton chain (each kernel
    at least the attention floor; the chain at least its serial chunk walk, linear_attention.chain_walk_s, carried as
    the FLOPs that take that long at the op's rate and speed; with the prompts' states read and written,
    linear_attention.scan_state_bytes); another linear kind's scan, or one on an engine that
    does not list the GDN kernels, as one op at the prior SCAN_SPEED. FlashInfer's kernel gets no such floor: vLLM
    calls it with use_cp "auto" (layers/mamba/gdn/qwen_gdn_linear_attn.py:405,442), under which a few prompts take
    FlashInfer's context-parallel route that splits their chunks over the SMs (:1670-1673); SGLang's call
    (srt/layers/attention/linear/kernels/gdn_flashinfer.py:566-581) leaves FlashInfer's default (not read here)."""
    la, tp, dtype = linear_attention, c.phase.tp, c.model.state_dtype
    path = la.prefill_path(c.engine, att, c.hw.gpu.arch, c.phase.batching.chunked_prefill_tokens, dtype)
    source = f"linear attention ({att.kind})"
    if not path.counted:
        cost = la.prefill_cost(att, tokens, tp, dtype)
        return [
            Op("attention", "bf16", "prefill", tokens, 0.0, 0.0, cost.flops, cost.nbytes, 1.0, source, la.SCAN_SPEED)
        ]
    cost = la.fused_prefill_cost(att, tokens, tp) if path.fused else la.chain_prefill_cost(att, tokens, tp)
    speed = la.FUSED_SPEED if path.fused else la.CHAIN_SPEED
    flops, nbytes = cost.flops, cost.nbytes
    if seqs:
        nbytes += la.scan_state_bytes(att, seqs, tp, dtype)
        if not path.fused:
            walk_s = la.chain_walk_s(att, tokens, seqs, tp, c.sms)
            flops = max(flops, walk_s * c.table.get("attention", "bf16", "prefill").tflops * 1e12 * speed)
    ops = [Op("attention", "bf16", "prefill", tokens, 0.0, 0.0, flops, nbytes, path.scan_kernels, source, speed)]
    if path.side_launches:
        prep = la.prep_bytes(att, tokens, tp)
        ops.append(
            Op("elementwise", "bf16", "any", tokens, 0.0, 0.0, 0.0, prep, path.side_launches, "linear attention prep")
        )
    return ops
