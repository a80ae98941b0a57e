"""spd29a's evaluation-speed refactors of the step's halves are bit-identical to the paths they replace: the FFN
half's collectives costed by costing.collective_terms (not _op_terms), ffn_comm_ops' fused all-reduces rebuilt without
Op._replace, the pipeline hand-off added as terms (not a Cost), the draft layer run on its own decode part."""

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import ops
from autotune.perf.costing import Cost, _add_terms, _op_terms, collective_terms, cost_ops
from autotune.perf.opcore import FUSED_ALLREDUCE, StepInput, _collective, context
from autotune.perf.oplist import ffn_comm_ops, layer_input
from autotune.specs import Comm, PhasePlan, Speculative

H200 = load_preset("h200-x8")
RTX = load_preset("rtx-pro-6000-x8")
DSV3 = load_model("deepseek-v3")
V41 = load_model("deepseek-v4.1-flash")

PHASES = (
    PhasePlan(gpus=tuple(range(8)), tp=8),  # TP all-reduces, the fused all-reduce + norm on small steps
    # attention DP: all-gather and reduce-scatter; then DeepEP's all-to-alls
    PhasePlan(gpus=tuple(range(8)), tp=4, ep=8, dp=2, dp_attention=True),
    PhasePlan(gpus=tuple(range(8)), tp=1, ep=8, dp=8, dp_attention=True, comm=Comm(all2all="deepep")),
)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("tokens", [1.0, 48.0, 3000.0])
def test_collective_terms_are_op_terms_and_add_their_seconds_as_add_terms_does(phase, tokens):
    for hw, model in ((H200, DSV3), (RTX, V41)):
        c = context(model, phase, "vllm", hw, phase.gpus)
        comm = ffn_comm_ops(c, model.layers[-1].ffn, tokens)
        assert comm and all(op.kind == "collective" for op in comm)
        comm_s: dict = {}
        terms = collective_terms(c, comm, comm_s)
        assert terms == _op_terms(c, comm)
        assert comm_s == _add_terms(Cost(), _op_terms(c, comm), 1.0).comm_s
        assert any(seconds > 0 for seconds in comm_s.values())


def test_fused_all_reduces_are_the_unfused_ops_with_the_fused_bucket():
    phase = PhasePlan(gpus=tuple(range(8)), tp=8)
    c = context(DSV3, phase, "vllm", H200, phase.gpus)
    fused = ffn_comm_ops(c, DSV3.layers[-1].ffn, 8.0)
    assert any(op.bucket == FUSED_ALLREDUCE for op in fused)
    unfused = ffn_comm_ops(c, DSV3.layers[-1].ffn, 1e6)  # beyond the fused-norm limit: plain all-reduces
    for op in fused:
        if op.bucket == FUSED_ALLREDUCE:
            plain = op._replace(bucket="allreduce", nbytes=unfused[0].nbytes)
            assert type(op) is type(plain) and plain in unfused


def test_a_lone_collectives_terms_add_as_its_cost_does():
    phase = PhasePlan(gpus=tuple(range(8)), tp=4, pp=2)
    c = context(DSV3, phase, "vllm", H200, phase.gpus[:4])
    op = _collective("pp_send", (3, 4), 3.5e6, "pp")
    as_cost, as_terms = Cost(), Cost()
    for total in (as_cost, as_terms):
        cost_ops(c, [_collective("allreduce", (0, 1, 2, 3), 2e5, "tp")], total)
    as_cost.add(cost_ops(c, [op]))
    _add_terms(as_terms, _op_terms(c, [op]), 1.0)
    assert as_terms == as_cost and as_terms.time_s == as_cost.time_s


def test_the_draft_layers_input_is_its_own_decode_part():
    one = StepInput(37.0, 5000.0)
    assert layer_input(V41.layers[-1], one) == one and layer_input(DSV3.layers[-1], one) == one


def test_a_speculative_two_stage_step_adds_its_hand_off_and_draft():
    """The pipeline hand-off (a lone collective's terms) and the draft layer (ops._add_draft) both reach the step:
    its comm has the hand-off, and drafting adds to the step without the draft."""
    phase = PhasePlan(gpus=tuple(range(8)), tp=4, pp=2, speculative=Speculative(method="mtp", draft_tokens=2))
    plain = PhasePlan(gpus=tuple(range(8)), tp=4, pp=2)
    x = StepInput(24.0, 3000.0)
    step = ops.step_cost(DSV3, phase, "vllm", H200, phase.gpus, x, "decode")
    assert any(name.startswith("pp_send") for name in step.comm_ms)
    wide = ops.step_cost(DSV3, plain, "vllm", H200, plain.gpus, x._replace(decode_width=3.0), "decode")
    assert step.step_ms > wide.step_ms  # the same verify rows, plus two draft passes
