"""Facts the capability rules read: of the box and checkpoint (static), and of one phase of a plan."""

from __future__ import annotations

import re
from typing import Any

from autotune.capability.profiles import profile
from autotune.specs import HardwareProfile, ModelSpec, PhasePlan, Plan

# Plan fields the rules may name, read from a PhasePlan (dotted path -> getter).
PHASE_FIELDS = {
    "tp": lambda p: p.tp,
    "dp": lambda p: p.dp,
    "pp": lambda p: p.pp,
    "ep": lambda p: p.ep,
    "dcp": lambda p: p.dcp,
    "eplb": lambda p: p.eplb,
    "dense_dp": lambda p: p.dense_dp,
    "dp_lm_head": lambda p: p.dp_lm_head,
    "kernels.attention": lambda p: p.kernels.attention,
    "kernels.moe": lambda p: p.kernels.moe,
    "kernels.linear": lambda p: p.kernels.linear,
    "kernels.gemm_dtype": lambda p: p.kernels.gemm_dtype,
    "kernels.kv_cache_dtype": lambda p: p.kernels.kv_cache_dtype,
    "comm.allreduce": lambda p: p.comm.allreduce,
    "comm.all2all": lambda p: p.comm.all2all,
    "overlap.two_batch": lambda p: p.overlap.two_batch,
    "batching.max_running": lambda p: p.batching.max_running,
    "batching.chunked_prefill_tokens": lambda p: p.batching.chunked_prefill_tokens,
    "batching.cuda_graph_max_bs": lambda p: p.batching.cuda_graph_max_bs,
    "speculative.method": lambda p: p.speculative.method,
    "speculative.draft_tokens": lambda p: p.speculative.draft_tokens,
}
ONLINE_FP8 = "fp8_online"  # weights a bf16/fp16 checkpoint is quantised to at load time (per-tensor FP8)


def compute_capability(arch: str) -> float:
    """sm_120 -> 12.0, sm_90 -> 9.0, sm_89 -> 8.9, sm_100 -> 10.0; 0.0 for non-NVIDIA architectures."""
    match = re.fullmatch(r"sm_(\d+)(\d)a?", arch)
    return int(match.group(1)) + int(match.group(2)) / 10 if match else 0.0


def box_facts(hw: HardwareProfile, model: ModelSpec) -> dict[str, Any]:
    n = hw.num_gpus
    return {
        "cc": compute_capability(hw.gpu.arch),
        "vendor": hw.gpu.vendor,
        "soc": hw.gpu.arch,  # ascend910b / ascend910c / ascend310p on Ascend (vllm-ascend AscendDeviceType)
        "nvlink": hw.interconnect == "nvlink",
        "p2p": all(hw.p2p[i][j] for i in range(n) for j in range(n) if i != j),
        "family": model.family,
        "hidden_size": model.hidden_size,
        "attention": model.attention_family,
        "moe": model.is_moe,
        "shared_experts": any(layer.ffn.kind == "moe" and layer.ffn.params > 0 for layer in model.layers),
        "dense_format": model.dense_format,
        "expert_format": model.expert_format,
        "draft_heads": model.draft_heads,
        "activation_dtype": "fp16" if model.dense_dtype == "fp16" else "bf16",
        # KV heads and query heads per KV head of the first layer (vLLM's GQA decode context parallel reads them)
        "kv_heads": model.layers[0].attention.num_kv_heads,
        "q_per_kv": model.num_heads // max(1, model.layers[0].attention.num_kv_heads),
        # whether any layer has a dense (not MoE) MLP: SGLang's --moe-dense-tp-size only changes those
        "dense_mlp": any(layer.ffn.kind == "dense" for layer in model.layers),
    }


def served_format(checkpoint_format: str, gemm_dtype: str) -> str:
    """The weight format the kernels see: the checkpoint's, or online FP8 of a bf16/fp16 checkpoint."""
    return ONLINE_FP8 if gemm_dtype == "fp8" and checkpoint_format in ("bf16", "fp16") else checkpoint_format


def derived_facts(engine: str, values: dict[str, Any], box: dict[str, Any]) -> dict[str, Any]:
    """Facts that follow from plan fields: served weight formats and the all-reduce group size."""
    out: dict[str, Any] = {}
    if "kernels.gemm_dtype" in values:
        out["dense_weights"] = served_format(box["dense_format"], values["kernels.gemm_dtype"])
        out["expert_weights"] = served_format(box["expert_format"], values["kernels.gemm_dtype"])
    if "tp" in values and "dp" in values:
        # the TP group spans the DP-attention ranks (SGLang: --tp-size = tp*dp) or is tp (vLLM: dp are engines)
        out["allreduce_world"] = values["tp"] * values["dp"] if profile(engine).tp_spans_dp else values["tp"]
    if "batching.max_running" in values and "batching.chunked_prefill_tokens" in values:
        out["chunk_covers_running"] = values["batching.chunked_prefill_tokens"] >= values["batching.max_running"]
    if "batching.max_running" in values and "batching.cuda_graph_max_bs" in values:
        graph_bs = values["batching.cuda_graph_max_bs"]  # None: the engine's default, which it sizes itself
        out["graph_bs_within_running"] = graph_bs is None or graph_bs <= values["batching.max_running"]
    if "tp" in values and "dcp" in values:
        out["dcp_divides_tp"] = values["tp"] % values["dcp"] == 0
        if "kv_heads" in box:  # vllm/config/model.py:1598-1628: GQA DCP splits the KV heads' replicas over tp
            tp, dcp, kv_heads = values["tp"], values["dcp"], box["kv_heads"]
            out["dcp_fits_kv_heads"] = tp > kv_heads and dcp <= tp // kv_heads and box["q_per_kv"] % dcp == 0
    return out


def peer_facts(plan: Plan, phase_name: str) -> dict[str, Any]:
    """The other phase's plan fields as `peer.<field>` (disaggregated plans; {} otherwise)."""
    if plan.mode != "disaggregated":
        return {}
    other = {"prefill": "decode", "decode": "prefill"}.get(phase_name)
    return phase_field_facts(plan.phases[other], "peer.") if other in plan.phases else {}


def phase_field_facts(phase: PhasePlan, prefix: str = "") -> dict[str, Any]:
    values = {name: get(phase) for name, get in PHASE_FIELDS.items()}
    values.update({f"fusion.{k}": v for k, v in phase.fusion.items()})
    values.update({f"platform.{k}": v for k, v in phase.platform.items()})
    values.update({f"comm.nccl.{k}": v for k, v in phase.comm.nccl.items()})
    return {prefix + k: v for k, v in values.items()}


def phase_facts(engine: str, plan: Plan, phase_name: str, phase: PhasePlan, box: dict[str, Any]) -> dict[str, Any]:
    values = phase_field_facts(phase)
    return {
        **box,
        **values,
        **peer_facts(plan, phase_name),
        **derived_facts(engine, values, box),
        "engine": engine,
        "mode": plan.mode,
        "phase": phase_name,
    }
