"""SGLang's FFN half after a MAX_LEN attention-DP gather (perf/dp_gather.py): the gathered buffer holds every rank's
rows padded to the prompt graph's bucket, and the FFN's kernels (the dense MLP under the 'all' layout, the router,
the shared and routed experts) run every row of it, padding included: the MoE's bound on real rows is None for a
buffer gathered over attention-DP ranks (srt/model_executor/forward_batch_info.py:1409-1440). An eager prompt step
(SUM_LEN) and vLLM keep the step's tokens; an a2a (DeepEP) MoE layer routes its own rows, padded rows masked."""

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import efficiency as eff
from autotune.perf.costing import _op_terms
from autotune.perf.dp_gather import dp_gather
from autotune.perf.halves import ffn_kernel_terms
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import ffn_kernel_ops, padded_ffn_rows
from autotune.perf.ops import step_fn
from autotune.specs import Comm, PhasePlan

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")
DENSE, MOE = DSV3.layers[0].ffn, DSV3.layers[-1].ffn
PROMPT = StepInput(56, 2000.0, 1024, 0.0, 1.0, 1024)  # one rank prefills 1024 tokens beside 56 decodes elsewhere
TOKENS = 56 + 1024
PADDED = 8 * 1024  # every rank's block padded to the prompt rank's 1024-row bucket
EVEN = StepInput(0, 0.0, PADDED, 0.0)  # 1024 prompt tokens on every rank: the same 8192-row buffer, no padding


def _phase(tp=1, dp=8, ep=8, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(8)), tp=tp, dp=dp, ep=ep, dp_attention=True, **kw)


def _gather(engine, phase, x, caps=None):
    c = context(DSV3, phase, engine, H200, phase.gpus)
    caps = caps or eff.graph_caps(DSV3, phase, engine, H200, 1)
    return c, dp_gather(c, x, bool(x.prefill_tokens), caps)


def _kernel_ms(engine: str, phase: PhasePlan, x: StepInput, caps=None) -> dict:
    """The step's routed-MoE and GEMM time by rates-table key (ms), attention's GEMMs included."""
    step = step_fn(DSV3, phase, engine, H200, phase.gpus, "p", caps=caps)(x)
    return {k: v for k, v in step.rates_ms.items() if k.startswith("grouped_moe")}


def test_the_ffn_kernels_of_a_graphed_prompt_step_run_the_padded_buffer():
    c, gather = _gather("sglang", _phase(), PROMPT)
    assert gather.rows == PADDED
    for ffn in (DENSE, MOE):  # the dense MLP (layout 'all') and the MoE layer: router, shared and routed experts
        assert padded_ffn_rows(c, ffn, TOKENS, gather) == PADDED
        kernels, norms, _, _ = ffn_kernel_terms(c, ffn, TOKENS, PADDED)
        assert kernels == _op_terms(c, ffn_kernel_ops(c, ffn, PADDED))
    # the step's routed experts cost what the 8192-row buffer of an even prompt step costs, not the 1080 real rows
    padded, even = _kernel_ms("sglang", _phase(), PROMPT), _kernel_ms("sglang", _phase(), EVEN)
    assert padded == pytest.approx(even, rel=1e-12)
    eager = _kernel_ms("sglang", _phase(), PROMPT, caps=(2048, 0))  # no prompt graph: SUM_LEN, the real rows
    assert sum(eager.values()) < 0.5 * sum(padded.values())


def test_an_eager_step_vllm_and_an_a2a_moe_layer_keep_the_steps_tokens():
    c, gather = _gather("sglang", _phase(), PROMPT, caps=(2048, 0))  # SUM_LEN: a buffer of the real rows
    assert padded_ffn_rows(c, MOE, TOKENS, gather) is None
    c, gather = _gather("vllm", _phase(), PROMPT)
    assert gather is None and padded_ffn_rows(c, MOE, TOKENS, gather) is None
    deepep = _phase(comm=Comm(all2all="deepep"))
    c, gather = _gather("sglang", deepep, PROMPT)
    assert padded_ffn_rows(c, MOE, TOKENS, gather) is None  # routes the rank's own rows, padded ones masked
    assert padded_ffn_rows(c, DENSE, TOKENS, gather) == PADDED  # the dense MLP still runs the gathered buffer


def test_the_kernel_memo_keys_the_padded_rows():
    c, gather = _gather("sglang", _phase(ep=1), PROMPT)
    plain = ffn_kernel_terms(c, MOE, TOKENS)
    padded = ffn_kernel_terms(c, MOE, TOKENS, padded_ffn_rows(c, MOE, TOKENS, gather))
    assert plain[0] == _op_terms(c, ffn_kernel_ops(c, MOE, TOKENS))
    assert padded[0] == _op_terms(c, ffn_kernel_ops(c, MOE, PADDED)) != plain[0]
    assert padded[1] == plain[1]  # the norms run the step's tokens
