"""What the engines check across a whole launch, read from the emitted argv (not from the plan or the capability
tables): the conformance test holds every sampled launch to it. Each check names the engine source it mirrors
(vLLM 0.34.0, SGLang 0.5.23; paths as in autotune/capability)."""

from __future__ import annotations

import json

from autotune.capability.facts import compute_capability
from autotune.specs.best import Launch, ProcessSpec
from autotune.specs.hardware import HardwareProfile
from autotune.specs.model import ModelSpec


def flags(argv: tuple[str, ...]) -> dict[str, str]:
    """--flag value / -tp value / --switch (-> 'true') of one server's argv."""
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("-") and not arg[1:2].isdigit():
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[arg] = nxt if nxt and (not nxt.startswith("-") or nxt[1:2].isdigit()) else "true"
    return out


def _servers(launch: Launch) -> list[tuple[ProcessSpec, dict[str, str]]]:
    return [(p, flags(p.argv)) for p in launch.processes if p.role != "router"]


def _disagree(servers, key) -> str:
    seen = {p.role: key(f) for p, f in servers if p.role in ("prefill", "decode")}
    return "" if len(set(seen.values())) <= 1 else f"prefill and decode differ: {seen}"


def _attention_backend(f: dict[str, str]) -> str:
    return f.get("--attention-backend", "auto")


def _spec_method(f: dict[str, str]) -> str:
    return json.loads(f["--speculative-config"])["method"] if "--speculative-config" in f else "none"


def vllm_problems(launch: Launch, model: ModelSpec, hw: HardwareProfile) -> list[str]:
    servers, found = _servers(launch), []
    # NIXL compatibility hash (kv_connector/v1/nixl/metadata.py:107-220, base_worker.py:1267-1283)
    for what, key in (
        ("kv cache dtype", lambda f: f.get("--kv-cache-dtype", "auto")),
        ("attention backend", _attention_backend),
        ("speculative method", _spec_method),
    ):
        if why := _disagree(servers, key):
            found.append(f"NIXL {what}: {why}")
    dense = model.dense_format
    for p, f in servers:
        tp, dcp = int(f.get("-tp", "1")), int(f.get("--decode-context-parallel-size", "1"))
        served = "fp8_online" if f.get("--quantization") == "fp8_per_tensor" else dense
        if f.get("--moe-backend") == "b12x" and ("--enable-expert-parallel" in f or "--enable-eplb" in f):
            found.append(f"{p.name}: b12x with expert parallelism / EPLB (fused_moe/b12x.py:536-545)")
        if f.get("--linear-backend") == "triton" and served != "fp8_block":
            found.append(f"{p.name}: --linear-backend triton on {served} linear layers is ignored (linear/__init__.py)")
        if f.get("--linear-backend") == "cutlass" and served not in (
            "fp8_block",
            "fp8_tensor",
            "fp8_tensor_dynamic",
            "fp8_online",
        ):
            found.append(f"{p.name}: --linear-backend cutlass on {served} linear layers is ignored")
        if "--enable-eplb" in f and "--enable-expert-parallel" not in f:
            found.append(f"{p.name}: EPLB without expert parallelism (config/parallel.py:601-608)")
        if "--enable-dbo" in f and not f.get("--all2all-backend", "").startswith("deepep"):
            found.append(f"{p.name}: DBO without a DeepEP all2all backend (config/vllm.py:2090-2115)")
        kv_heads = model.layers[0].attention.num_kv_heads
        if dcp > 1 and model.attention_family == "mha" and not (tp > kv_heads and dcp <= tp // kv_heads):
            found.append(f"{p.name}: GQA DCP {dcp} with tp {tp} and {kv_heads} KV heads (config/model.py:1598-1628)")
        if dcp > 1 and f.get("--attention-backend") == "TRITON_ATTN":
            found.append(f"{p.name}: DCP on TRITON_ATTN, which has no DCP (v1/attention/backend.py:349-350)")
    return found


def sglang_problems(launch: Launch, model: ModelSpec, hw: HardwareProfile) -> list[str]:
    servers, found = _servers(launch), []
    cc = compute_capability(hw.gpu.arch)
    # PD bootstrap (disaggregation/common/conn.py:1327-1373) and the decode's draft hand-over (prefill.py:943-950)
    for what, key in (
        ("kv cache dtype", lambda f: f.get("--kv-cache-dtype", "auto")),
        ("speculative algorithm", lambda f: f.get("--speculative-algorithm", "none")),
    ):
        if why := _disagree(servers, key):
            found.append(f"PD {what}: {why}")
    # the KV page size follows the attention backend on SM100 (trtllm_mha: 64, else 1; conn.py:1320-1325)
    if cc in (10.0, 10.3) and model.attention_family == "mha" and (why := _disagree(servers, _attention_backend)):
        found.append(f"PD page size: attention backends {why}")
    has_dense_mlp = any(layer.ffn.kind == "dense" for layer in model.layers)
    for p, f in servers:
        mode = f.get("--disaggregation-mode", "null")
        if "--enable-two-batch-overlap" in f and "--moe-a2a-backend" not in f:
            v4_prefill = model.family == "deepseek_v4" and mode == "prefill" and "--attn-dp-size" in f
            if not v4_prefill:  # operations_strategy.py:86-203, validation_hook.py:756-771
                found.append(f"{p.name}: two-batch overlap without an all-to-all dispatcher")
        if int(f.get("--pp-size", "1")) > 1 and f.get("--speculative-algorithm") and mode != "prefill":
            found.append(f"{p.name}: PP with speculation off a prefill server (validation_hook.py:119-164)")
        backend = f.get("--fp8-gemm-backend")
        served = "fp8_online" if f.get("--quantization") == "fp8" else model.dense_format
        if backend == "triton" and served not in ("fp8_block", "mxfp8"):
            found.append(f"{p.name}: --fp8-gemm-backend triton on {served} layers is never read (fp8.py:1436-1475)")
        if backend == "cutlass" and served != "fp8_block":
            found.append(f"{p.name}: --fp8-gemm-backend cutlass on {served} layers is never read / runs Triton")
        if backend == "cutlass" and served == "fp8_block" and cc not in (12.0, 12.1):
            found.append(f"{p.name}: --fp8-gemm-backend cutlass raises off SM120 (fp8_utils.py:1137-1143)")
        if f.get("--moe-dense-tp-size") == "1" and not (has_dense_mlp and "--attn-dp-size" in f):
            found.append(f"{p.name}: --moe-dense-tp-size 1 without dense MLP layers or DP attention")
        if "--dcp-size" in f and cc == 9.0 and f.get("--attention-backend") not in ("triton", "flashinfer"):
            found.append(f"{p.name}: DCP on Hopper's default fa3 MLA backend (suspected: no DCP merge)")
    return found


def launch_problems(launch: Launch, model: ModelSpec, hw: HardwareProfile) -> list[str]:
    check = vllm_problems if launch.engine == "vllm" else sglang_problems
    return check(launch, model, hw)
