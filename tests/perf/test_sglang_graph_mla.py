"""SGLang 0.5.23 replays a prompt-carrying step of at most its prefill graph's tokens (min(8192, chunk) for an MLA
model, capability/profiles/sglang_0_5_23.py graph_caps) in its breakable CUDA graph, and a captured prefill keeps one
attention path, the absorbed MLA method over the latent KV (srt/models/deepseek_common/attention_backend_handler.py
:108-113): such a step's prompts are priced on the absorbed path (576 + 512 per head and KV entry, not the MHA
path's 192 + 128), larger (eager) steps on MHA. Each test fails on the model before hopper36 (every SGLang prefill
took the MHA path)."""

from __future__ import annotations

import dataclasses

from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf import halves
from autotune.perf.opcore import context
from autotune.perf.oplist import attention_ops
from autotune.perf.ops import StepInput, cost_ops, step_fn
from autotune.specs import Batching, PhasePlan

H200 = load_preset("h200-x8")
R1 = load_model("deepseek-v3")
EIGHT = tuple(range(8))
# InferenceX's SGLang launch of DeepSeek-R1 on 8x H200 (calibration.yaml inferencex-sglang-r1-fp8-h200-tp8-c4)
PHASE = PhasePlan(gpus=EIGHT, tp=8, batching=Batching(max_running=256, chunked_prefill_tokens=32768))
ABSORBED, CONCAT = "kernels.attention (absorbed prefill)", "mla prefill key concat"


def _ops(c, x):
    return {op.source: op for op in attention_ops(c, R1.layers[-1].attention, x)}


def test_sglang_pins_absorbed_mla_in_its_prefill_graph_and_vllm_does_not():
    assert profile("sglang").mla_graph_prefill_absorbed
    assert not profile("vllm").mla_graph_prefill_absorbed
    assert context(R1, PHASE, "sglang", H200, EIGHT).mla_absorbed_step_tokens == 8192  # min(8192, chunk 32768)
    assert context(R1, PHASE, "vllm", H200, EIGHT).mla_absorbed_step_tokens == 0


def test_a_prompt_within_the_prefill_graph_runs_absorbed_and_a_larger_step_mha():
    """A 7,373-token prompt (InferenceX's 8k/1k band) runs absorbed: one attention kernel on the decode path scoring
    the latent key, 3.4x the MHA path's FLOPs; four of them together (29.5K tokens, above the graph) take MHA."""
    c = context(R1, PHASE, "sglang", H200, EIGHT)
    one = StepInput(prefill_tokens=7373.0, prefill_ctx=7373 / 2)
    ops = _ops(c, one)
    assert ABSORBED in ops and CONCAT not in ops and ops[ABSORBED].bucket == "decode"
    four = _ops(c, StepInput(prefill_tokens=4 * 7373.0, prefill_ctx=7373 / 2))
    assert CONCAT in four and ABSORBED not in four
    mha = [op for op in _ops(context(R1, PHASE, "sglang", H200, EIGHT, graph_tokens=0.0), one).values()
           if op.kind == "attention"]  # fmt: skip
    assert ops[ABSORBED].flops / sum(op.flops for op in mha) > 3.0  # (576 + 512) / (192 + 128) = 3.4


def test_decode_rows_count_toward_the_graph():
    """_step replays the graph while the step's decode rows plus prompt tokens fit: 8,000 prompt tokens with 256
    decoding sequences (8,256 > 8,192) run eagerly, on MHA."""
    c = context(R1, PHASE, "sglang", H200, EIGHT)
    # within the graph the prompt joins the decode rows' kernel (mla_ops.absorbed_prefill_ops): no MHA key concat
    within, above = (
        StepInput(decode_seqs=n, decode_ctx=2048.0, prefill_tokens=8000.0, prefill_ctx=4000.0) for n in (64.0, 256.0)
    )
    assert CONCAT not in _ops(c, within) and CONCAT in _ops(c, above)


def test_step_fn_takes_its_own_caps():
    """A graphless step_fn (caps (0, 0): every step eager) prices the prompt on MHA; the engine's caps, absorbed."""
    x = StepInput(prefill_tokens=7373.0, prefill_ctx=7373 / 2)
    graphed = step_fn(R1, PHASE, "sglang", H200, EIGHT, "prefill")(x).rates_ms
    eager = step_fn(R1, PHASE, "sglang", H200, EIGHT, "prefill", caps=(0.0, 0.0))(x).rates_ms
    assert "attention/bf16/decode" in graphed and "attention/bf16/prefill" not in graphed
    assert "attention/bf16/prefill" in eager and "attention/bf16/decode" not in eager


def test_the_graph_cap_enters_the_attention_memo_key():
    """Two Contexts that differ only in the graph's step tokens must not share memoised attention terms."""
    c = context(R1, PHASE, "sglang", H200, EIGHT)
    off = dataclasses.replace(c, mla_absorbed_step_tokens=0.0, memo_keys={}, attention_shapes={})
    x = StepInput(prefill_tokens=7373.0, prefill_ctx=7373 / 2)
    att = R1.layers[-1].attention
    assert halves._attention_prefix(c) != halves._attention_prefix(off)
    assert halves.attention_terms(c, att, x) != halves.attention_terms(off, att, x)
    assert cost_ops(c, attention_ops(c, att, x)).time_s > cost_ops(off, attention_ops(off, att, x)).time_s


def test_deepseek_v3_on_trtllm_mla_runs_prefill_eagerly():
    """DeepseekV3ForCausalLM on compute capability 10.x with no attention backend named runs trtllm_mla
    (arg_groups/model_overrides/deepseek_v2.py:178-188), and SGLang turns the prefill graph off for it
    (arg_groups/cuda_graph_hook.py:279-311): no prefill graph, so no absorbed prefill; a named backend keeps both."""
    from tests.perf.boxes import b200_box

    caps = profile("sglang").graph_caps
    b200 = b200_box()
    assert caps("sm_100", 180.0, R1, PHASE, 1)[1] == 0
    assert caps("sm_90", 141.0, R1, PHASE, 1)[1] == 8192
    named = dataclasses.replace(PHASE, kernels=dataclasses.replace(PHASE.kernels, attention="flashinfer"))
    assert caps("sm_100", 180.0, R1, named, 1)[1] == 8192
    x = StepInput(prefill_tokens=7373.0, prefill_ctx=7373 / 2)
    assert CONCAT in _ops(context(R1, PHASE, "sglang", b200, EIGHT), x)
    assert ABSORBED in _ops(context(R1, named, "sglang", b200, EIGHT), x)
