"""The bit-identical speed-ups of the evaluation round spd29b (plan level): the layout part of predict's phase check
remembered across plans (predict._LAYOUT_REASONS), keyed on everything it reads; serving.Point a NamedTuple."""

from __future__ import annotations

import importlib

from autotune.catalog import load_model, load_preset
from autotune.perf import serving
from autotune.specs import PhasePlan
from autotune.specs.plan import Comm

DENSE, MOE, QWEN = load_model("llama-3.1-70b"), load_model("deepseek-v3"), load_model("qwen3-235b-a22b")
predict_module = importlib.import_module("autotune.perf.predict")  # the package exports the function under this name
H200, PCIE = load_preset("h200-x8"), load_preset("rtx-pro-6000-x8")


def _phase(tp=1, dp=1, ep=1, pp=1, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(tp * dp * pp)), tp=tp, dp=dp, ep=ep, pp=pp, dp_attention=dp > 1, **kw)


def _reasons(pairs):
    """Each (phase, model)'s reason, the first of each pair checked first so that the second could reuse its entry."""
    predict_module._LAYOUT_REASONS.clear()
    return [predict_module._check_phase(phase, model, H200) for phase, model in pairs]


def test_each_key_field_of_the_layout_memo_moves_the_reason():
    """Two phases that differ in one field of the memo's key (the model, tp, dp, ep, pp) get different reasons, in
    either order, and each the reason the uncached check gives."""
    cases = [
        ((_phase(tp=2), MOE), (_phase(tp=3), MOE)),  # 3 does not divide the heads
        ((_phase(dp=1), DENSE), (_phase(dp=2), DENSE)),  # dp > 1 needs a MoE model
        ((_phase(dp=3, ep=1), QWEN), (_phase(dp=3, ep=3), QWEN)),  # 3 divides 1536 but not 128 experts
        ((_phase(pp=2), MOE), (_phase(pp=MOE.num_layers + 1), MOE)),  # more stages than layers
        ((_phase(dp=2, ep=2), MOE), (_phase(dp=2, ep=2), DENSE)),  # the model
    ]
    for first, second in cases:
        for pair in ((first, second), (second, first)):
            got = _reasons(pair)
            assert got[0] != got[1]
            assert got == [predict_module._layout_reason(phase, model) for phase, model in pair]


def test_a_remembered_layout_still_checks_deepep_links():
    """The memo keeps the layout's reason only: DeepEP's NVLink check reads the phase's GPUs and the box each time."""
    predict_module._LAYOUT_REASONS.clear()
    phase = _phase(dp=2, ep=2, comm=Comm(all2all="deepep"))
    assert predict_module._check_phase(phase, MOE, H200) == ""
    assert "NVLink" in predict_module._check_phase(phase, MOE, PCIE)
    assert predict_module._check_phase(phase, MOE, H200) == ""


def test_point_fields_read_by_name():
    p = serving.Point(1.0, 2.0, 3.0, 4.0, ())
    assert (p.requests_per_s, p.ttft_ms, p.tpot_ms, p.concurrency, p.steps) == (1.0, 2.0, 3.0, 4.0, ())
