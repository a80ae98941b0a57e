"""tests/bench/calibration_check.py's trtllm-bench rows (perf-overview.md, R1 FP8 DEP8 on 8x H200): trtllm-bench
picks max_batch_size / max_num_tokens itself when they are not given, from a KV estimate that counts MLA as 128
full heads, and the run is a finite burst of requests (its num_requests table), not a steady state."""

from __future__ import annotations

from tests.perf.calibration_check_module import cc


def test_heuristic_batch_follows_the_generic_kv_estimate():
    # the generic estimate: 2 x 61 layers x 128 heads x 56 = 874,496 bytes per token at FP8, against a cache of
    # 0.9 x (8 x 140.4 GiB - 685e9 bytes) on 8 ranks; (isl + osl) per request
    per_token = 2 * 61 * 128 * 56
    cache = 0.9 * (8 * cc.H200_NVML_GIB * 1024**3 - cc.R1_PARAMS)
    for isl, osl in ((1024, 1024), (1024, 8192), (1024, 32768)):
        raw = cache / (per_token * (isl + osl))
        bs, tokens = cc.trtllm_bench_limits(isl, osl)
        assert bs >= raw and bs - raw < 128  # rounded up to its bucket, never down
        assert tokens >= isl + bs  # prompts are whole: the budget holds the longest prompt beside a full batch
    # the long outputs cap the batch at the 64 floor, far under what R1's real MLA cache (~40 KB/token) holds
    assert cc.trtllm_bench_limits(1024, 8192)[0] == 64 < cc.trtllm_bench_limits(1024, 1024)[0]


def test_r1_rows_run_the_bench_not_the_old_steady_state():
    rows = {r.label: r for r in cc.rows() if r.entry == "nvl-trtllm-deepseek-r1-fp8-8xh200"}
    assert len(rows) == 4
    row = rows["DeepSeek-R1 FP8 DEP8 8xH200 1024/8192"]
    old = cc.serving(lambda: cc.model("deepseek-v3"), "h200-x8", 8, 1024, 8192, **cc.dep(8))()
    new = row.predict()
    # 64 per rank (512 in flight) instead of the KV-bound ~790: fewer sequences per step, less throughput
    assert new < 0.85 * old


def test_closed_loop_row_counts_the_ramp_and_the_drain():
    """The blog's H200 max-throughput row: 1024 kept in flight, throughput over the whole run (trtllm-bench's Total
    Latency), so the first wave's ramp-up and the last one's drain weigh less the more requests the run has (a
    steady-state window would not depend on the request count)."""
    r1 = lambda: cc.model("deepseek-v3")  # noqa: E731

    def run(requests: int) -> float:
        return cc.trtllm_bench(r1, "h200-x8", 8, 1024, 2048, requests, kv="auto", limits=(128, 1151),
                               concurrency=1024, **cc.dep(8))()  # fmt: skip

    one_wave, blog, long_run = run(1024), run(5120), run(20480)
    assert one_wave < blog < long_run
