"""Readable results: plan labels tell different plans apart, equal throughputs rank by latency, and numerics
changes are named beside the best plan that keeps the checkpoint's numerics."""

import json

import pytest

from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space, run_study
from autotune.search.ranking import rank_key as _rank
from autotune.search.study import TrialRecord
from autotune.specs import Comm, Kernels, PhasePlan, Plan, Prediction, Workload, to_dict

V41 = load_model("deepseek-v4.1-flash")
LLAMA = load_model("llama-3.1-70b")
BOX = load_preset("rtx-pro-6000-x8")


def _search(model, trials: int, **kw):
    req = SearchRequest(model, BOX, Workload(isl=2048, osl=512), load_space(), 8, trials=trials, seed=5, **kw)
    return run_study(req)


@pytest.fixture(scope="module")
def v41_300():
    return _search(V41, 300)


def test_distinct_plans_of_a_300_trial_search_have_distinct_labels(v41_300):
    plans_by_label: dict[str, set[str]] = {}
    for record in v41_300.records:
        if record.plan is not None:
            key = json.dumps(to_dict(record.plan), sort_keys=True)
            plans_by_label.setdefault(record.plan.describe(), set()).add(key)
    assert len(plans_by_label) > 50  # a search that sampled many different plans
    shared = {label: len(keys) for label, keys in plans_by_label.items() if len(keys) > 1}
    assert not shared, f"labels shared by different plans: {shared}"


def _phase(**kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(8)), tp=8, **kw)


@pytest.mark.parametrize(
    "change",
    [
        {"kernels": Kernels(gemm_dtype="fp8")},
        {"kernels": Kernels(kv_cache_dtype="fp8")},
        {"kernels": Kernels(moe="marlin")},
        {"kernels": Kernels(linear="triton")},
        {"comm": Comm(allreduce="pcie_ipc")},
        {"comm": Comm(nccl={"NCCL_PROTO": "LL"})},
        {"fusion": {"allreduce_rmsnorm": True}},
        {"eplb": True},
        {"dcp": 2},
    ],
)
def test_every_single_setting_shows_in_the_label(change):
    base = Plan("vllm", "aggregated", {"both": _phase()})
    changed = Plan("vllm", "aggregated", {"both": _phase(**change)})
    assert changed.describe() != base.describe()


def _record(number: int, tok_s: float, ttft_ms: float, tpot_ms: float) -> TrialRecord:
    prediction = Prediction(feasible=True, total_tok_s=tok_s, ttft_ms={"mean": ttft_ms}, tpot_ms={"mean": tpot_ms})
    return TrialRecord(number, None, prediction, tok_s, {})


def test_equal_throughput_ranks_by_latency_then_trial_order():
    slow, fast = _record(0, 5_000.0, 200.0, 30.0), _record(1, 5_000.0, 200.0, 20.0)
    assert max([slow, fast], key=lambda r: _rank(r, 512)) is fast  # same tok/s: the lower TPOT wins
    assert max([fast, slow], key=lambda r: _rank(r, 512)) is fast  # whatever the order it was seen in
    quicker_start = _record(2, 5_000.0, 100.0, 30.0)
    assert max([slow, quicker_start], key=lambda r: _rank(r, 512)) is quicker_start  # then TTFT
    twin = _record(3, 5_000.0, 200.0, 20.0)
    assert max([twin, fast], key=lambda r: _rank(r, 512)) is fast  # full tie: the earlier trial
    more = _record(4, 5_001.0, 900.0, 90.0)
    assert max([fast, more], key=lambda r: _rank(r, 512)) is more  # throughput first


def test_fp8_numerics_are_named_with_the_best_plan_that_keeps_bf16():
    result = _search(LLAMA, 60)
    assert result.numerics(result.best), "the best llama-3.1-70b plan on this box quantises to FP8"
    assert "fp8" in result.best.plan.describe()  # the label shows it too
    same = result.best_same_numerics
    assert same is not None and not result.numerics(same)
    assert "fp8" not in same.plan.describe()
    assert 0 < same.value < result.best.value


def test_best_yaml_and_the_cli_summary_show_both_speed_ups(tmp_path, capsys):
    from autotune.cli import run
    from autotune.specs import load_best

    out = tmp_path / "run"
    argv = ["search", "--model", "llama-3.1-70b", "--preset", "rtx-pro-6000-x8", "--trials", "40", "--seed", "5"]
    assert run([*argv, "--isl", "2048", "--osl", "512", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    best = load_best(out / "best.yaml")
    assert best.numerics and best.same_numerics is not None
    assert best.same_numerics.speedup < best.baseline.speedup
    assert "numerics: the best plan changes the checkpoint's numerics" in printed
    assert f"{best.same_numerics.speedup:.2f}x the engine default" in printed
    assert f"{best.baseline.speedup:.2f}x the engine default" in printed
    assert best.same_numerics.plan.describe() == best.same_numerics.label
    assert run([*argv, "--isl", "2048", "--osl", "512", "--out", str(out), "--json"]) == 0  # rerun: 0 new trials
    summary = json.loads(capsys.readouterr().out)
    assert summary["numerics"] == list(best.numerics)
    assert summary["same_numerics"]["plan"] == best.same_numerics.label
    assert summary["same_numerics"]["speedup"] == pytest.approx(best.same_numerics.speedup)
