"""batching.cuda_graph_max_bs: the largest decode batch per engine rank captured in a CUDA graph. It moves the
engines' graph caps (capability/profiles graph_caps: vLLM's max_decode_cudagraph_capture_requests, SGLang's
--cuda-graph-max-bs-decode) and the memory they cost (SGLang's graph reserve of its KV budget, vLLM's decode graphs
wider than its prefill graphs)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.capability.profiles import profile
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.inputs import restrict_gpus
from autotune.perf import eager_host
from autotune.perf.layers import layer_groups
from autotune.perf.memory import GIB, memory_fit
from autotune.perf.opcore import StepInput, context
from autotune.perf.ops import step_fn
from autotune.specs import Batching, PhasePlan, Speculative

V41 = "deepseek-v4.1-flash"
DSPARK = Speculative(method="dspark", draft_tokens=5)


def _h200():
    return restrict_gpus(dataclasses.replace(load_preset("h200-x8"), measured=None), 8)


def _dspark(graph_bs: int | None) -> PhasePlan:
    batching = Batching(max_running=1024, chunked_prefill_tokens=8192, cuda_graph_max_bs=graph_bs)
    return PhasePlan(gpus=tuple(range(8)), tp=8, batching=batching, speculative=DSPARK)


def test_vllm_dspark_decode_above_85_requests_is_host_bound_by_default_and_graphed_at_256():
    """vLLM on H200 (sm_90), DSpark q = 6: the default graphs hold 512 // 6 = 85 requests a rank, so a 100-request
    decode step replays none and pays the host's launches; max_decode_cudagraph_capture_requests 256 graphs it.
    (At 200 requests a rank V4.1's GPU step at TP8 is itself longer than the host's launches: no graph helps.)"""
    m, hw = load_model(V41), _h200()
    assert profile("vllm").graph_caps("sm_90", 141, m, _dspark(None), 6) == (85, 512)
    assert profile("vllm").graph_caps("sm_90", 141, m, _dspark(256), 6) == (256, 512)  # mixed steps: unchanged
    x = StepInput(decode_seqs=100.0, decode_ctx=1024.0)

    def step_ms(plan: PhasePlan, caps=None) -> float:
        return step_fn(m, plan, "vllm", hw, plan.gpus, "decode", caps=caps)(x).step_ms

    plan = _dspark(None)
    c = context(m, plan, "vllm", hw, plan.gpus)  # the host's launches of the step's layers (eager_host), 6 wide
    host_ms = eager_host.eager_host_s(c, layer_groups(m), x._replace(decode_width=6.0)) * 1e3
    graphed = step_ms(_dspark(None), caps=(float("inf"), float("inf")))
    assert graphed < host_ms <= step_ms(_dspark(None))
    assert step_ms(_dspark(256)) == pytest.approx(graphed, rel=1e-9)


def test_vllm_decode_graphs_stop_at_max_num_seqs_and_the_decode_token_budget():
    m = load_model(V41)
    plan = dataclasses.replace(_dspark(1024), batching=Batching(300, 8192, cuda_graph_max_bs=1024))
    assert profile("vllm").graph_caps("sm_90", 141, m, plan, 6)[0] == 300  # within max_num_seqs
    plan = dataclasses.replace(_dspark(1024), batching=Batching(1024, 2048, cuda_graph_max_bs=1024))
    assert profile("vllm").graph_caps("sm_90", 141, m, plan, 6)[0] == 2048 // 6  # max_num_batched_tokens
    plan = dataclasses.replace(_dspark(1024), batching=Batching(2048, 16384, cuda_graph_max_bs=2048))
    assert profile("vllm").graph_caps("sm_100", 180, m, plan, 6)[0] == 8192 // 6  # sm_100's 8192-token budget


def test_sglang_explicit_max_bs_replaces_the_memory_tier():
    m = load_model("llama-3.1-70b")
    small = PhasePlan(gpus=(0, 1), tp=2, batching=Batching(1024, 8192))
    assert profile("sglang").graph_caps("sm_90", 80, m, small, 1)[0] == 256  # H100, tp < 4
    raised = dataclasses.replace(small, batching=Batching(1024, 8192, cuda_graph_max_bs=768))
    assert profile("sglang").graph_caps("sm_90", 80, m, raised, 1)[0] == 768


def _sglang_kv_gb(model: str, graph_bs: int | None, dp: int = 1, tp: int = 8) -> float:
    batching = Batching(max_running=1024, chunked_prefill_tokens=8192, cuda_graph_max_bs=graph_bs)
    plan = PhasePlan(gpus=tuple(range(tp * dp)), tp=tp, dp=dp, dp_attention=dp > 1, batching=batching)
    return memory_fit(load_model(model), plan, _h200(), 2048, "sglang").kv_gb


def test_sglang_kv_pool_shrinks_by_its_graph_reserve_arithmetic():
    """srt/arg_groups/memory_hook.py:355-380: 2 MiB of reserve per request of the decode max_bs, and with DP
    attention 3 MiB more per request and DP rank, 1.5 MiB more again above max_bs 300. The reserve already sits
    above SGLang's 10 GiB floor at an 8192-token chunk, so every MiB comes off the KV pool."""
    mib = 2**20 / 1e9
    # H200 (141 GiB) at --tp-size 8: the default tier is 512, the value the plan's null resolves to
    assert _sglang_kv_gb("deepseek-v3", None) == pytest.approx(_sglang_kv_gb("deepseek-v3", 512), abs=1e-9)
    drop = _sglang_kv_gb("deepseek-v3", 512) - _sglang_kv_gb("deepseek-v3", 1024)
    assert drop == pytest.approx(512 * 2 * mib, rel=1e-9)
    drop_dp = _sglang_kv_gb("deepseek-v3", 256, dp=4, tp=2) - _sglang_kv_gb("deepseek-v3", 512, dp=4, tp=2)
    # 256 -> 512 x (2 + 3 x 4) MiB, plus 512 x 1.5 x 4 MiB above 300
    assert drop_dp == pytest.approx((256 * (2 + 3 * 4) + 512 * 1.5 * 4) * mib, rel=1e-9)


def test_sglang_reserve_reads_the_resolved_default_tier_not_a_fixed_512():
    """At --tp-size 2 on H200 SGLang's default decode max_bs is 256 (memory_hook.py:155-170): the graph reserve is
    the same as with an explicit 256, 512 MiB less than at 512."""
    assert _sglang_kv_gb("llama-3.1-70b", None, tp=2) == pytest.approx(_sglang_kv_gb("llama-3.1-70b", 256, tp=2))
    assert _sglang_kv_gb("llama-3.1-70b", None, tp=2) > _sglang_kv_gb("llama-3.1-70b", 512, tp=2)


def test_vllm_charges_decode_graphs_wider_than_its_prefill_graphs():
    """Decode graphs wider than the widest prefill graph take memory from the KV cache
    (vllm/config/compilation.py:791-799); within it (the default sizes) nothing moves."""
    m, hw = load_model(V41), _h200()
    default = memory_fit(m, _dspark(None), hw, 2048, "vllm")
    assert memory_fit(m, _dspark(64), hw, 2048, "vllm").kv_gb == pytest.approx(default.kv_gb)  # 384 <= 512 tokens
    wide = memory_fit(m, _dspark(256), hw, 2048, "vllm")
    assert wide.activations_gb > default.activations_gb and wide.kv_gb < default.kv_gb
    assert default.kv_gb - wide.kv_gb < 1 * GIB / 1e9  # (1536 - 512) tokens of activations: well under a GiB
