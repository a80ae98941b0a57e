"""`mi-tune bench --url` against the stand-in engine, whose timing is known."""

import json

import pytest

from autotune.cli import run
from autotune.loadgen import bench
from autotune.specs import MiTuneError, Workload

# a TTFT and a TPOT long enough that a busy machine's scheduling delays (a few ms on the TTFT, about 1 ms on each
# token's sleep on a loaded 2-core machine) stay well inside 5%: at 12 ms per token the TPOT check failed under load
TIMING = {"ttft_ms": 250.0, "tpot_ms": 30.0}


def test_bench_reports_the_servers_ttft_and_tpot_within_5_percent(stand_in):
    url = stand_in(TIMING, "vllm", "serve", "org/model-x")
    report = bench(url, Workload(isl=48, osl=16, concurrency=4), num_requests=8)
    assert report.model == "org/model-x"  # from /v1/models
    assert report.completed == 8 and report.failed == 0
    assert report.ttft_ms["mean"] == pytest.approx(TIMING["ttft_ms"], rel=0.05)
    assert report.tpot_ms["mean"] == pytest.approx(TIMING["tpot_ms"], rel=0.05)
    assert report.ttft_ms["p50"] <= report.ttft_ms["p99"]
    # output tokens: the usage the server reported; input: the token ids sent
    assert report.output_tok_s * report.duration_s == pytest.approx(8 * 16)
    assert report.input_tok_s * report.duration_s == pytest.approx(8 * 48)
    # closed loop at 4 in flight: two rounds of (TTFT + 15 TPOT)
    one = (TIMING["ttft_ms"] + 15 * TIMING["tpot_ms"]) / 1e3
    assert report.duration_s == pytest.approx(2 * one, rel=0.15)


def test_input_length_moves_ttft_as_the_server_says(stand_in):
    # 300 ms in all, so a loaded machine's few ms of scheduling delay stay inside 5% (at 140 ms they did not)
    url = stand_in({"ttft_ms": 100.0, "ttft_ms_per_input_token": 1.0, "tpot_ms": 5.0}, "vllm", "serve", "m")
    report = bench(url, Workload(isl=200, osl=4, concurrency=2), num_requests=4)
    assert report.ttft_ms["mean"] == pytest.approx(100.0 + 1.0 * 200, rel=0.05)


def test_chat_endpoint_and_goodput_against_an_slo(stand_in):
    url = stand_in({"ttft_ms": 50.0, "tpot_ms": 8.0}, "python3", "-m", "sglang.launch_server", "--model-path", "m")
    met = bench(url, Workload(isl=16, osl=8, concurrency=2, ttft_ms=200.0), num_requests=4, endpoint="chat")
    assert met.completed == 4 and met.goodput_rps == pytest.approx(met.request_rate_rps)
    missed = bench(url, Workload(isl=16, osl=8, concurrency=2, ttft_ms=20.0), num_requests=4, endpoint="chat")
    assert missed.goodput_rps == 0.0 and missed.goodput_tok_s == 0.0


def test_burst_sends_everything_at_once(stand_in):
    url = stand_in({"ttft_ms": 60.0, "tpot_ms": 5.0, "ttft_ms_per_running": 10.0}, "vllm", "serve", "m")
    report = bench(url, Workload(isl=8, osl=4, burst=4))
    assert report.completed == 4 and report.concurrency == 0
    # all four ran together: the last arrival saw three others running
    assert report.ttft_ms["p99"] > 60.0 + 2 * 10.0


def test_cli_bench_json(stand_in, capsys):
    url = stand_in(TIMING, "vllm", "serve", "m")
    argv = ["bench", "--url", url, "--isl", "16", "--osl", "12", "--concurrency", "3", "--num-requests", "3"]
    assert run([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["completed"] == 3 and doc["source"] == "mi-tune bench"
    assert doc["tpot_ms"]["mean"] == pytest.approx(TIMING["tpot_ms"], rel=0.2)  # 3 requests: loose


def test_cli_bench_table(stand_in, capsys):
    url = stand_in({"ttft_ms": 10.0, "tpot_ms": 2.0}, "vllm", "serve", "m")
    assert run(["bench", "--url", url, "--isl", "8", "--osl", "4", "--concurrency", "2", "--num-requests", "2"]) == 0
    out = capsys.readouterr().out
    assert "TTFT" in out and "TPOT" in out and "2 completed, 0 failed" in out


def test_unreachable_server_is_one_line_exit_2(capsys):
    from tests.loadgen.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert run(["bench", "--url", url, "--concurrency", "1", "--num-requests", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mi-tune: error: --url: cannot reach") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["bench", "--url", "ftp://x"], "--url: expected http://"),
        (["bench"], "--url / --from-file"),
        (["bench", "--url", "http://127.0.0.1:9"], "--concurrency: a closed-loop bench"),
        (["bench", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--endpoint", "x"], "--endpoint"),
    ],
)
def test_bad_input_exits_2(argv, expected, capsys):
    assert run(argv) == 2
    assert expected in capsys.readouterr().err


def test_failed_requests_are_counted_not_fatal(stand_in):
    url = stand_in({"ttft_ms": 5.0, "tpot_ms": 1.0}, "vllm", "serve", "m")
    report = bench(url + "/nowhere", Workload(isl=4, osl=2, concurrency=1), model="m", num_requests=2)
    assert report.completed == 0 and report.failed == 2 and "HTTP 404" in report.errors[0]


def test_api_rejects_a_closed_loop_without_concurrency():
    with pytest.raises(MiTuneError, match="--concurrency"):
        bench("http://127.0.0.1:9", Workload(isl=4, osl=2))


def test_cli_bench_reads_a_workload_file(stand_in, tmp_path, capsys):
    url = stand_in({"ttft_ms": 20.0, "tpot_ms": 3.0}, "vllm", "serve", "m")
    path = tmp_path / "w.yaml"
    path.write_text("schema: mi-tune/workload/v1\nisl: 12\nosl: 5\nburst: 3\n")
    assert run(["bench", "--url", url, "--workload", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["completed"] == 3 and doc["concurrency"] == 0  # the file's burst: all three at once
    assert doc["output_tok_s"] * doc["duration_s"] == pytest.approx(15)
    # an arrival flag replaces the file's
    assert run(["bench", "--url", url, "--workload", str(path), "--concurrency", "1", "--num-requests", "2"]) == 0
    assert "concurrency 1" in capsys.readouterr().out
