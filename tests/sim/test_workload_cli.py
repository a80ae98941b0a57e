"""`--workload FILE`, `--dataset`, the simulator's workload flags, and estimate's simulated percentiles."""

import json
from pathlib import Path

import pytest

from autotune.cli import run
from autotune.sim.workloads import build, dataset_fields, datasets, load_workload_file
from autotune.specs import MiTuneError, Workload

ROOT = Path(__file__).resolve().parents[2]
PLAN = """schema: mi-tune/plan/v1
engine: vllm
mode: aggregated
phases:
  both:
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    tp: 2
    replicas: 4
    kernels: {gemm_dtype: fp8}
"""
ESTIMATE = ["estimate", "--model", "llama-3.1-70b", "--preset", "h200-x8", "--json"]


@pytest.fixture()
def plan(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN)
    return str(path)


def estimate(capsys, plan, *flags) -> dict:
    assert run([*ESTIMATE, plan, *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_estimate_with_a_burst_workload_prints_percentiles_and_goodput(capsys, plan):
    p = estimate(capsys, plan, "--workload", str(ROOT / "search_spaces/workloads/burst.yaml"))
    assert p["simulated_requests"] == 1000 and p["slo_percentile"] == 95.0
    for key in ("p50", "p90", "p95", "p99"):
        assert p["ttft_ms"][key] > 0 and p["tpot_ms"][key] > 0 and p["e2e_ms"][key] > 0
    assert p["ttft_ms"]["p50"] <= p["ttft_ms"]["p95"] <= p["ttft_ms"]["p99"]
    assert 0 < p["goodput_rps"] <= p["request_rate_rps"] * (1 + 1e-9)
    # a flag overrides the file: a looser SLO percentile can only keep or raise the goodput-side verdict
    loose = estimate(capsys, plan, "--workload", str(ROOT / "search_spaces/workloads/burst.yaml"), "--ttft-ms", "1e7")
    assert loose["goodput_rps"] >= p["goodput_rps"]


def test_example_workloads_load():
    for name in ("burst.yaml", "poisson.yaml"):
        w = load_workload_file(str(ROOT / "search_spaces/workloads" / name))
        assert w.has_slo and w.arrival in ("burst", "poisson")


def test_dataset_profile_sets_mean_lengths_with_a_source(capsys, plan):
    for name, profile in datasets().items():
        assert profile["source"] and profile["isl"] > 0 and profile["osl"] > 0, name
    assert dataset_fields("sharegpt-stats")["isl"] == 161
    p = estimate(capsys, plan, "--dataset", "sharegpt-stats", "--rate", "5", "--num-requests", "300")
    assert p["input_tok_s"] / p["request_rate_rps"] == pytest.approx(161, rel=1e-6)
    assert p["output_tok_s"] / p["request_rate_rps"] == pytest.approx(338, rel=1e-6)


def test_lengths_file_gives_its_means_to_the_screen(tmp_path):
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("input,output\n100,10\n300,30\n")
    w = build(None, None, {"lengths_file": str(lengths), "length_dist": "file"})
    assert (w.isl, w.osl) == (200, 20)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--dataset", "nope"], "--dataset: expected one of"),
        (["--burst", "10", "--rate", "2"], "not both"),
        (["--slo-percentile", "100"], "percentile"),
        (["--lengths-file", "/nonexistent.csv"], "lengths file not found"),
    ],
)
def test_bad_workload_input_is_one_line_exit_2(capsys, plan, flags, message):
    assert run([*ESTIMATE, plan, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_bad_workload_file_names_the_file_and_field(tmp_path, capsys, plan):
    bad = tmp_path / "w.yaml"
    bad.write_text("isl: many\n")
    assert run([*ESTIMATE, plan, "--workload", str(bad)]) == 2
    assert "w.yaml: isl: expected an integer" in capsys.readouterr().err


def test_build_keeps_the_file_unless_a_flag_overrides():
    base = Workload(isl=100, osl=10, burst=50)
    assert build(base, None, {}) == base
    assert build(base, None, {"isl": 7}).isl == 7
    with pytest.raises(MiTuneError):
        build(base, None, {"rate_rps": 2.0})  # a burst and a rate: the user must drop one


def test_an_arrival_flag_replaces_the_files(capsys, plan):
    p = estimate(capsys, plan, "--workload", str(ROOT / "search_spaces/workloads/burst.yaml"), "--rate", "3")
    assert p["request_rate_rps"] == pytest.approx(3.0, rel=0.15)  # Poisson at 3/s, not the file's burst
