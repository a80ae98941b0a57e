"""Which plans run the engines' fused-MoE Triton kernel, and the config shapes they look up (kernels.moe_configs).

A phase runs it when its MoE kernel (kernels.moe, or the engine's pick for `auto`: perf.efficiency.auto_moe_kernel)
is `triton` and its experts compute in bf16/fp16 or FP8 w8a8 (FP8 weights on a chip with FP8 tensor cores; other
formats go to other kernels). The shape is what that engine keys its tuned file by for the phase's layout: the MoE
group is the phase's tp x dp GPUs, split into whole experts when ep > 1.
"""

from __future__ import annotations

from autotune import capability
from autotune.capability.facts import box_facts, compute_capability, phase_facts
from autotune.kernels import moe_configs as mc
from autotune.perf import efficiency, precision
from autotune.specs import HardwareProfile, ModelSpec
from autotune.specs.plan import Plan

# expert compute dtype -> the fused-MoE config dtype (kernels.moe_configs.DTYPE_SELECTORS)
TRITON_DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8_w8a8"}


def phase_moe_kernel(plan: Plan, name: str, model: ModelSpec, hw: HardwareProfile) -> str:
    """The MoE kernel phase `name` runs: its kernels.moe, or the engine's choice for `auto` and for a value the
    engine silently ignores on this box (a capability rule with effect "ignored", e.g. vLLM Marlin for bf16 experts
    falls back to auto: vllm fused_moe/oracle/unquantized.py:180-195)."""
    phase = plan.phases[name]
    moe = phase.kernels.moe
    if moe != "auto":
        facts = {**phase_facts(plan.engine, plan, name, phase, box_facts(hw, model)), "engine": plan.engine}
        refused = capability.value_admitted(plan.engine, "kernels.moe", moe, facts)
        if refused is None or refused.rule.effect != "ignored":
            return moe
    deepep = phase.comm.all2all == "deepep" and phase.ep > 1
    expert = precision.compute_dtype(model, phase, hw, "expert")
    return efficiency.auto_moe_kernel(plan.engine, expert, hw.gpu.arch, deepep, phase.ep, model.expert_format)


def triton_moe_shapes(plan: Plan, model: ModelSpec, hw: HardwareProfile) -> dict[str, mc.MoeShape]:
    """phase name -> the fused-MoE shape it looks a tuned config up by; phases off the Triton path are absent."""
    if not model.is_moe:
        return {}
    out = {}
    for name, phase in plan.phases.items():
        if phase_moe_kernel(plan, name, model, hw) != "triton":
            continue
        stored = precision.expert_dtype(model, phase)
        computed = precision.compute_dtype(model, phase, hw, "expert")
        dtype = TRITON_DTYPES.get(computed) if stored == computed or stored in ("bf16", "fp16") else None
        if dtype is None:  # FP4 / INT4 / weight-only FP8: not the w8a8 or bf16 Triton kernel tune-moe times
            continue
        cc = compute_capability(hw.gpu.arch)  # SGLang fuses shared experts on sm >= 80 only; 0.0 off NVIDIA
        out[name] = mc.moe_shape(
            model,
            engine=plan.engine,
            tp=phase.stage_ranks,
            ep=phase.ep,
            dtype=dtype,
            block_shape=mc.default_block_shape(model, dtype),
            compute_capability=cc,
        )
    return out
