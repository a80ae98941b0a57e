"""Plan fields the performance model reads: each changes the prediction where it applies, in the expected
direction (speculative decoding, decode context parallel, EPLB, data-parallel dense MLP, DP LM head,
all-reduce + RMSNorm fusion, dense GEMM kernel, MoE kernel priors)."""

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import efficiency as eff
from autotune.perf import predict, rates
from autotune.perf.ops import StepInput, speculation, step_cost
from autotune.specs import Comm, Kernels, PhasePlan, Plan, Speculative, Workload

W = Workload(isl=1000, osl=1000)
ONE = Workload(isl=1000, osl=1000, concurrency=1)  # one request in flight: decode latency bound
H200, PCIE = load_preset("h200-x8"), load_preset("rtx-pro-6000-x8")
DSV3, GLM5, DSV41 = load_model("deepseek-v3"), load_model("glm-5"), load_model("deepseek-v4.1-flash")
QWEN235, LLAMA70 = load_model("qwen3-235b-a22b"), load_model("llama-3.1-70b")
FP8 = Kernels(gemm_dtype="fp8", kv_cache_dtype="fp8")


def phase(n=8, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(n)), **kw)


def agg(engine="sglang", **kw) -> Plan:
    return Plan(engine, "aggregated", {"both": phase(**kw)})


def dep(n=8, **kw) -> dict:
    return dict(tp=1, dp=n, ep=n, dp_attention=True, **kw)


def step(model, hw, p: PhasePlan, x: StepInput, engine="sglang"):
    return step_cost(model, p, engine, hw, p.replica_gpus(0), x, "t")


def both(a: Plan, b: Plan, model, hw, w=W):
    pa, pb = predict(a, model, hw, w), predict(b, model, hw, w)
    assert pa.feasible and pb.feasible, (pa.reason, pb.reason)
    return pa, pb


# ---- speculative decoding


def test_expected_accepted_length_follows_the_geometric_acceptance():
    assert speculation(phase(tp=8)) == (1, 1.0)
    width, accepted = speculation(phase(tp=8, speculative=Speculative("mtp", 1)))
    assert width == 2 and accepted == pytest.approx(1 + eff.DRAFT_ACCEPTANCE["mtp"])  # 1.85 at a = 0.85
    a = eff.DRAFT_ACCEPTANCE["dspark"]
    assert speculation(phase(tp=8, speculative=Speculative("dspark", 5)))[1] == pytest.approx((1 - a**6) / (1 - a))


def test_mtp_lowers_tpot_and_raises_throughput_at_small_batch():
    plain, mtp = both(agg(tp=8), agg(tp=8, speculative=Speculative("mtp", 1)), DSV3, H200, ONE)
    assert mtp.tpot_ms["mean"] < 0.75 * plain.tpot_ms["mean"]
    assert mtp.total_tok_s > plain.total_tok_s


def test_speculation_verifies_k_plus_one_tokens_and_pays_for_drafting():
    p, spec = phase(tp=8), phase(tp=8, speculative=Speculative("mtp", 2))
    x = StepInput(decode_seqs=64, decode_ctx=1500)
    plain, verify = step(DSV3, H200, p, x), step(DSV3, H200, spec, x)
    assert verify.batch_tokens == 3 * 64
    assert verify.step_ms > plain.step_ms  # wider step plus two draft passes
    assert step(DSV3, H200, spec, StepInput(prefill_tokens=4096, prefill_ctx=2048)).step_ms == pytest.approx(
        step(DSV3, H200, p, StepInput(prefill_tokens=4096, prefill_ctx=2048)).step_ms
    )  # prefill does not speculate


def test_speculative_draft_layer_takes_memory():
    plain, mtp = both(agg(tp=8), agg(tp=8, speculative=Speculative("mtp", 1)), DSV3, H200)
    assert mtp.memory["both"].weights_gb > plain.memory["both"].weights_gb


def test_dspark_lowers_tpot_for_v41_flash():
    plain, dspark = both(agg(**dep()), agg(**dep(), speculative=Speculative("dspark", 3)), DSV41, PCIE, ONE)
    assert dspark.tpot_ms["mean"] < plain.tpot_ms["mean"]


