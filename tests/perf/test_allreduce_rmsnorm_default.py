"""The all-reduce + RMSNorm fusion both engines turn on by default (engine profile allreduce_rmsnorm_default, resolved
by capability.allreduce_rmsnorm_on): a plan that leaves fusion.allreduce_rmsnorm unset is costed as the engine runs
it, within the engine's size limit (vLLM: FI_ALLREDUCE_FUSION_MAX_SIZE_MB per rank; SGLang: 2048 tokens)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune import capability
from autotune.capability.profiles.vllm_0_34_0 import FUSION_MAX_MIB
from autotune.catalog import load_model, load_preset
from autotune.perf.ops import StepInput, step_cost
from autotune.specs import Comm, PhasePlan, Plan

H200, PCIE = load_preset("h200-x8"), load_preset("rtx-pro-6000-x8")
L40S = load_preset("l40s-x8")
QWEN235, DSV3 = load_model("qwen3-235b-a22b"), load_model("deepseek-v3")
DECODE = StepInput(decode_seqs=32, decode_ctx=1500)
PREFILL_16K = StepInput(prefill_tokens=16384, prefill_ctx=16384)


def phase(n=4, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(n)), **kw)


def ms(model, hw, p: PhasePlan, x: StepInput, engine: str) -> float:
    return step_cost(model, p, engine, hw, p.replica_gpus(0), x, "t").step_ms


def norm_kernels(model, hw, p: PhasePlan, x: StepInput, engine: str) -> float:
    """The residual add + RMSNorm kernels a layer runs on this step (oplist.ffn_norm_ops)."""
    from autotune.perf import opcore, oplist

    c = opcore.context(model, p, engine, hw, p.replica_gpus(0))
    ffn = model.layers[-1].ffn
    ops = oplist.ffn_norm_ops(c, ffn, x.decode_seqs * x.decode_width + x.prefill_tokens)
    return sum(op.count for op in ops)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_tp4_decode_on_h200_with_the_key_unset_is_costed_fused(engine):
    """Both engines run the fusion by default on SM90 at TP > 1 (vllm/config/vllm.py:208-231, :325-345;
    sglang arg_groups/overrides.py:954-1003): the unset plan costs what the plan with the fusion on costs, below
    the plan that turns it off. Before, an unset key was costed as fusion off."""
    unset, on, off = phase(tp=4), phase(tp=4, fusion={"allreduce_rmsnorm": True}), phase(tp=4, fusion={})
    off = dataclasses.replace(off, fusion={"allreduce_rmsnorm": False})
    assert capability.allreduce_rmsnorm_on(engine, unset, QWEN235, H200)
    t_unset, t_on, t_off = (ms(QWEN235, H200, p, DECODE, engine) for p in (unset, on, off))
    assert t_unset == t_on < t_off
    assert norm_kernels(QWEN235, H200, unset, DECODE, engine) < norm_kernels(QWEN235, H200, off, DECODE, engine)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_16k_token_prefill_above_the_size_limit_is_costed_unfused(engine):
    """Steps above the engine's fusion size run the unfused all-reduce and norm: vLLM's pass applies only to the
    compile range up to max_size // (hidden x 2 bytes) (allreduce_rms_fusion.py:1011-1027, :1128-1132), SGLang's up
    to FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048 tokens (srt/layers/layer_boundary/residual/add_norm.py:141-158)."""
    on, off = phase(tp=4, fusion={"allreduce_rmsnorm": True}), phase(tp=4, fusion={"allreduce_rmsnorm": False})
    assert ms(QWEN235, H200, on, PREFILL_16K, engine) == ms(QWEN235, H200, off, PREFILL_16K, engine)
    assert norm_kernels(QWEN235, H200, phase(tp=4), PREFILL_16K, engine) == norm_kernels(
        QWEN235, H200, off, PREFILL_16K, engine
    )


def test_vllm_size_limit_in_tokens_follows_its_per_rank_table():
    """2 MiB at TP4 on sm_90 over 4096 x 2-byte rows: 256 tokens fused, 257 not."""
    limit = capability.allreduce_rmsnorm_max_tokens("vllm", phase(tp=4), QWEN235, H200, QWEN235.hidden_size * 2)
    assert limit == FUSION_MAX_MIB["sm_90"][4] * 2**20 // (QWEN235.hidden_size * 2) == 256
    at, above = StepInput(decode_seqs=256, decode_ctx=1500), StepInput(decode_seqs=257, decode_ctx=1500)
    off = phase(tp=4, fusion={"allreduce_rmsnorm": False})
    assert norm_kernels(QWEN235, H200, phase(tp=4), at, "vllm") < norm_kernels(QWEN235, H200, off, at, "vllm")
    assert norm_kernels(QWEN235, H200, phase(tp=4), above, "vllm") == norm_kernels(QWEN235, H200, off, above, "vllm")


def test_sglang_with_dp_attention_is_unfused():
    """SGLang does not turn the fusion on with attention DP (arg_groups/overrides.py:994), nor runs it then
    (srt/layers/layer_boundary/residual/add_norm.py:144-150)."""
    dp_plan = phase(n=8, tp=1, dp=8, ep=8, dp_attention=True)
    asked = dataclasses.replace(dp_plan, fusion={"allreduce_rmsnorm": True})
    assert not capability.allreduce_rmsnorm_on("sglang", dp_plan, DSV3, H200)
    assert ms(DSV3, H200, dp_plan, DECODE, "sglang") == ms(
        DSV3, H200, dataclasses.replace(dp_plan, fusion={"allreduce_rmsnorm": False}), DECODE, "sglang"
    )
    assert ms(DSV3, H200, asked, DECODE, "sglang") == ms(DSV3, H200, dp_plan, DECODE, "sglang")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("hw", [L40S, PCIE], ids=["cc8.9", "cc12.0"])
def test_boxes_outside_sm90_sm10x_are_unfused(engine, hw):
    """Neither engine fuses below SM90 or on SM120 (vllm/config/vllm.py:226-230; sglang arg_groups/overrides.py:
    990): the unset plan, and even one that asks for it, cost the unfused norms."""
    model = QWEN235
    unset = phase(n=8, tp=8, comm=Comm())
    asked = dataclasses.replace(unset, fusion={"allreduce_rmsnorm": True})
    assert not capability.allreduce_rmsnorm_on(engine, unset, model, hw)
    assert not capability.allreduce_rmsnorm_on(engine, asked, model, hw)
    off = dataclasses.replace(unset, fusion={"allreduce_rmsnorm": False})
    assert norm_kernels(model, hw, unset, DECODE, engine) == norm_kernels(model, hw, off, DECODE, engine)


def test_sglang_leaves_llama_unfused_and_vllm_fuses_it():
    """SGLang auto-enables the fusion only for the architectures it lists (arg_groups/overrides.py:928-951: no
    LlamaForCausalLM); vLLM's compile pass fuses any compiled model."""
    llama = load_model("llama-3.1-70b")
    unset = phase(tp=4)
    assert not capability.allreduce_rmsnorm_on("sglang", unset, llama, H200)
    assert capability.allreduce_rmsnorm_on("vllm", unset, llama, H200)


def test_with_engine_defaults_shows_the_fusion_the_engine_runs():
    """best.yaml and the launch say what runs: an unset key becomes on where the engine's default is on, and stays
    unset where it is off; a plan's own choice is kept."""
    plan = Plan("vllm", "aggregated", {"both": phase(tp=4)})
    assert capability.with_engine_defaults(plan, QWEN235, H200).phases["both"].fusion == {"allreduce_rmsnorm": True}
    pcie = Plan("vllm", "aggregated", {"both": phase(n=8, tp=8)})
    assert capability.with_engine_defaults(pcie, QWEN235, PCIE) == pcie
    off = Plan("vllm", "aggregated", {"both": phase(tp=4, fusion={"allreduce_rmsnorm": False})})
    assert capability.with_engine_defaults(off, QWEN235, H200) == off
