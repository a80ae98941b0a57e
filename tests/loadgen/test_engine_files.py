"""`bench --from-file`: the engines' own bench clients' results as the same report. The documents below carry the
fields vLLM 0.34 (benchmarks/serve.py:1318-1340, 2304-2330) and SGLang 0.5.23 (benchmark/serving.py:1855-1966)
write, with per-request values chosen so each figure can be worked out by hand."""

import json

import pytest

from autotune.cli import run
from autotune.loadgen import read_result
from autotune.specs import MiTuneError


def _vllm_doc():
    return {
        "date": "20261202-101010",
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-70B-Instruct",
        "num_prompts": 3,
        "request_rate": "inf",
        "max_concurrency": 2,
        "duration": 2.0,
        "completed": 2,
        "failed": 1,
        "total_input_tokens": 300,
        "total_output_tokens": 15,
        "input_lens": [100, 200, 50],
        "output_lens": [5, 10, 0],
        "ttfts": [0.1, 0.3, 0.0],
        "itls": [[0.02] * 4, [0.05] * 9, []],
        "latencies": [0.18, 0.75, 0.0],
        "start_times": [0.0, 0.0, 0.1],
        "errors": ["", "", "Connection reset"],
        "generated_texts": ["a", "b", ""],
        "mean_ttft_ms": 200.0,
        "mean_e2el_ms": 465.0,
    }


def test_vllm_save_result_recomputed_per_request(tmp_path):
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(_vllm_doc()))
    report = read_result(path, slo_tpot_ms=30.0)
    assert report.source == "vllm bench serve" and report.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert (report.completed, report.failed, report.concurrency) == (2, 1, 2)
    assert report.errors == ("Connection reset",)
    assert report.input_tok_s == pytest.approx(300 / 2.0) and report.output_tok_s == pytest.approx(15 / 2.0)
    assert report.ttft_ms["mean"] == pytest.approx(200.0)
    # TPOT = (latency - ttft) / (output - 1): 20 ms and 50 ms
    assert report.tpot_ms["mean"] == pytest.approx(35.0) and report.tpot_ms["p50"] == pytest.approx(35.0)
    assert report.e2e_ms["mean"] == pytest.approx(465.0)
    assert report.itl_ms["mean"] == pytest.approx((4 * 20 + 9 * 50) / 13)
    # only the first request (20 ms TPOT) meets a 30 ms TPOT SLO
    assert report.goodput_rps == pytest.approx(0.5) and report.goodput_tok_s == pytest.approx(105 / 2.0)


def test_sglang_jsonl_with_details_uses_the_last_run(tmp_path):
    first = {"backend": "sglang", "duration": 9.0, "total_throughput": 1.0, "mean_e2e_latency_ms": 1.0}
    last = {
        "backend": "sglang",
        "max_concurrency": 4,
        "server_info": {"model_path": "Qwen/Qwen3-235B-A22B"},
        "duration": 1.0,
        "completed": 2,
        "total_throughput": 999.0,
        "mean_e2e_latency_ms": 999.0,
        "input_lens": [10, 30],
        "output_lens": [3, 2],
        "ttfts": [0.2, 0.4],
        "itls": [[0.01, 0.03], [0.02]],
        "errors": ["", ""],
        "generated_texts": ["x", "y"],
    }
    path = tmp_path / "sglang.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(last) + "\n")
    report = read_result(path)
    assert report.source == "sglang bench_serving" and report.model == "Qwen/Qwen3-235B-A22B"
    assert report.completed == 2 and report.concurrency == 4
    assert report.total_tok_s == pytest.approx(45.0)  # recomputed from the lists, not the line's aggregate
    assert report.e2e_ms["mean"] == pytest.approx((240 + 420) / 2)  # E2E = TTFT + sum of ITLs
    assert report.tpot_ms["mean"] == pytest.approx((20 + 20) / 2)


def test_sglang_aggregate_line_is_read_as_written(tmp_path):
    line = {
        "backend": "sglang",
        "duration": 10.0,
        "completed": 50,
        "request_throughput": 5.0,
        "input_throughput": 5000.0,
        "output_throughput": 640.0,
        "total_throughput": 5640.0,
        "mean_e2e_latency_ms": 3000.0,
        "median_e2e_latency_ms": 2900.0,
        "p99_e2e_latency_ms": 4100.0,
        "mean_ttft_ms": 210.0,
        "median_ttft_ms": 200.0,
        "p90_ttft_ms": 300.0,
        "p95_ttft_ms": 350.0,
        "p99_ttft_ms": 400.0,
        "mean_tpot_ms": 22.0,
        "median_tpot_ms": 21.0,
        "p99_tpot_ms": 30.0,
        "mean_itl_ms": 22.5,
    }
    path = tmp_path / "agg.jsonl"
    path.write_text(json.dumps(line) + "\n")
    report = read_result(path, slo_ttft_ms=250.0)
    assert report.ttft_ms == {"mean": 210.0, "p50": 200.0, "p90": 300.0, "p95": 350.0, "p99": 400.0}
    assert report.tpot_ms == {"mean": 22.0, "p50": 21.0, "p99": 30.0}
    assert report.total_tok_s == 5640.0 and report.request_rate_rps == 5.0
    assert report.goodput_rps is None  # no per-request data to judge an SLO


def test_cli_from_file_prints_the_report(tmp_path, capsys):
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(_vllm_doc()))
    assert run(["bench", "--from-file", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == "vllm bench serve" and doc["completed"] == 2


@pytest.mark.parametrize(
    "text, match",
    [
        ("not json at all", "expected a JSON object"),
        (json.dumps({"hello": 1}), "neither"),
        (json.dumps({"latencies": [1], "ttfts": [1, 2]}), "per-request lists"),
    ],
)
def test_bad_files_name_the_flag(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(MiTuneError, match=match):
        read_result(path)


def test_missing_file_exits_2(tmp_path, capsys):
    assert run(["bench", "--from-file", str(tmp_path / "none.json")]) == 2
    assert "--from-file" in capsys.readouterr().err
