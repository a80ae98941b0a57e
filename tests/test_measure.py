"""measure / search --measure against the stand-in engine, the correction fit, and the rates-table hook."""

import csv
import dataclasses
import json

import pytest
import yaml

from autotune.catalog.presets import load_preset
from autotune.cli import run
from autotune.measure import LAMBDA, fit_corrections, log_error
from autotune.perf import rates
from autotune.search import evaluate
from autotune.specs import Workload, load_best, load_hardware
from tests.loadgen.conftest import free_port

# the stand-in's known timing: about 1.4x what the model predicts for llama-3.1-70b at this workload on
# rtx-pro-6000-x8 for the plans the search measures (TTFT 41-63 ms, TPOT 19-20 ms), so a fit has something to correct
# in one direction for both plans
TIMING = {"ttft_ms": 80.0, "tpot_ms": 28.0}
WORKLOAD = ["--isl", "64", "--osl", "8", "--concurrency", "4"]
# the search simulates 16 requests: what measure benches by default at concurrency 4 (4 rounds), so the best plan's
# measurement is compared with the search's stored (simulated) prediction
SEARCH_REQUESTS = ["--num-requests", "16"]


# ------------------------------------------------------------------ fit
def test_one_class_moves_by_its_ratio_shrunk_by_the_prior():
    m = fit_corrections(lambda c: [10.0 * c["gemm"]], [15.0], ("gemm",))
    assert m == {"gemm": pytest.approx(1.5 ** (1 / (1 + LAMBDA)), abs=1e-3)}


def test_a_determined_system_is_recovered_without_the_prior():
    def predict(c):  # two figures, each moved by both classes (log-linear, like step time shares)
        return [10 * c["gemm"] ** 0.7 * c["collective"] ** 0.2, 8 * c["gemm"] ** 0.2 * c["collective"] ** 0.7]

    true = {"gemm": 1.5, "collective": 0.8}
    m = fit_corrections(predict, predict(true), ("gemm", "collective"), lam=1e-12)
    assert m == pytest.approx(true, abs=2e-3)


def test_an_underdetermined_fit_shares_the_error_by_sensitivity():
    def predict(c):  # one figure, two classes: 60% and 20% of it
        return [10 * (0.2 + 0.6 * c["gemm"] + 0.2 * c["attention"])]

    m = fit_corrections(predict, [14.0], ("gemm", "attention"))
    assert m["gemm"] > m["attention"] > 1.0
    assert predict(m)[0] == pytest.approx(14.0, rel=0.05)


def test_multipliers_stay_in_range():
    m = fit_corrections(lambda c: [c["norm"]], [100.0], ("norm",))
    assert m["norm"] == 5.0


def test_log_error():
    assert log_error([(2.0, 1.0), (1.0, 1.0)]) == pytest.approx(0.5 * 0.6931, rel=1e-3)


# ------------------------------------------------------------------ hook
def test_corrections_scale_op_classes_with_provenance():
    hw = load_preset("rtx-pro-6000-x8")
    fitted = dataclasses.replace(hw, corrections={"gemm": 2.0, "collective": 3.0})
    assert fitted.fingerprint != hw.fingerprint
    assert dataclasses.replace(hw, corrections={}).fingerprint == hw.fingerprint
    base, scaled = rates.rates_table(hw), rates.rates_table(fitted)
    key = ("gemm", "bf16", "m<=128")
    assert scaled.entries[key].tflops == pytest.approx(base.entries[key].tflops / 2)
    assert scaled.entries[key].min_us == pytest.approx(base.entries[key].min_us * 2)
    assert scaled.entries[key].provenance.endswith("measured-run x2")
    assert scaled.entries[("norm", "bf16", "any")] == base.entries[("norm", "bf16", "any")]
    assert scaled.collective_scale == 3.0 and "measured-run x3" in rates.collective_provenance(fitted)


def test_corrections_move_the_prediction():
    from autotune.catalog.models import load_model

    hw, model = load_preset("rtx-pro-6000-x8"), load_model("llama-3.1-70b")
    workload = Workload(isl=64, osl=8, concurrency=4)
    from autotune.search import baseline_plan

    plan = baseline_plan("vllm", hw, hw.num_gpus)
    before = evaluate(plan, model, hw, workload)
    after = evaluate(plan, model, dataclasses.replace(hw, corrections={"gemm": 1.5, "collective": 1.5}), workload)
    assert after.tpot_ms["mean"] > before.tpot_ms["mean"] * 1.2
    assert any("measured-run" in prov for prov in after.rates.values())


