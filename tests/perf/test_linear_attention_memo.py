"""The attention half's memo key (halves._attention_prefix) holds a linear-attention layer's prefill path
(linear_attention.prefill_path): SGLang 0.5.23 runs FlashInfer's one-kernel GDN prefill on sm_90 only up to a
32,768-token chunk (capability/profiles/sglang_0_5_23.py gdn_flashinfer_prefill), the FLA Triton chain above, so two
plans that differ only in their chunked-prefill tokens across that limit launch and cost different kernels."""

from __future__ import annotations

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import eager_host, halves, ops
from autotune.perf.costing import BoundedMemo
from autotune.perf.opcore import StepInput
from autotune.perf.ops import step_fn
from autotune.specs import Batching, PhasePlan

PROMPT = StepInput(prefill_tokens=8192.0)


def _clear() -> None:
    for module in (halves, eager_host, ops):
        for memo in vars(module).values():
            if isinstance(memo, BoundedMemo):
                memo.clear()


def _step(chunk: int, graphless: bool):
    m, hw = load_model("qwen3.5-397b-a17b"), load_preset("h200-x8")
    plan = PhasePlan(gpus=tuple(range(8)), tp=8, ep=8, batching=Batching(chunked_prefill_tokens=chunk))
    caps = (0.0, 0.0) if graphless else None
    return step_fn(m, plan, "sglang", hw, plan.gpus, "prefill", caps=caps)(PROMPT)


def test_a_chunk_past_flashinfer_s_gdn_limit_is_not_the_remembered_fused_prefill():
    for graphless in (False, True):  # the attention terms, and the eager host's launches (eager_host._half_launches)
        _clear()
        alone = _step(65536, graphless)
        _clear()
        fused = _step(8192, graphless)
        after = _step(65536, graphless)
        assert fused.step_ms != alone.step_ms  # the two paths' steps differ
        assert after == alone
