import re

import optuna
import pytest

from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space, run_study
from autotune.specs import MiTuneError, Workload

W = Workload(isl=2048, osl=512)


def request(tmp_path, name="s", **kw):
    defaults = dict(
        model=load_model("deepseek-v4.1-flash"),
        hardware=load_preset("rtx-pro-6000-x8"),
        workload=W,
        space=load_space(),
        num_gpus=8,
        trials=40,
        seed=3,
        storage=f"sqlite:///{tmp_path / name}.db",
    )
    defaults.update(kw)
    return SearchRequest(**defaults)


def test_same_seed_same_best_plan_in_separate_storages(tmp_path):
    a = run_study(request(tmp_path, "a"))
    b = run_study(request(tmp_path, "b"))
    assert a.best.plan == b.best.plan
    assert a.best.value == pytest.approx(b.best.value)
    assert a.best.value > a.baseline.total_tok_s  # the search beats tensor parallel over all GPUs here


def test_interrupted_search_resumes_from_its_storage(tmp_path):
    first = run_study(request(tmp_path, "r", trials=15))
    assert len(first.records) == 15
    resumed = run_study(request(tmp_path, "r", trials=25))
    assert len(resumed.records) == 25
    stored = optuna.load_study(study_name="mi-tune", storage=f"sqlite:///{tmp_path / 'r'}.db")
    assert len(stored.trials) == 25  # every trial was written through to the run directory's storage
    assert [r.number for r in resumed.records[:15]] == [r.number for r in first.records]


def test_a_storage_holding_another_search_is_refused(tmp_path):
    run_study(request(tmp_path, "x", trials=12))
    with pytest.raises(MiTuneError, match="holds a different search"):
        run_study(request(tmp_path, "x", trials=12, workload=Workload(isl=100, osl=100)))


def test_engine_and_mode_pins(tmp_path):
    result = run_study(request(tmp_path, "p", engine="vllm", mode="disaggregated", trials=25))
    plans = [r.plan for r in result.records if r.plan]
    assert plans and all(p.engine == "vllm" and p.mode == "disaggregated" for p in plans)


def test_infeasible_trials_keep_their_reason(tmp_path):
    result = run_study(request(tmp_path, "i"))
    rejected = [r for r in result.records if r.value == 0]
    assert rejected and all(r.reason for r in rejected)


def test_model_that_fits_no_plan_is_a_clear_error(tmp_path):
    # DeepSeek-V3's FP8 weights alone outweigh eight 48 GB GPUs: said before any trial, with the arithmetic
    with pytest.raises(MiTuneError, match=r"deepseek-v3 \(fp8\) needs [\d,.]+ GB of weights.* 8 x 48 GiB GPUs hold"):
        run_study(request(tmp_path, "n", model=load_model("deepseek-v3"), hardware=load_preset("l20-x8"), trials=20))


def test_numerics_changes_are_labelled_and_keep_precision_removes_them(tmp_path):
    llama = load_model("llama-3.1-70b")  # a bf16 checkpoint: online FP8 weights and an FP8 KV cache are choices
    mixed = run_study(request(tmp_path, "m", model=llama, trials=60))
    assert "fp8 weights (online from bf16)" in mixed.numerics(mixed.best)  # FP8 halves 70B's weight reads
    same = mixed.best_same_numerics  # the best plan that keeps bf16 is reported beside it
    assert same is not None and not mixed.numerics(same) and same.value < mixed.best.value
    kept = run_study(request(tmp_path, "k", model=llama, trials=60, keep_precision=True))
    assert all(not kept.numerics(r) for r in kept.records if r.plan)
    assert kept.choices["gemm_dtype"] == ("auto",) and kept.choices["kv_cache_dtype"] == ("auto",)
    assert kept.best_same_numerics is None


def test_a_resume_that_diverges_in_refinement_stops_at_its_budget(tmp_path):
    """A run stopped after its TPE phase (30 of 40 trials) resumed with 35 trials: the resumed schedule's TPE phase
    is shorter (27), so from its refinement on (trial 27, or a later one where a refinement step happens to propose
    the stored TPE trial's plan) it differs from the stored run, whose trials are kept as they are; refinement then
    runs only what the budget has left."""
    from autotune.search import storage
    from autotune.search.runner import Session, Stop
    from autotune.search.study import study_choices

    class AfterTrials(Stop):
        session = None

        def __call__(self) -> bool:
            return self.session is not None and self.session.ran >= 32

    first = request(tmp_path, "d", trials=40)
    stop = AfterTrials()
    stop.session = session = Session(first, study_choices(first), storage.open_study(first), stop)
    session.run()
    assert session.phases["tpe"] == 30 and session.ran == 32
    resumed = run_study(request(tmp_path, "d", trials=35))
    diverged = re.search(r"differs from this search from its trial (\d+)", resumed.strategy)
    assert diverged and 27 <= int(diverged.group(1)) < 32, resumed.strategy
    stored = optuna.load_study(study_name="mi-tune", storage=f"sqlite:///{tmp_path / 'd'}.db")
    assert len(stored.trials) == 35