# ------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def measured_run(tmp_path_factory):
    """`mi-tune search ... --measure 2` with the stand-in engine: the CI path serve -> bench -> fit."""
    tmp = tmp_path_factory.mktemp("measure")
    timing = tmp / "timing.json"
    timing.write_text(json.dumps(TIMING))
    out = tmp / "run"
    argv = [
        "search",
        "--model",
        "llama-3.1-70b",
        "--preset",
        "rtx-pro-6000-x8",
        "--trials",
        "12",
        *WORKLOAD,
        *SEARCH_REQUESTS,
    ]
    port = free_port()
    code = run([*argv, "--out", str(out), "--measure", "2", "--measure-port", str(port), "--stand-in", str(timing)])
    assert code == 0
    return out, timing, port


def _rows(out):
    with (out / "measured.csv").open() as f:
        return list(csv.DictReader(f))


def test_search_measure_records_both_plans(measured_run):
    out, _, _ = measured_run
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["ok", "ok"] and len({r["plan"] for r in rows}) == 2
    for r in rows:
        assert float(r["measured_tpot_ms"]) == pytest.approx(TIMING["tpot_ms"], rel=0.1)
        assert float(r["measured_ttft_ms"]) == pytest.approx(TIMING["ttft_ms"], rel=0.25)  # a busy CI box
        assert int(r["concurrency"]) == 4 and int(r["failed_requests"]) == 0
        assert (out / r["plan_file"]).is_file() and (out / r["plan_file"]).with_name("engine.log").is_file()


def test_the_fit_moves_predictions_toward_the_stand_ins_timing(measured_run):
    """On the search's scale (simulated at the benched workload, measure/judge.py), as measure predicts."""
    from autotune.catalog.models import load_model
    from autotune.measure.judge import judge_of

    out, _, _ = measured_run
    prior = load_hardware(out / "hardware.yaml")
    fitted = load_hardware(out / "hardware-measured.yaml")
    assert prior.corrections == {} and fitted.corrections and all(v > 0 for v in fitted.corrections.values())
    judge = judge_of(load_best(out / "best.yaml"), load_model("llama-3.1-70b"))
    assert judge.simulated
    before, after = [], []
    for r in _rows(out):
        best = load_best(out / r["plan_file"])
        w = dataclasses.replace(best.workload, concurrency=int(r["concurrency"]))
        p0, p1 = judge(best.plan, prior, w, int(r["requests"])), judge(best.plan, fitted, w, int(r["requests"]))
        assert p0.total_tok_s == pytest.approx(float(r["predicted_total_tok_s"]), abs=1e-3)
        measured = (float(r["measured_ttft_ms"]), float(r["measured_tpot_ms"]))
        before += [(p0.ttft_ms["mean"], measured[0]), (p0.tpot_ms["mean"], measured[1])]
        after += [(p1.ttft_ms["mean"], measured[0]), (p1.tpot_ms["mean"], measured[1])]
        tok_s = float(r["measured_total_tok_s"])  # the objective: each plan's corrected prediction is nearer
        assert abs(p1.total_tok_s - tok_s) < abs(p0.total_tok_s - tok_s)
    assert log_error(after) < 0.6 * log_error(before)


