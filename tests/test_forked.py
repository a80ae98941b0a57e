"""autotune/forked.py: a function computed in a forked copy gives its value back, a copy that fails says so, and
the search's plan keeping the checkpoint's numerics (computed beside the climb) is the one computed in-process."""

import os

import pytest

from autotune import forked
from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space, run_study
from autotune.specs import Workload

forking = pytest.mark.skipif(not forked.can_fork(), reason="no fork or one core: everything runs in this process")


def _gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@forking
def test_the_value_comes_from_the_copy_and_the_copy_is_reaped():
    parent = os.getpid()
    aside = forked.Beside.start(lambda scale: (os.getpid(), [x * scale for x in range(3)]), 2.5)
    pid = aside.pid
    delivered, (computed_in, values) = aside.value()
    assert delivered and computed_in == pid != parent and values == [0.0, 2.5, 5.0]
    assert _gone(pid)


@forking
def test_a_copy_that_fails_delivers_nothing():
    def broken():
        raise ValueError("no value")

    assert forked.Beside.start(broken).value() == (False, None)


@forking
def test_closed_before_its_value_kills_and_reaps_the_copy():
    import time

    aside = forked.Beside.start(time.sleep, 60)
    pid = aside.pid
    aside.close()
    aside.close()  # idempotent
    assert _gone(pid)


@forking
def test_the_plan_keeping_the_numerics_is_the_same_computed_beside_or_here(monkeypatch):
    """DeepSeek-V3 on the issue-17 question, 24 trials at seed 0: the best plan stores its KV cache in FP8, so the
    search names the best plan keeping the checkpoint's numerics (computed in a forked copy while the best climbs)."""
    req = SearchRequest(
        model=load_model("deepseek-v3"),
        hardware=load_preset("rtx-pro-6000-x8"),
        workload=Workload(isl=4000, osl=1000, ttft_ms=2000, tpot_ms=30),
        space=load_space(),
        num_gpus=8,
        trials=24,
        seed=0,
    )
    started = []
    real_start = forked.Beside.start.__func__

    def spy(cls, *args):
        aside = real_start(cls, *args)
        started.append(aside)
        return aside

    monkeypatch.setattr(forked.Beside, "start", classmethod(spy))
    beside = run_study(req)
    assert len(started) == 1 and started[0] is not None  # the copy computed it
    monkeypatch.setattr(forked.Beside, "start", classmethod(lambda cls, *args: None))
    here = run_study(req)
    assert beside.numerics(beside.best) and beside.best_same_numerics is not None
    assert beside.best_same_numerics == here.best_same_numerics
    assert (beside.best, beside.ranked, beside.alternatives) == (here.best, here.ranked, here.alternatives)
