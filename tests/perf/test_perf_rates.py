"""The rates table (perf/rates.py) and the op list (perf/ops.py): provenance on every entry, probe figures
override priors without becoming more optimistic than the probe, minimum kernel latencies, FP8/bf16 ratios
inside the public range, MLA's replicated q_a/kv_a, the engines' modelled differences."""

import dataclasses

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf import efficiency as eff
from autotune.perf import mla, predict, rates
from autotune.perf.ops import StepInput, context, cost_ops, layer_ops, step_cost
from autotune.specs import Measured, PhasePlan, Plan, Workload

H200, PCIE, L40S = load_preset("h200-x8"), load_preset("rtx-pro-6000-x8"), load_preset("l40s-x8")
DSV3, LLAMA70 = load_model("deepseek-v3"), load_model("llama-3.1-70b")
PROVENANCES = ("datasheet-prior", "public:", "probe", "measured-run", "fitted")


def phase(n=8, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(n)), **kw)


def probed(hw, **kw):
    return dataclasses.replace(hw, measured=Measured(**kw))


@pytest.mark.parametrize("hw", [H200, PCIE, L40S], ids=lambda h: h.name)
def test_every_entry_has_a_provenance(hw):
    table = rates.rates_table(hw)
    assert table.entries
    for key, rate in table.entries.items():
        assert any(p in rate.provenance for p in PROVENANCES), (key, rate.provenance)
        assert rate.gbs > 0 and rate.min_us > 0


def test_decode_attention_bandwidth_follows_its_one_fraction(monkeypatch):
    """The datasheet-prior decode attention rate is mem_bw x ATTENTION_DECODE_FRACTION, the constant the public
    FlashMLA rows set (kernel-flashmla-h800-decode, kernel-flashmla-h100-decode-achatbot): no second literal."""
    hw = load_preset("l20-x8")  # a table no other test here builds first at the shipped fraction
    rates._TABLES.clear()
    shipped = rates.rates_table(hw).get("attention", "bf16", "decode").gbs
    assert shipped == pytest.approx(hw.gpu.mem_bw_gbs * rates.ATTENTION_DECODE_FRACTION)
    monkeypatch.setattr(rates, "ATTENTION_DECODE_FRACTION", 0.7)
    rates._TABLES.clear()
    moved = rates.rates_table(hw).get("attention", "bf16", "decode").gbs
    rates._TABLES.clear()
    assert moved == pytest.approx(hw.gpu.mem_bw_gbs * 0.7)


def test_table_is_cached_by_fingerprint():
    assert rates.rates_table(H200) is rates.rates_table(load_preset("h200-x8"))


def test_probe_rates_override_priors_and_scale_smaller_buckets_from_the_probe():
    prior = rates.rates_table(H200)
    measured = 500.0  # below the prior large-shape figure: the probe wins even when it is less optimistic
    table = rates.rates_table(probed(H200, gemm_tflops={"bf16": measured}, mem_bw_gbs=4000.0))
    large = table.get("gemm", "bf16", "m>1024")
    assert large.tflops == measured and large.provenance.startswith("probe")
    assert prior.get("gemm", "bf16", "m>1024").provenance.startswith("datasheet-prior")
    for _, bucket in rates.M_BUCKETS:  # every bucket scales from the probe, none above it
        r = table.get("gemm", "bf16", bucket)
        assert r.tflops == pytest.approx(measured * rates.M_BUCKET_SCALE[bucket]) and r.tflops <= measured
    assert table.get("gemm", "fp8", "m>1024").provenance.startswith("probe*")  # fp8 from the probed bf16
    assert table.get("norm", "bf16", "any").gbs == 4000.0