def test_disaggregated_decode_speculates_and_prefill_does_not():
    def plan(spec):
        pre = PhasePlan(gpus=(0, 1, 2, 3), tp=4)
        dec = PhasePlan(gpus=(4, 5, 6, 7), tp=4, speculative=spec)
        return Plan("sglang", "disaggregated", {"prefill": pre, "decode": dec})

    w = Workload(isl=1000, osl=1000, concurrency=1)
    plain, mtp = both(plan(Speculative()), plan(Speculative("mtp", 1)), QWEN235, H200, w)
    assert mtp.tpot_ms["mean"] < plain.tpot_ms["mean"]
    assert mtp.ttft_ms["mean"] == pytest.approx(plain.ttft_ms["mean"])


# ---- decode context parallel


def test_dcp_multiplies_mla_kv_capacity_and_divides_decode_kv_reads():
    plain, dcp = both(agg(tp=8), agg(tp=8, dcp=2), DSV3, H200)
    assert dcp.memory["both"].kv_tokens > 1.9 * plain.memory["both"].kv_tokens
    x = StepInput(decode_seqs=64, decode_ctx=32000)
    s1, s2 = step(DSV3, H200, phase(tp=8), x), step(DSV3, H200, phase(tp=8, dcp=2), x)
    assert s2.memory_ms < s1.memory_ms
    assert s2.comm_ms.get("dcp_allgather", 0) > 0 and "dcp_allgather" not in s1.comm_ms


def test_dcp_changes_glm5_throughput():
    plain, dcp = both(agg(tp=8, kernels=FP8), agg(tp=8, dcp=4, kernels=FP8), GLM5, H200)
    assert dcp.memory["both"].kv_tokens > plain.memory["both"].kv_tokens
    assert dcp.total_tok_s != plain.total_tok_s


# ---- EPLB


def test_eplb_raises_throughput_with_expert_parallel_only():
    plain, eplb = both(agg(**dep()), agg(**dep(), eplb=True), DSV3, H200)
    assert eplb.total_tok_s > plain.total_tok_s
    tp_plain, tp_eplb = both(agg(tp=8), agg(tp=8, eplb=True), QWEN235, H200)  # ep == 1: nothing to balance
    assert tp_eplb.total_tok_s == tp_plain.total_tok_s


# ---- data-parallel dense MLP (SGLang --moe-dense-tp-size 1)


def test_dense_dp_holds_whole_dense_mlps_and_drops_their_collectives():
    plain, ddp = both(agg(**dep()), agg(**dep(), dense_dp=True), DSV3, H200)
    assert ddp.memory["both"].weights_gb > plain.memory["both"].weights_gb  # 3 dense MLPs whole on every rank
    x = StepInput(decode_seqs=256, decode_ctx=1500)
    s_plain, s_ddp = step(DSV3, H200, phase(**dep()), x), step(DSV3, H200, phase(**dep(), dense_dp=True), x)
    assert sum(s_ddp.comm_ms.values()) < sum(s_plain.comm_ms.values())
    assert ddp.total_tok_s != plain.total_tok_s


# ---- DP LM head (SGLang --enable-dp-lm-head)


def test_lm_head_without_dp_lm_head_spans_all_ranks_and_gathers_across_dp():
    plain, dph = both(agg(**dep()), agg(**dep(), dp_lm_head=True), DSV3, H200)
    assert dph.memory["both"].weights_gb > plain.memory["both"].weights_gb  # head / tp instead of / (tp*dp)
    x = StepInput(decode_seqs=512, decode_ctx=1500)
    s_plain, s_dph = step(DSV3, H200, phase(**dep()), x), step(DSV3, H200, phase(**dep(), dp_lm_head=True), x)
    assert s_dph.comm_ms.get("allgather", 0) < s_plain.comm_ms.get("allgather", 0)
    assert dph.total_tok_s != plain.total_tok_s
    # vLLM's DP ranks each run their own head: the field does not apply
    v_plain = step(DSV3, H200, phase(**dep()), x, engine="vllm")
    v_dph = step(DSV3, H200, phase(**dep(), dp_lm_head=True), x, engine="vllm")
    assert v_plain.step_ms == v_dph.step_ms


# ---- all-reduce + RMSNorm fusion, elementwise kernels