def test_the_best_plan_is_compared_with_the_searchs_stored_simulated_prediction(measured_run):
    """The bench ran the searched workload over as many requests as the search simulated: the row holds
    best.yaml's simulated figures (not the steady-state screen's, which differ), marked 'stored'; the second plan's
    trial stored only its screen figure, so it is re-simulated at the benched workload with the search's seed."""
    from autotune.catalog.models import load_model
    from autotune.sim.serve import simulate_prediction

    out, _, _ = measured_run
    searched, hw, model = (
        load_best(out / "best.yaml"),
        load_hardware(out / "hardware.yaml"),
        load_model("llama-3.1-70b"),
    )
    first, second = _rows(out)
    assert first["prediction_source"] == "stored" and int(first["requests"]) == searched.prediction.simulated_requests
    stored = searched.prediction
    screen = evaluate(searched.plan, model, hw, searched.workload)
    assert stored.simulated_requests and abs(stored.total_tok_s - screen.total_tok_s) > 0.02 * screen.total_tok_s
    assert float(first["predicted_total_tok_s"]) == round(stored.total_tok_s, 3)
    assert float(first["predicted_ttft_ms"]) == round(stored.ttft_ms["mean"], 4)
    assert float(first["predicted_tpot_ms"]) == round(stored.tpot_ms["mean"], 4)
    # the stored figure is what predicting again the search's way gives: the fit starts from the same scale
    again = simulate_prediction(searched.plan, model, hw, searched.workload, screen, seed=searched.provenance.seed)
    assert again.total_tok_s == pytest.approx(stored.total_tok_s, rel=1e-9)
    assert second["prediction_source"] == "re-simulated"
    plan = load_best(out / second["plan_file"]).plan
    steady = evaluate(plan, model, hw, searched.workload)
    simulated = simulate_prediction(plan, model, hw, searched.workload, steady, seed=searched.provenance.seed,
                                    num_requests=int(second["requests"]))  # fmt: skip
    assert float(second["predicted_total_tok_s"]) == round(simulated.total_tok_s, 3) != round(steady.total_tok_s, 3)


def test_the_reranking_and_best_measured_are_on_the_searchs_scale(measured_run):
    """reranked.csv's prior figure of the searched best is best.yaml's own (simulated) objective, and
    best-measured.yaml's prediction is simulated like best.yaml's."""
    from autotune.search.trial import objective_value

    out, _, _ = measured_run
    searched = load_best(out / "best.yaml")
    with (out / "reranked.csv").open() as f:
        reranked = {r["plan"]: r for r in csv.DictReader(f)}
    row = reranked[searched.plan.describe()]
    assert float(row["predicted_tok_s"]) == pytest.approx(objective_value(searched.prediction), abs=1e-3)
    measured = load_best(out / "best-measured.yaml")
    assert measured.prediction.simulated_requests == searched.prediction.simulated_requests > 0
    assert measured.baseline.prediction.simulated_requests > 0


def test_best_measured_yaml_comes_from_the_measurements_and_best_yaml_stays(measured_run):
    out, _, _ = measured_run
    best = load_best(out / "best-measured.yaml")
    rows = {r["plan"]: float(r["measured_total_tok_s"]) for r in _rows(out)}
    assert best.plan.describe() == max(rows, key=rows.get)
    assert len({r["trial"] for r in _rows(out)}) == len(_rows(out))  # no trial measured twice
    assert best.hardware.profile.corrections == load_hardware(out / "hardware-measured.yaml").corrections
    assert (out / "reranked.csv").is_file()
    assert any("measured-run" in prov for prov in best.prediction.rates.values())
    # without --apply the search's answer stays best.yaml: its prediction has no measured-run rates
    assert not (out / "best-predicted.yaml").exists()
    searched = load_best(out / "best.yaml")
    assert not any("measured-run" in prov for prov in searched.prediction.rates.values())


def test_the_study_holds_the_measurements(measured_run):
    from autotune.measure import _open_study

    out, _, _ = measured_run
    searched = out / "best-predicted.yaml" if (out / "best-predicted.yaml").is_file() else out / "best.yaml"
    study, why = _open_study(out, load_best(searched))
    assert study is not None, why
    measured = {k: v for k, v in study.user_attrs.items() if k.startswith("measured:")}
    assert sorted(measured) == sorted(f"measured:{r['plan']}" for r in _rows(out))


def test_rerun_keeps_measured_plans_and_records_a_failed_start(measured_run, tmp_path, capsys):
    out, _, port = measured_run
    failing = tmp_path / "fail.json"
    failing.write_text(json.dumps({"fail": "CUDA error: out of memory (stand-in)"}))
    searched = (out / "best.yaml").read_text()
    argv = ["measure", str(out), "--top", "3", "--port", str(port), "--stand-in", str(failing), "--apply"]
    assert run(argv) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("measured before, kept") == 2
    header = next(line for line in captured.out.splitlines() if line.startswith("plan "))
    assert header.split()[:3] == ["plan", "status", "prediction_source"]
    # --apply: the best measured plan is best.yaml, the search's kept beside it
    assert (out / "best-predicted.yaml").read_text() == searched
    assert load_best(out / "best.yaml").plan == load_best(out / "best-measured.yaml").plan
    rows = _rows(out)
    assert len(rows) == 3 and rows[-1]["status"] == "failed"
    assert "exited with code 1" in rows[-1]["error"] and "out of memory (stand-in)" in rows[-1]["error"]


