"""The performance model end to end: memory fit, phases, and the PCIe lessons of public measurements."""

from pathlib import Path

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import check_plan, predict
from autotune.perf.ops import attended_entries, distinct_experts, indexer_scored
from autotune.search import baseline_plan
from autotune.specs import Batching, Comm, Kernels, PhasePlan, Plan, Workload

FIXTURES = Path(__file__).parents[1] / "fixtures"
W = Workload(isl=1000, osl=1000)


def agg(engine="vllm", n=8, **kw):
    return Plan(engine, "aggregated", {"both": PhasePlan(gpus=tuple(range(n)), **kw)})


def test_deepseek_v3_fp8_fits_8x96gib_only_tightly_and_not_8x48gb():
    model = load_model("deepseek-v3")
    pcie = load_preset("rtx-pro-6000-x8")
    tight = predict(baseline_plan("vllm", pcie, 8), model, pcie, W)
    assert tight.feasible and tight.memory["both"].weights_gb > 80  # 671B fp8 over 8 GPUs
    assert tight.memory["both"].kv_gb < 10
    l20 = load_preset("l20-x8")
    p = predict(baseline_plan("vllm", l20, 8), model, l20, W)
    assert not p.feasible and "out of memory" in p.reason


def test_deepseek_v3_fits_on_8xh200():
    hw = load_preset("h200-x8")
    p = predict(baseline_plan("sglang", hw, 8), load_model("deepseek-v3"), hw, W)
    assert p.feasible and p.total_tok_s > 0
    assert p.memory["both"].kv_tokens > 100_000


def test_replicas_beat_wide_expert_parallel_for_small_moe_on_pcie():
    # pcie-trtllm-qwen3-30b-a3b-fp4-rtx6000pro: TP1 x8 replicas 9,938 vs DEP8 3,985 output tok/s/GPU (2.5x)
    hw, model = load_preset("rtx-pro-6000-x8"), load_model(str(FIXTURES / "qwen3-30b-a3b" / "config.json"))
    fp8 = Kernels(gemm_dtype="fp8", kv_cache_dtype="fp8")
    replicas = predict(agg(tp=1, replicas=8, kernels=fp8), model, hw, W)
    dep8 = predict(agg(tp=1, dp=8, ep=8, dp_attention=True, kernels=fp8), model, hw, W)
    assert replicas.feasible and dep8.feasible
    assert replicas.output_tok_s_per_gpu > 1.3 * dep8.output_tok_s_per_gpu


def test_pipeline_beats_tensor_parallel_for_dense_70b_on_pcie():
    # pcie-trtllm-llama33-70b-fp4-rtx6000pro: NVIDIA notes PP helps on RTX 6000 (PCIe)
    hw, model = load_preset("rtx-pro-6000-x8"), load_model("llama-3.1-70b")
    tp8 = predict(agg(tp=8), model, hw, W)
    pp = predict(agg(tp=1, pp=2, replicas=4, kernels=Kernels(gemm_dtype="fp8")), model, hw, W)
    assert pp.total_tok_s > tp8.total_tok_s


def test_decode_time_per_token_grows_with_batch_and_throughput_too():
    hw, model = load_preset("rtx-pro-6000-x8"), load_model("deepseek-v4.1-flash")
    small = predict(agg(tp=8, batching=Batching(max_running=8)), model, hw, W)
    big = predict(agg(tp=8, batching=Batching(max_running=256)), model, hw, W)
    assert big.tpot_ms["mean"] > small.tpot_ms["mean"]
    assert big.total_tok_s > small.total_tok_s


def test_disaggregated_prediction_has_both_phases_and_kv_transfer():
    hw, model = load_preset("rtx-pro-6000-x8"), load_model("deepseek-v4.1-flash")
    plan = Plan(
        "sglang",
        "disaggregated",
        {
            "prefill": PhasePlan(gpus=(0, 1, 2, 3), tp=1, dp=4, ep=4, dp_attention=True),
            "decode": PhasePlan(gpus=(4, 5, 6, 7), tp=1, dp=4, ep=4, dp_attention=True),
        },
    )
    p = predict(plan, model, hw, Workload(isl=4096, osl=512))
    assert p.feasible, p.reason
    assert [s.phase for s in p.steps] == ["prefill", "decode"]
    assert p.kv_transfer_ms > 0
    assert p.ttft_ms["mean"] > p.kv_transfer_ms


def test_slo_constrains_the_operating_point():
    hw, model = load_preset("rtx-pro-6000-x8"), load_model("deepseek-v4.1-flash")
    plan = agg(tp=4, pp=2)
    free = predict(plan, model, hw, W)
    tight = predict(plan, model, hw, Workload(isl=1000, osl=1000, tpot_ms=free.tpot_ms["mean"] / 2))
    assert tight.tpot_ms["mean"] <= free.tpot_ms["mean"] / 2 or not tight.slo_met
    assert tight.total_tok_s <= free.total_tok_s


def test_check_plan_reasons():
    hw, model = load_preset("rtx-pro-6000-x8"), load_model("llama-3.1-70b")
    assert "need a MoE model" in check_plan(agg(tp=1, dp=8, dp_attention=True), model, hw)
    assert check_plan(agg(tp=8), model, hw) == ""
    moe = load_model("deepseek-v4.1-flash")
    bad_ep = Plan("vllm", "aggregated", {"both": PhasePlan(gpus=tuple(range(7)), tp=1, dp=7, ep=7, dp_attention=True)})
    assert "does not divide 384 experts" in check_plan(bad_ep, moe, hw)
    deepep = agg(tp=8, ep=8, comm=Comm(all2all="deepep"))
    assert "NVLink" in check_plan(deepep, moe, hw)


def test_attention_entries_and_experts_hit():
    v41 = load_model("deepseek-v4.1-flash")
    swa, ratio2, ratio1 = v41.layers[0].attention, v41.layers[2].attention, v41.layers[30].attention
    assert attended_entries(swa, 10_000) == 128
    assert attended_entries(ratio2, 100) == pytest.approx(50 + 100)  # 100/2 compressed + window of 100
    assert attended_entries(ratio1, 100_000) == 512 + 128  # top-k cap + window
    assert indexer_scored(v41.layers[20].attention, 1e6, True) == 1e6  # the candidate source scores every entry
    assert indexer_scored(v41.layers[24].attention, 1e6, True) == 2048 * 8  # a consumer: its candidates (sm_10x)
    assert indexer_scored(v41.layers[24].attention, 1e6) == 1e6  # elsewhere dense logits, masked
    assert indexer_scored(v41.layers[21].attention, 1e6) == 0  # reuses layer 20's top-k
    assert distinct_experts(384, 6, 1) == pytest.approx(6)
    assert distinct_experts(384, 6, 10_000) == pytest.approx(384, rel=1e-3)
