"""Structural causes of issue 16 (model fidelity v3): each test fails on the model before the fix."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import rates
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_ops, layer_ops, linear_ops
from autotune.perf.ops import StepInput, cost_ops
from autotune.specs import Kernels, PhasePlan

H200, PCIE = load_preset("h200-x8"), load_preset("rtx-pro-6000-x8")
DSV3, LLAMA70 = load_model("deepseek-v3"), load_model("llama-3.1-70b")


def phase(n=1, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(n)), **kw)


def test_kernel_time_is_launch_plus_transfer():
    """A weight-streaming GEMM pays its fixed kernel time on top of the transfer (old: max of the two)."""
    bf16 = dataclasses.replace(LLAMA70, dense_dtype="bf16")
    c = context(bf16, phase(), "vllm", H200, (0,))
    ops = linear_ops(c, 1, 4096, 4096, "t")
    rate = rates.rates_table(H200).get("gemm", "bf16", "m<=16")
    transfer_s = (4096 * 4096 * 2 + 4096 * 2 + 4096 * 2) / (rate.gbs * 1e9)  # weights, the input and output row
    assert cost_ops(c, ops).time_s == pytest.approx(transfer_s + rate.min_us * 1e-6)


def test_fp8_linear_pays_its_activation_quantisation():
    """An FP8 linear emits the `quant` op (per-token activation quantisation); a bf16 one does not."""
    fp8 = context(LLAMA70, phase(kernels=Kernels(gemm_dtype="fp8")), "vllm", H200, (0,))
    bf16 = context(dataclasses.replace(LLAMA70, dense_dtype="bf16"), phase(), "vllm", H200, (0,))
    x = StepInput(prefill_tokens=4096, prefill_ctx=2048)
    fp8_quant = [op for op in layer_ops(fp8, LLAMA70.layers[0], x) if op.kind == "quant"]
    assert fp8_quant and all(op.nbytes > 0 for op in fp8_quant)
    assert not [op for op in layer_ops(bf16, LLAMA70.layers[0], x) if op.kind == "quant"]
    assert cost_ops(fp8, fp8_quant).by_rate.get(("quant", "bf16", "any"), 0.0) > 0


def test_fp8_speedup_shrinks_with_small_k():
    """The FP8/bf16 ratio depends on K: a K=512 FP8 GEMM gains less over bf16 than a K=8192 one."""
    fp8 = context(LLAMA70, phase(kernels=Kernels(gemm_dtype="fp8")), "vllm", H200, (0,))
    bf16 = context(dataclasses.replace(LLAMA70, dense_dtype="bf16"), phase(), "vllm", H200, (0,))

    def gemm_s(c, k):
        return cost_ops(c, [op for op in linear_ops(c, 16384, 8192, k, "t") if op.kind == "gemm"]).time_s

    small = gemm_s(bf16, 512) / gemm_s(fp8, 512)
    large = gemm_s(bf16, 8192) / gemm_s(fp8, 8192)
    assert small < large and large > 1.2
    assert rates.narrow_k_speed("sm_90", rates.FP8_RATIO_K) == pytest.approx(1.0)


def test_memory_bound_moe_is_not_divided_by_the_kernel_speed_prior():
    """Decode experts stream weights at the bandwidth: a slower kernel prior (Triton 0.85) does not slow them."""
    x_tokens = 4.0  # a few decode tokens: weight streaming dominates
    layer = DSV3.layers[-1]
    costs = {}
    for kernel in ("cutlass", "triton"):
        c = context(DSV3, phase(8, tp=8, ep=8, kernels=Kernels(moe=kernel)), "vllm", H200, tuple(range(8)))
        moe = [op for op in ffn_ops(c, layer.ffn, x_tokens) if op.kind == "grouped_moe"]
        costs[kernel] = cost_ops(c, moe).time_s
    assert costs["triton"] == pytest.approx(costs["cutlass"])


def test_ep_imbalance_depends_on_the_batch():
    """The busiest EP rank's excess shrinks as the batch grows (old: a fixed 1.15 at every token count)."""
    c = context(DSV3, phase(8, tp=8, ep=8), "vllm", H200, tuple(range(8)))
    ffn = DSV3.layers[-1].ffn

    def excess(tokens):
        moe = next(op for op in ffn_ops(c, ffn, tokens) if op.kind == "grouped_moe")
        return moe.m / (tokens * ffn.experts_per_token / ffn.num_experts)

    assert excess(16) > excess(256) > excess(65536) > 1.0
    assert excess(65536) == pytest.approx(c.imbalance, rel=0.05)


def test_skewed_routing_hits_fewer_experts_than_uniform():
    """Expert hits follow a non-uniform popularity: a batch reads fewer distinct experts than uniform routing."""
    from autotune.perf.routing import distinct_experts

    assert distinct_experts(256, 8, 1) == pytest.approx(8)
    assert distinct_experts(256, 8, 64) < distinct_experts(256, 8, 64, skew=0.0) - 5