def test_allreduce_rmsnorm_fusion_lowers_step_time_with_tp_only():
    """Off (False) against on; an unset plan takes the engine's default (tests/perf/test_allreduce_rmsnorm_default.py).
    Qwen3-MoE: SGLang runs the fusion only for the architectures it lists (no Llama: arg_groups/overrides.py:928-951).
    At 16 decode rows (128 KiB a reduction, one-shot in both SGLang's all-reduce and the fused kernel) the fused kernel
    saves the norm kernels. Above SGLang's 128 KiB one-shot size on 8 sm_90 ranks its own all-reduce runs two-shot
    while the fused kernel stays one-shot to 2.625 MiB, and the fused plan can be slower (FlashInfer's size rule:
    tests/perf/test_fused_allreduce_price.py), so no serving-level claim is made here.
    """
    fused, plain_fusion = {"allreduce_rmsnorm": True}, {"allreduce_rmsnorm": False}
    x = StepInput(decode_seqs=16, decode_ctx=1500)
    s_plain = step(QWEN235, H200, phase(tp=8, fusion=plain_fusion), x)
    s_fused = step(QWEN235, H200, phase(tp=8, fusion=fused), x)
    assert s_fused.step_ms < s_plain.step_ms
    one = load_preset("h200-x8")
    t_plain = step(LLAMA70, one, phase(n=1, tp=1, fusion=plain_fusion), x)
    t_fused = step(LLAMA70, one, phase(n=1, tp=1, fusion=fused), x)
    assert t_fused.step_ms == t_plain.step_ms  # no all-reduce, nothing to fuse


def test_norms_cost_at_least_their_minimum_kernel_time():
    x = StepInput(decode_seqs=1, decode_ctx=100)
    s = step(LLAMA70, H200, phase(n=1, tp=1), x)
    floor = LLAMA70.num_layers * eff.NORMS_PER_LAYER * rates.FUSED_ADD_NORM_MIN_US * 1e-3
    assert s.memory_ms >= floor


def test_the_layers_norms_are_fused_add_rmsnorm_kernels_and_mlas_latent_norms_plain():
    """vLLM and SGLang run each of a layer's two norms as one fused residual add + RMSNorm kernel (4.1-5.5 us in
    kernel-min-time-rmsnorm-decode and kernel-min-time-add-rmsnorm-vllm36899), MLA's q_a / kv_a norms as plain
    RMSNorms (2.9 us). Before, every norm took the plain figure, and the fused figures only calibration_check read."""
    from autotune.perf import opcore, oplist

    table = rates.rates_table(H200)
    assert table.get("norm", "bf16", "fused_add").min_us == rates.FUSED_ADD_NORM_MIN_US > rates.MIN_US["norm"]
    v3 = load_model("deepseek-v3")
    plan = phase(n=1, tp=1)
    c = opcore.context(v3, plan, "vllm", H200, plan.gpus)
    x = StepInput(decode_seqs=1, decode_ctx=100)
    layer_ops = oplist.layer_ops(c, v3.layers[-1], x)
    norms = [op for op in layer_ops if op.kind == "norm"]
    assert {op.bucket for op in norms} == {"fused_add", "any"}
    assert next(op for op in norms if op.bucket == "fused_add").count == eff.NORMS_PER_LAYER
    assert next(op for op in norms if op.bucket == "any").source == "mla q_a/kv_a norms"


# ---- kernels


def test_triton_linear_kernel_is_slower_than_cutlass_on_fp8_dense_gemms():
    x = StepInput(prefill_tokens=8192, prefill_ctx=4096)
    p = {k: phase(tp=8, kernels=dataclasses.replace(FP8, linear=k)) for k in ("auto", "cutlass", "triton")}
    s = {k: step(LLAMA70, H200, v, x) for k, v in p.items()}
    assert s["auto"].step_ms == s["cutlass"].step_ms < s["triton"].step_ms
    plain, triton = both(agg(tp=8, kernels=FP8), agg(tp=8, kernels=p["triton"].kernels), LLAMA70, H200)
    assert triton.total_tok_s < plain.total_tok_s


def test_new_moe_kernel_choices_have_speed_priors():
    assert {"flashinfer_cutlass", "b12x", "flashinfer_mxfp4"} <= set(eff.MOE_VARIANT_SPEED)
    # a kernel's speed prior moves compute-bound expert GEMMs (a prompt chunk); a decode step streaming the
    # experts' weights runs at the bandwidth whichever kernel streams them (issue 16)
    x = StepInput(prefill_tokens=16384, prefill_ctx=8192)
    b12x = step(DSV41, PCIE, phase(**dep(), kernels=Kernels(moe="b12x")), x)
    auto = step(DSV41, PCIE, phase(**dep()), x)
    assert b12x.step_ms < auto.step_ms


def test_comm_field_defaults_still_predict():
    p = predict(agg(tp=8, comm=Comm()), DSV3, H200, W)
    assert p.feasible