def test_minimum_latency_floors_tiny_ops():
    c = context(LLAMA70, phase(n=1), "vllm", H200, (0,))
    tiny = [op for op in layer_ops(c, LLAMA70.layers[0], StepInput(decode_seqs=1, decode_ctx=16)) if op.kind == "norm"]
    cost = cost_ops(c, tiny)
    # launch + transfer (issue 16): the fixed per-kernel time adds to the bytes moved, it is not a max with them
    bandwidth = rates.rates_table(H200).get("norm", "bf16", "any").gbs * 1e9
    floor_s = tiny[0].count * rates.FUSED_ADD_NORM_MIN_US * 1e-6  # the layer's norms: fused add + RMSNorm
    assert cost.compute_s + cost.memory_s == pytest.approx(floor_s + tiny[0].nbytes / bandwidth)
    # a 1-token decode step of a 70B model on one GPU is at least its layers x kernels x floors
    s = step_cost(LLAMA70, phase(n=1), "vllm", H200, (0,), StepInput(decode_seqs=1, decode_ctx=16), "t")
    assert s.step_ms >= LLAMA70.num_layers * (rates.MIN_US["gemm"] * 2 + rates.MIN_US["attention"]) * 1e-3


@pytest.mark.parametrize("hw", [H200, PCIE, L40S], ids=lambda h: h.name)
def test_fp8_over_bf16_large_gemm_is_inside_the_public_range(hw):
    table = rates.rates_table(hw)
    ratio = table.get("gemm", "fp8", "m>1024").tflops / table.get("gemm", "bf16", "m>1024").tflops
    assert 1.1 <= ratio <= 1.8  # calibration.yaml gemm-fp8-vs-bf16-sm90/sm100/sm120: 1.24-1.78
    assert ratio < hw.gpu.peak_tflops["fp8"] / hw.gpu.peak_tflops["bf16"]


def test_mla_down_projections_are_not_divided_by_tp():
    att = DSV3.layers[-1].attention
    assert att.replicated_params > 0
    x = StepInput(decode_seqs=8, decode_ctx=1000)

    def projection_bytes(tp):
        c = context(DSV3, phase(n=tp, tp=tp), "vllm", H200, tuple(range(tp)))
        gemms = [op for op in layer_ops(c, DSV3.layers[-1], x) if op.kind == "gemm"][:3]  # the attention's
        assert [op.source for op in gemms] == ["tp", "tp (replicated q_a/kv_a)", "mla absorb"]
        return sum(op.nbytes for op in gemms)

    w = 1  # fp8 checkpoint
    split = att.params - att.replicated_params
    kv_b = mla.kv_b_params(att)  # split over TP too, but decode reads it in bf16 (the absorbed bmms, perf/mla.py)
    # the weights, plus the 8 rows' input / output activations (under 1% here)
    expected = att.replicated_params * w + (split - kv_b) * w / 8 + kv_b * 2 / 8
    assert projection_bytes(8) == pytest.approx(expected, rel=0.02)
    assert projection_bytes(8) > projection_bytes(1) / 8


def test_sglang_overlap_scheduler_is_off_with_pipeline_parallel():
    assert eff.scheduler_overlapped("sglang", 1) and not eff.scheduler_overlapped("sglang", 2)
    assert eff.scheduler_overlapped("vllm", 2)
    assert eff.scheduler_overhead_ms("sglang", 2, 5.0) == profile("sglang").scheduler_cpu_ms
    assert eff.scheduler_overhead_ms("sglang", 1, 5.0) == eff.OVERLAP_EXPOSED_MS


def test_engine_auto_moe_kernel_differs_by_engine_and_a2a():
    assert eff.auto_moe_kernel("sglang", "fp8", "sm_90", False, 1) == "triton"
    assert eff.auto_moe_kernel("sglang", "fp8", "sm_90", True, 8) == "deep_gemm"
    assert eff.auto_moe_kernel("sglang", "fp4", "sm_120", False, 1) == "flashinfer_mxfp4"
    assert eff.auto_moe_kernel("vllm", "fp8", "sm_120", False, 1) == "deep_gemm"


def test_prediction_names_its_rates_and_their_provenance():
    plan = Plan("vllm", "aggregated", {"both": phase(tp=8)})
    p = predict(plan, LLAMA70, H200, Workload(isl=1000, osl=1000))
    assert p.feasible and p.rates
    assert any(k.startswith("gemm/") for k in p.rates)
    assert all(any(x in v for x in PROVENANCES) for v in p.rates.values())