def test_custom_all_reduce_latency_is_per_interconnect():
    """A tiny custom all-reduce over NVLink costs the engines' kernel latency (launch + one flag exchange per peer),
    not the old 7.5 us PCIe figure; the 2-GPU PCIe pair pays the same fixed time plus its slower wire."""
    from autotune.perf import comm
    from autotune.perf import comm_rates as cr

    algo, nvlink_s = comm.all_reduce(H200, tuple(range(8)), 512, "custom")
    assert algo == "custom"
    assert nvlink_s * 1e6 < 7.5
    assert nvlink_s * 1e6 == pytest.approx(cr.engine_ar_latency_us(8), rel=0.05)
    algo, pcie_s = comm.all_reduce(PCIE, (0, 1), 512, "custom")
    assert algo == "custom" and pcie_s * 1e6 >= cr.engine_ar_latency_us(2)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_int4_awq_experts_default_to_marlin(engine):
    """The engine's MoE kernel follows the checkpoint format: AWQ/GPTQ INT4 experts run Marlin (old: by dtype,
    a bf16-compute kernel the rules do not admit for that format)."""
    from autotune.perf import efficiency as eff

    awq = dataclasses.replace(DSV3, dense_dtype="bf16", expert_dtype="int4", expert_format="int4_awq")
    c = context(awq, phase(8, tp=8), engine, H200, tuple(range(8)))
    assert c.moe_speed == pytest.approx(rates.MARLIN_MMA_SYNC_SPEED * rates.MMA_SYNC_SHARE["sm_90"])  # Marlin's
    assert eff.auto_moe_kernel(engine, "bf16", "sm_90", False, 1, "int4_awq") == "marlin"


def test_speculative_acceptance_is_an_input():
    """Acceptance per model family (public figure) and per workload (flag / file field) moves the prediction
    (old: one constant per method)."""
    from autotune.perf import efficiency as eff
    from autotune.perf import predict
    from autotune.perf.oplist import speculation
    from autotune.specs import Plan, Speculative, Workload

    mtp = phase(8, tp=8, speculative=Speculative("mtp", 3))
    assert speculation(mtp, "glm_moe_dsa")[1] < speculation(mtp, "deepseek_v3")[1]
    assert eff.draft_acceptance("glm_moe_dsa", "mtp") == eff.DRAFT_ACCEPTANCE_BY_FAMILY[("glm_moe_dsa", "mtp")]
    assert speculation(mtp, "deepseek_v3", 0.5)[1] == pytest.approx((1 - 0.5**4) / 0.5)
    plan = Plan(engine="vllm", mode="aggregated", phases={"both": mtp})
    low = predict(plan, DSV3, H200, Workload(isl=1024, osl=1024, draft_acceptance=0.5))
    default = predict(plan, DSV3, H200, Workload(isl=1024, osl=1024))
    assert low.feasible and low.output_tok_s < default.output_tok_s
    with pytest.raises(ValueError, match="draft_acceptance"):
        Workload(draft_acceptance=1.5)


def test_memory_follows_each_engines_arithmetic():
    """SGLang: total - its reserved share (mem_fraction_static, floor 10 GiB above 60 GiB), not 90%; vLLM: 90% of
    total minus weights, profiled activations and non-torch growth, the CUDA context outside the budget."""
    from autotune.perf.memory import GIB, RESERVE_GB, memory_fit
    from autotune.specs import Batching

    small = phase(8, tp=8, batching=Batching(chunked_prefill_tokens=2048, max_running=128))
    sglang = memory_fit(DSV3, small, H200, 2048, "sglang")
    # 512 + 1.5 x 2048 + 128 x 2 + 8 / 8 x 1024 MB = 4,864 MB < the 10 GiB floor
    assert sglang.capacity_gb * 1e9 == pytest.approx(H200.gpu.memory_gib * GIB - 10 * GIB)
    vllm = memory_fit(DSV3, small, H200, 2048, "vllm")
    assert vllm.capacity_gb * 1e9 == pytest.approx(H200.gpu.memory_gib * GIB * 0.9)
    assert vllm.reserve_gb == RESERVE_GB < 3.0
    assert sglang.kv_tokens > vllm.kv_tokens


def test_vllm_mla_on_sm120_runs_triton_mla():
    """vLLM's default MLA kernel on sm_120 is TRITON_MLA: costed with the Triton prior, not as FlashMLA."""
    from autotune.perf import efficiency as eff

    auto = context(DSV3, phase(8, tp=8), "vllm", PCIE, tuple(range(8)))
    sglang = context(DSV3, phase(8, tp=8), "sglang", PCIE, tuple(range(8)))
    hopper = context(DSV3, phase(8, tp=8), "vllm", H200, tuple(range(8)))
    assert auto.attention_speed == eff.ATTENTION_VARIANT_SPEED["triton"] < hopper.attention_speed
    assert sglang.attention_speed == eff.ATTENTION_VARIANT_SPEED["auto"]
