import statistics

import pytest

from autotune.sim.trace import Request, make_trace, mean_lengths, read_lengths
from autotune.specs import MiTuneError, Workload, dump_yaml, from_dict, load_workload, to_dict


def test_closed_loop_fixed_lengths():
    trace = make_trace(Workload(isl=100, osl=20, concurrency=8), num_requests=50)
    assert len(trace) == 50
    assert all(r.arrival_s == 0.0 and (r.input_tokens, r.output_tokens) == (100, 20) for r in trace)
    assert [r.index for r in trace] == list(range(50))


def test_burst_sends_n_at_zero():
    trace = make_trace(Workload(burst=300))
    assert len(trace) == 300 and {r.arrival_s for r in trace} == {0.0}


def test_poisson_rate_and_determinism():
    w = Workload(rate_rps=10.0)
    trace = make_trace(w, 4000, seed=3)
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(trace, trace[1:], strict=False)]
    assert all(g >= 0 for g in gaps) and trace[0].arrival_s == 0.0
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.05)
    assert statistics.pstdev(gaps) == pytest.approx(0.1, rel=0.08)  # exponential: std = mean
    assert make_trace(w, 4000, seed=3) == trace and make_trace(w, 4000, seed=4) != trace


@pytest.mark.parametrize("dist", ["normal", "lognormal"])
def test_distributions_hit_mean_and_spread(dist):
    w = Workload(isl=2000, osl=300, length_dist=dist, isl_std=500, osl_std=100)
    trace = make_trace(w, 20000)
    ins = [r.input_tokens for r in trace]
    outs = [r.output_tokens for r in trace]
    assert statistics.fmean(ins) == pytest.approx(2000, rel=0.02)
    assert statistics.pstdev(ins) == pytest.approx(500, rel=0.05)
    assert statistics.fmean(outs) == pytest.approx(300, rel=0.02)
    assert min(ins) >= 1 and min(outs) >= 1


def test_lengths_do_not_depend_on_arrivals():
    a = make_trace(Workload(length_dist="lognormal", isl_std=900, osl_std=50, rate_rps=2.0), 100)
    b = make_trace(Workload(length_dist="lognormal", isl_std=900, osl_std=50, concurrency=4), 100)
    assert [(r.input_tokens, r.output_tokens) for r in a] == [(r.input_tokens, r.output_tokens) for r in b]


def test_lengths_file_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "l.csv"
    csv_path.write_text("input_tokens,output_tokens\n10,5\n30,7\n")
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text('{"input_tokens": 10, "output_tokens": 5}\n\n{"input": 30, "output": 7}\n')
    for path in (csv_path, jsonl):
        assert read_lengths(str(path)) == ((10, 5), (30, 7))
        w = Workload(length_dist="file", lengths_file=str(path))
        trace = make_trace(w, 5)
        assert [(r.input_tokens, r.output_tokens) for r in trace] == [(10, 5), (30, 7), (10, 5), (30, 7), (10, 5)]
        assert mean_lengths(str(path)) == (20, 6)


def test_lengths_file_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("10,5\n10,zero\n")
    with pytest.raises(MiTuneError, match=r"bad.csv:2: expected two whole token counts"):
        read_lengths(str(bad))
    with pytest.raises(MiTuneError, match="not found"):
        read_lengths(str(tmp_path / "missing.csv"))


def test_v1_workload_file_still_loads(tmp_path):
    old = tmp_path / "w.yaml"
    old.write_text("schema: mi-tune/workload/v1\nisl: 512\nosl: 64\nttft_ms: 800\nttft_percentile: 99\n")
    w = load_workload(old)
    assert (w.isl, w.slo_percentile, w.ttft_ms) == (512, 99.0, 800.0)
    assert from_dict(Workload, to_dict(w), "x") == w and "slo_percentile: 95" in dump_yaml(Workload())


@pytest.mark.parametrize(
    "kwargs",
    [dict(burst=5, concurrency=2), dict(length_dist="file"), dict(slo_percentile=100), dict(prefix_hit_rate=1.0)],
)
def test_workload_rejects(kwargs):
    with pytest.raises(ValueError):
        Workload(**kwargs)


def test_request_is_frozen():
    r = Request(0, 0.0, 1, 1)
    with pytest.raises(AttributeError):
        r.index = 2
