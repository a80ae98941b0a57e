"""A step above the engine's default CUDA-graph sizes replays no graph: it takes the longer of its GPU time and the
host's kernel launches (perf/eager_host.py: the op list's kernels x efficiency.EAGER_HOST_US_PER_LAUNCH). The sizes
are each engine's own (capability/profiles graph_caps): vLLM 0.34's shared ceiling of 512 tokens off sm_100 and its
wide sm_100 defaults, SGLang 0.5.23's decode tiers by GPU memory and its breakable prefill graph."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.inputs import restrict_gpus
from autotune.perf import eager_host
from autotune.perf import efficiency as eff
from autotune.perf.layers import layer_groups
from autotune.perf.opcore import StepInput, context
from autotune.perf.ops import step_fn
from autotune.specs import Batching, Overlap, PhasePlan, Speculative

BIG = Batching(max_running=1024, chunked_prefill_tokens=8192)


def caps(engine: str, arch: str, memory_gib: float, model: str, **phase) -> tuple[int, int]:
    gpus = tuple(range(phase.get("tp", 1) * phase.get("pp", 1)))
    plan = PhasePlan(gpus=gpus, batching=phase.pop("batching", BIG), **phase)
    return profile(engine).graph_caps(arch, memory_gib, load_model(model), plan, 1)


def test_vllm_graphs_end_at_512_tokens_off_sm100_and_hold_whole_speculative_requests():
    assert caps("vllm", "sm_90", 141, "llama-3.1-70b") == (512, 512)
    assert caps("vllm", "sm_120", 96, "llama-3.1-70b", batching=Batching(64, 8192)) == (64, 128)  # 64 x 1 x 2
    plan = PhasePlan(gpus=(0,), batching=BIG)
    assert profile("vllm").graph_caps("sm_120", 96, load_model("deepseek-v4.1-flash"), plan, 6) == (85, 512)


def test_vllm_wide_defaults_on_sm100():
    assert caps("vllm", "sm_100", 180, "llama-3.1-70b") == (1024, 8192)
    assert caps("vllm", "sm_100", 180, "llama-3.1-70b", batching=Batching(1024, 2048)) == (1024, 2048)


def test_sglang_decode_tiers_by_memory_and_prefill_graph_rules():
    assert caps("sglang", "sm_90", 141, "llama-3.1-70b", tp=8) == (512, 8192)
    assert caps("sglang", "sm_90", 141, "llama-3.1-70b", tp=2) == (256, 8192)
    assert caps("sglang", "sm_89", 48, "llama-3.1-70b", tp=2) == (32, 8192)
    mla = Batching(1024, 16384)
    assert caps("sglang", "sm_90", 96, "deepseek-v3", tp=8, batching=mla) == (512, 8192)  # MLA: min(8192, chunk)
    assert caps("sglang", "sm_90", 96, "llama-3.1-70b", tp=8, batching=mla) == (512, 16384)
    assert caps("sglang", "sm_90", 96, "deepseek-v4-flash", tp=8)[1] == 0
    # V4.1 loads as DeepseekV4ForCausalLM (srt/configs/deepseek_v41.py:38-39): the same rule turns its prefill graph off
    assert caps("sglang", "sm_90", 96, "deepseek-v4.1-flash", tp=8)[1] == 0
    assert caps("sglang", "sm_90", 96, "llama-3.1-70b", tp=4, pp=2)[1] == 0
    assert caps("sglang", "sm_90", 96, "llama-3.1-70b", tp=8, overlap=Overlap(two_batch=True))[1] == 0


def _step_ms(model: str, preset: str, x: StepInput, caps=None, **phase) -> float:
    hw = restrict_gpus(dataclasses.replace(load_preset(preset), measured=None), 8)
    plan = PhasePlan(gpus=tuple(range(8)), batching=BIG, **phase)
    return step_fn(load_model(model), plan, "vllm", hw, plan.gpus, "mixed", caps=caps)(x).step_ms


def _host_ms(model: str, preset: str, x: StepInput, **phase) -> float:
    """The host's launches of the step's layers (eager_host, counted afresh), ms."""
    hw = restrict_gpus(dataclasses.replace(load_preset(preset), measured=None), 8)
    plan = PhasePlan(gpus=tuple(range(8)), batching=BIG, **phase)
    m = load_model(model)
    return eager_host.eager_host_s(context(m, plan, "vllm", hw, plan.gpus), layer_groups(m), x) * 1e3


def test_a_prompt_chunk_above_the_graph_size_is_host_bound_on_hopper():
    """Qwen3.5-35B-A3B at TP8 on H200: a 1,024-token chunk's GPU time is below 40 layers of host launches."""
    m = "qwen3.5-35b-a3b"
    chunk = StepInput(prefill_tokens=1024.0, prefill_ctx=512.0)
    host_ms = _host_ms(m, "h200-x8", chunk, tp=8)
    eager = _step_ms(m, "h200-x8", chunk, tp=8)
    graphed = _step_ms(m, "h200-x8", chunk, caps=(float("inf"), float("inf")), tp=8)
    assert graphed < host_ms <= eager
    below = StepInput(prefill_tokens=500.0, prefill_ctx=250.0)
    assert _step_ms(m, "h200-x8", below, tp=8) < host_ms  # under 512 tokens: the piecewise graph


def test_a_gpu_bound_step_without_a_graph_costs_its_gpu_time():
    m = "llama-3.1-70b"
    big = StepInput(prefill_tokens=8192.0, prefill_ctx=4096.0)
    eager = _step_ms(m, "h200-x8", big, caps=(0.0, 0.0), tp=8)
    layers = load_model(m).num_layers
    assert eager > _host_ms(m, "h200-x8", big, tp=8) * 2  # far above the host time: the GPU sets it
    graphed = _step_ms(m, "h200-x8", big, caps=(float("inf"), float("inf")), tp=8)
    launches_ms = eff.PREFILL_LAUNCH_US_PER_LAYER * layers / 1e3
    assert eager == pytest.approx(graphed - launches_ms, rel=1e-9)


def test_speculative_decode_batches_above_the_request_cap_leave_the_graph():
    """DSpark with 5 draft tokens: vLLM's graphs hold 512 // 6 = 85 requests a rank on sm_120, and each DP rank
    batches its own requests; a batch one request above them pays its host launches."""
    hw = load_preset("rtx-pro-6000-x8")
    m = load_model("deepseek-v4.1-flash")
    spec = Speculative(method="dspark", draft_tokens=5)
    plan = PhasePlan(gpus=tuple(range(4)), dp=2, tp=2, dp_attention=True, batching=BIG, speculative=spec)
    assert eff.graph_caps(m, plan, "vllm", hw, 6) == (170, 1024)
    verify = StepInput(decode_seqs=2.0, decode_ctx=64.0, decode_width=6.0)  # each request's 6 verified tokens
    host_ms = _host_ms("deepseek-v4.1-flash", "rtx-pro-6000-x8", verify, tp=8, speculative=spec)

    def at(seqs: float, caps) -> float:
        return _step_ms("deepseek-v4.1-flash", "rtx-pro-6000-x8", StepInput(decode_seqs=seqs, decode_ctx=64.0),
                        caps=caps, tp=8, speculative=spec)  # fmt: skip

    assert at(2.0, (1.0, 1.0)) >= host_ms > at(2.0, (2.0, 2.0))
