"""Facts stated once (issue 14): the SLO check and the expert-parallel size. Every user of a fact must give the
answer the one statement gives (the run directory's names: tests/report/test_rundir_names.py)."""

import itertools

import pytest

from autotune.loadgen.metrics import meets_slo
from autotune.perf.serving import Point, meets
from autotune.specs import PhasePlan, Workload
from autotune.specs.plan import expert_parallel_size
from autotune.specs.workload import within_slo

LIMITS = (0.0, 100.0)  # 0: no limit
VALUES = (50.0, 100.0, 100.5)


def test_the_slo_check_holds_each_limit_and_ignores_an_absent_one():
    assert within_slo(100.0, 30.0, 100.0, 30.0)  # equal to the limit holds
    assert not within_slo(100.5, 30.0, 100.0, 30.0) and not within_slo(10.0, 30.5, 100.0, 30.0)
    assert within_slo(1e9, 1e9, 0.0, 0.0)  # no SLO at all


@pytest.mark.parametrize("ttft_limit,tpot_limit", list(itertools.product(LIMITS, LIMITS)))
def test_every_slo_user_agrees_with_the_one_check(ttft_limit, tpot_limit):
    w = Workload(ttft_ms=ttft_limit, tpot_ms=tpot_limit)
    for ttft, tpot in itertools.product(VALUES, VALUES):
        expected = within_slo(ttft, tpot, ttft_limit, tpot_limit)
        assert w.meets_slo(ttft, tpot) == expected
        assert meets(Point(1.0, ttft, tpot, 1.0, ()), w) == expected  # perf/serving.py (steady state)
        assert meets_slo(ttft / 1e3, tpot / 1e3, ttft_limit, tpot_limit) == expected  # loadgen (seconds)


def test_ep_is_one_or_every_rank_of_a_stage():
    assert expert_parallel_size(4, 2, True) == 8 and expert_parallel_size(4, 2, False) == 1
    phase = PhasePlan(gpus=tuple(range(8)), tp=2, dp=2, pp=2, dp_attention=True, ep=4)
    assert phase.stage_ranks == 4 and phase.gpus_per_replica == 8
    with pytest.raises(ValueError, match="ep: expected 1 or tp\\*dp = 4, got 2"):
        PhasePlan(gpus=tuple(range(8)), tp=2, dp=2, pp=2, dp_attention=True, ep=2)
