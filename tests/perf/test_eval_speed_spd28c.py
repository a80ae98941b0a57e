"""The bit-identical speed-up of the evaluation round spd28c (tests/bench/bench_predict.py after this stop's fidelity
merges): the FFN half's kernel and norm sums remembered with their terms (halves.ffn_kernel_terms), so that a
Context's FFN half (ops._shared_ffn_cost) adds only its collectives. Checked against the computation it replaces."""

from __future__ import annotations

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import dp_gather as gathers
from autotune.perf import efficiency as eff
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import padded_ffn_rows
from autotune.specs import PhasePlan

H200, PRO = load_preset("h200-x8"), load_preset("rtx-pro-6000-x8")
DSV3 = load_model("deepseek-v3")
STEPS = (
    StepInput(56, 2000.0, 1024, 0.0, 1.0, 1024),
    StepInput(64, 2000.0),
    StepInput(3, 2000.0),  # idle ranks
    StepInput(2048, 2000.0),
    StepInput(16, 2000.0, decode_width=3.0),  # verify
)


def _phase(gpus=tuple(range(8)), tp=1, dp=8, ep=8, **kw) -> PhasePlan:
    return PhasePlan(gpus=gpus, tp=tp, dp=dp, ep=ep, dp_attention=True, **kw)


V41 = load_model("deepseek-v4.1-flash")
FFN_CASES = [  # (model, box, engine, phase): TP all-reduces (fused norms), DP gathers, DeepEP all-to-alls, dense layers
    (DSV3, H200, "vllm", PhasePlan(gpus=tuple(range(8)), tp=8)),
    (DSV3, H200, "sglang", _phase()),
    (DSV3, H200, "sglang", _phase(tp=2, dp=4, ep=8)),
    (V41, PRO, "sglang", _phase(tp=2, dp=4, ep=8)),
    (V41, PRO, "vllm", PhasePlan(gpus=tuple(range(4)), tp=4)),
]


@pytest.mark.parametrize(("model", "hw", "engine", "phase"), FFN_CASES)
@pytest.mark.parametrize("x", STEPS[:4])
def test_the_ffn_half_is_the_one_add_terms_makes(model, hw, engine, phase, x):
    """ops._shared_ffn_cost takes the kernels' and norms' compute and memory sums from halves.ffn_kernel_terms and
    adds only the collectives: the same floats, comm seconds and by_rate notes as _add_terms over kernels, collectives
    and norms in that order (the code before)."""
    from autotune.perf import halves, ops
    from autotune.perf.costing import Cost, _add_terms, _op_terms
    from autotune.perf.oplist import ffn_comm_ops

    c = context(model, phase, engine, hw, phase.gpus)
    caps = eff.graph_caps(model, phase, engine, hw, 1)
    tokens = x.decode_seqs * x.decode_width + x.prefill_tokens
    gather = gathers.dp_gather(c, x, bool(x.prefill_tokens), caps)
    for ffn in {layer.ffn: None for layer in model.layers}:
        rows = padded_ffn_rows(c, ffn, tokens, gather)  # the padded buffer's (test_sglang_padded_ffn_rows.py)
        kernels, norms, compute_s, memory_s = halves.ffn_kernel_terms(c, ffn, tokens, rows)
        comm = _op_terms(c, ffn_comm_ops(c, ffn, tokens, gather))
        before = _add_terms(Cost(), kernels + comm + norms, 1.0)
        after = ops._shared_ffn_cost(c, ffn, tokens, gather)
        assert (after.compute_s, after.memory_s) == (before.compute_s, before.memory_s) == (compute_s, memory_s)
        assert list(after.comm_s.items()) == list(before.comm_s.items()) and comm
        assert after.parts == before.parts
        assert list(after.by_rate.items()) == list(before.by_rate.items())
