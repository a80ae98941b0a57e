"""SGLang 0.5.23 fuses DeepSeek-V3/R1's and GLM-5's single shared expert into the routed fused MoE as one more expert
every token picks (E + 1 experts, top-k + 1: srt/models/deepseek_v2.py:694-703) where the model class's gate allows
it (deepseek_v2.py:3325-3394: 256 routed experts, sm >= 80, expert parallel 1, no two-batch overlap or DeepEP):
the op list then has no shared-expert GEMM pair, and the routed op's launch computes the shared expert's rows and
reads its weights (capability/profiles/sglang_0_5_23.py fused_shared_experts, perf/ffn_shape.py, perf/oplist.py)."""

import dataclasses

import pytest

from autotune.capability.engine_profile import SharedFusionFacts
from autotune.capability.profiles import profile
from autotune.catalog import load_model, load_preset
from autotune.perf.halves import ffn_kernel_terms
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_kernel_ops
from autotune.perf.sharding import fused_shared_experts
from autotune.specs import Comm, Overlap, PhasePlan

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")
MOE = DSV3.layers[-1].ffn
TP8 = PhasePlan(gpus=tuple(range(8)), tp=8)
FACTS = SharedFusionFacts("deepseek_v3", 256, 1, 1, "sm_90", False, False, "auto", "fp8_block")


def test_the_rule_follows_sglangs_gates():
    rule = profile("sglang").fused_shared_experts
    assert rule(FACTS) == 1
    assert rule(FACTS._replace(family="glm_moe_dsa", expert_format="bf16")) == 1  # GLM-5 (GlmMoeDsaForCausalLM)
    assert rule(FACTS._replace(family="glm5_next", routed=288)) == 1  # GLM-5.3-Flash: its own gate, any count
    for off in (
        {"ep": 8},  # expert parallel (NVIDIA)
        {"a2a": True},  # DeepEP
        {"two_batch": True},  # TBO
        {"arch": "sm_75"},  # compute capability below 8.0
        {"routed": 384},  # 384 routed experts only for a Quark MXFP4 checkpoint
        {"shared": 2},
        {"expert_format": "int4_awq"},  # W4A16: routed and shared experts on different quant methods
        {"moe_kernel": "flashinfer_trtllm"},  # the runner turns the fusion off
        {"family": "deepseek_v41"},  # V4 / V4.1: only with --enforce-shared-experts-fusion
        {"family": "qwen3_5_moe"},  # no fusable count on CUDA
    ):
        assert rule(FACTS._replace(**off)) == 0, off
    assert profile("vllm").fused_shared_experts is None


def test_the_plan_reads_the_rule():
    assert fused_shared_experts(DSV3, TP8, "sglang", "sm_90") == 1
    assert fused_shared_experts(DSV3, TP8, "vllm", "sm_90") == 0
    assert fused_shared_experts(DSV3, dataclasses.replace(TP8, ep=8), "sglang", "sm_90") == 0
    assert fused_shared_experts(DSV3, dataclasses.replace(TP8, overlap=Overlap(two_batch=True)), "sglang", "sm_90") == 0
    assert fused_shared_experts(load_model("deepseek-v4.1-flash"), TP8, "sglang", "sm_90") == 0


def test_the_fused_shared_expert_rides_in_the_routed_launch():
    tokens = 256.0
    sg = ffn_kernel_ops(context(DSV3, TP8, "sglang", H200, TP8.gpus), MOE, tokens)
    vl = ffn_kernel_ops(context(DSV3, TP8, "vllm", H200, TP8.gpus), MOE, tokens)
    assert [op.source for op in vl if op.kind == "gemm"][0] == "tp"  # vLLM: the shared expert's GEMM pair
    assert "tp" not in [op.source for op in sg if op.kind == "gemm"]  # SGLang: no shared GEMM
    moe = [op for op in sg if op.kind == "grouped_moe"]
    assert [op.count for op in moe] == [1.0, 0.0]  # one launch: the shared expert's tiles add no fixed time
    shared = moe[1]
    assert shared.m == tokens  # every token's row, one expert
    assert shared.flops == pytest.approx(2 * MOE.expert_params * tokens / 8)  # expert-sharded over the 8 ranks
    assert shared.nbytes == pytest.approx(MOE.expert_params * 1 / 8)  # its FP8 weights, read once
    # the same FLOPs as the separate GEMM pair, which read its weights through the dense path
    vl_shared = next(op for op in vl if op.kind == "gemm" and op.source == "tp")
    assert shared.flops == pytest.approx(vl_shared.flops)
    # the routed rows the quant / permute kernels move include the shared expert's
    permute = [op for op in sg if op.source == "moe permute"][0]
    vl_permute = [op for op in vl if op.source == "moe permute"][0]
    assert permute.m == pytest.approx(vl_permute.m * 9 / 8)


def test_the_kernel_memo_keys_the_fusion():
    tbo = dataclasses.replace(TP8, overlap=Overlap(two_batch=True))  # no fusion under TBO, nothing else differs
    fused = ffn_kernel_terms(context(DSV3, TP8, "sglang", H200, TP8.gpus), MOE, 64.0)
    c = context(DSV3, tbo, "sglang", H200, tbo.gpus)
    apart = ffn_kernel_terms(c, MOE, 64.0)
    assert apart[0] != fused[0]
    assert any(op.kind == "gemm" and op.source == "tp" for op in ffn_kernel_ops(c, MOE, 64.0))
    deepep = dataclasses.replace(TP8, ep=8, comm=Comm(all2all="deepep"))
    assert context(DSV3, deepep, "sglang", H200, deepep.gpus).fused_shared == 0
