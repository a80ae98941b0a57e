"""The stand-in's speculative counters read back by measure/acceptance.py, as a bench around them reads them."""

import pytest

from autotune.loadgen import bench
from autotune.measure.acceptance import scrape, tokens_per_step
from autotune.specs import Workload


@pytest.mark.parametrize(
    "argv", [("vllm", "serve", "org/m"), ("python3", "-m", "sglang.launch_server", "--model-path", "org/m")]
)
def test_tokens_per_step_over_a_bench_is_what_the_engine_counted(stand_in, argv):
    url = stand_in({"ttft_ms": 1.0, "tpot_ms": 0.5, "tokens_per_step": 2.5}, *argv)
    workload = Workload(isl=8, osl=31, concurrency=2)
    bench(url, workload, num_requests=2, concurrency=2, seed=1)  # a warm-up the difference must leave out
    before = scrape(url)
    assert before  # the counters are served
    bench(url, workload, num_requests=4, concurrency=2)
    # 31 tokens: the first from the prefill, 30 in ceil(30 / 2.5) = 12 steps -> 1 + 18 / 12 (vLLM) or
    # (31 - 1) / 12 (SGLang): 2.5 either way
    assert tokens_per_step(before, scrape(url)) == pytest.approx(2.5)


def test_no_counters_without_speculation(stand_in):
    url = stand_in({"ttft_ms": 1.0}, "vllm", "serve", "org/m")
    assert scrape(url) == {} and tokens_per_step({}, {}) is None