def test_an_engine_that_never_gets_healthy_times_out(measured_run, tmp_path, capsys):
    out, _, port = measured_run
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"startup_s": 30}))
    argv = ["measure", str(out), "--top", "3", "--port", str(port), "--stand-in", str(slow), "--ready-timeout", "0.5"]
    assert run(argv) == 0
    rows = _rows(out)
    assert rows[-1]["status"] == "failed" and rows[-1]["error"].startswith("not healthy after")


def test_measure_bad_input(tmp_path, capsys):
    assert run(["measure", str(tmp_path)]) == 2
    assert "no best.yaml" in capsys.readouterr().err
    assert run(["measure", str(tmp_path), "--top", "0"]) == 2
    assert "--top" in capsys.readouterr().err
    for flag, value in (("--num-requests", "-1"), ("--ready-timeout", "0"), ("--port", "70000")):
        assert run(["measure", str(tmp_path), flag, value]) == 2
        assert capsys.readouterr().err.startswith(f"mi-tune: error: {flag}")


def test_measured_csv_is_plain_csv(measured_run):
    out, _, _ = measured_run
    header = (out / "measured.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["plan", "trial", "status"]
    assert yaml.safe_load((out / "hardware-measured.yaml").read_text())["corrections"]


def _fresh_copy(run_dir, to):
    """The search's run directory as it was before measure (its study storage is shared or copied)."""
    import shutil

    shutil.copytree(run_dir, to, ignore=shutil.ignore_patterns("measure", "measured.csv", "hardware-measured.yaml"))
    if (to / "best-predicted.yaml").is_file():  # a measure --apply ran on it
        shutil.move(to / "best-predicted.yaml", to / "best.yaml")
    return to


def test_an_interrupted_measure_keeps_finished_plans_and_stops_the_engine(measured_run, tmp_path, monkeypatch):
    from autotune import loadgen
    from autotune.engines import supervisor
    from autotune.measure import MeasureOptions, measure

    out = _fresh_copy(measured_run[0], tmp_path / "run")
    timing = tmp_path / "t.json"
    timing.write_text(json.dumps({"ttft_ms": 5.0, "tpot_ms": 1.0}))
    started, real_bench, calls = [], loadgen.bench, []

    class Recorded(supervisor.Started):
        def __init__(self, *args):
            super().__init__(*args)
            started.append(self)

    def bench(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # the second plan's warm-up (each plan: a warm-up round, then the timed bench)
            raise KeyboardInterrupt
        return real_bench(*args, **kwargs)

    monkeypatch.setattr(supervisor, "Started", Recorded)
    monkeypatch.setattr(loadgen, "bench", bench)
    opts = MeasureOptions(top=2, port=free_port(), stand_in=str(timing), num_requests=4)
    with pytest.raises(KeyboardInterrupt):
        measure(out, opts, log=lambda line: None)
    assert [r["status"] for r in _rows(out)] == ["ok"]  # the first plan's row was written before the second began
    assert len(started) == 2 and all(p.poll() is not None for s in started for p in s.procs)
    assert not (out / "hardware-measured.yaml").exists()


def test_serve_runs_the_stand_in_in_place_of_the_engine(measured_run, tmp_path, capsys):
    """`serve --stand-in`: the plan -> argv path of a real best.yaml, only the executable swapped; an engine that
    fails to start ends serve with its exit code and last lines."""
    from autotune.engines import standin

    out, _, _ = measured_run
    timing = tmp_path / "t.json"
    timing.write_text(json.dumps({"fail": "no GPU here (stand-in)"}))
    code = run(["serve", str(out / "best.yaml"), "--port", str(free_port()), "--stand-in", str(timing)])
    captured = capsys.readouterr()
    assert code == 1
    assert standin.__file__ in captured.out and "-- " in captured.out  # the engine argv after the stand-in
    assert "exited with code 1" in captured.err and "no GPU here (stand-in)" in captured.err


def test_corrections_need_a_held_back_plan_they_improve():
    from autotune.measure import _helps_held_back

    # one plan measured: nothing to hold back, so no correction can show it lowers the error
    one = [("plan", {"measured_ttft_ms": 1, "measured_tpot_ms": 1}, None)]
    assert _helps_held_back(one, [], None, None, ()) is False


def test_fewer_requests_than_in_flight_are_predicted_at_what_the_bench_holds(measured_run, tmp_path, capsys):
    """`--num-requests 2` cannot keep the operating point's 4 requests in flight: the plan is predicted again at
    2 in flight, said on stderr, and the row records the concurrency the bench ran."""
    out = _fresh_copy(measured_run[0], tmp_path / "run")
    timing = measured_run[1]
    argv = ["measure", str(out), "--top", "1", "--port", str(free_port()), "--stand-in", str(timing)]
    assert run([*argv, "--num-requests", "2"]) == 0
    err = capsys.readouterr().err
    assert "2 requests cannot keep 4 in flight: predicted again at 2 in flight" in err
    assert "a prediction re-simulated at the benched workload (simulated over 2 requests" in err
    assert "2 requests (the search simulated 16); 2 in flight (searched: 4)" in err
    (row,) = _rows(out)
    assert int(row["concurrency"]) == 2 and row["status"] == "ok" and row["prediction_source"] == "re-simulated"
    from autotune.catalog.models import load_model
    from autotune.sim.serve import simulate_prediction

    searched, hw, model = (
        load_best(out / "best.yaml"),
        load_hardware(out / "hardware.yaml"),
        load_model("llama-3.1-70b"),
    )
    w = dataclasses.replace(searched.workload, concurrency=2)
    p = simulate_prediction(searched.plan, model, hw, w, evaluate(searched.plan, model, hw, w), seed=0, num_requests=2)
    assert float(row["predicted_total_tok_s"]) == round(p.total_tok_s, 3) != round(searched.prediction.total_tok_s, 3)


def test_a_measured_csv_of_older_columns_is_rewritten_with_its_rows(tmp_path):
    from autotune.measure import COLUMNS, append_row, read_rows

    path = tmp_path / "measured.csv"
    old = [c for c in COLUMNS if c != "prediction_source"]
    path.write_text(",".join(old) + "\n" + ",".join("x" if c == "plan" else "" for c in old) + "\n")
    append_row(path, {"plan": "y", "prediction_source": "stored"})
    rows = read_rows(path)
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert [(r["plan"], r["prediction_source"]) for r in rows] == [("x", ""), ("y", "stored")]


def test_plans_after_the_best_follow_the_searchs_ranking_not_the_screen(measured_run):
    """measure benches best.yaml's plan, then the plans in the order the search judged them (summary.json's
    top_plans: simulated where the search simulated), not the trials' screened objective."""
    from autotune.measure.study import _open_study, candidates, ranked_plans

    out, _, _ = measured_run
    best = load_best(out / "best.yaml")
    study, note = _open_study(out, best)
    ranked, why = ranked_plans(out)
    assert study is not None and not note and not why
    others = [r for r in ranked if r[0] != best.plan.describe()]
    assert len(others) >= 2
    flipped = [others[1], others[0]]  # a ranking that disagrees with the study's objective order
    got = [c.label for c in candidates(best, study, 3, flipped)]
    assert got == [best.plan.describe(), others[1][0], others[0][0]]
    by_value = [c.label for c in candidates(best, study, 3)]  # without a ranking: the study's objective order
    assert by_value[0] == best.plan.describe() and len(set(by_value)) == 3


def test_an_unreadable_summary_leaves_the_study_order_with_a_note(tmp_path):
    from autotune.measure.study import ranked_plans

    assert ranked_plans(tmp_path) == ([], "")  # no summary.json: nothing to say
    (tmp_path / "summary.json").write_text('{"top_plans": [{"plan": "x", "spec": {"engine": 3}}]}')
    ranked, why = ranked_plans(tmp_path)
    assert ranked == [] and "summary.json: no readable top_plans" in why
