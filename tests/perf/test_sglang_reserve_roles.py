"""SGLang 0.5.23's reserve outside mem_fraction_static follows the server's role (srt/arg_groups/memory_hook.py
278-413): a prefill server captures no decode graphs and reserves nothing for them (its decode backend is disabled:
cuda_graph_hook.py:557-566), a decode server no prefill graphs; the breakable prefill graphs reserve 8 MiB a capture
size (1.5 GiB with an MLA backend); DeepEP adds 2 GiB above the floor where decode graphs capture its buffers; a
decode server sizes its activations by max_running x verified tokens, not by the chunk."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.capability.profiles.sglang_0_5_23 import prefill_graph_sizes
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.inputs import restrict_gpus
from autotune.perf.memory import memory_fit
from autotune.specs import Batching, Comm, PhasePlan, Speculative


def _h200():
    return restrict_gpus(dataclasses.replace(load_preset("h200-x8"), measured=None), 8)


def _kv_gb(model: str, plan: PhasePlan, role: str) -> float:
    return memory_fit(load_model(model), plan, _h200(), 2048, "sglang", role).kv_gb


def _dp8(graph_bs: int, **kw) -> PhasePlan:
    batching = Batching(max_running=1024, chunked_prefill_tokens=8192, cuda_graph_max_bs=graph_bs)
    return PhasePlan(gpus=tuple(range(8)), tp=1, dp=8, ep=8, dp_attention=True, batching=batching, **kw)


def test_prefill_graph_sizes_follow_sglangs_capture_list():
    sizes = prefill_graph_sizes(8192)  # 4..32 by 4, 48..256 by 16, 288..512 by 32, 576..1024 by 64, 1280..4096 by 256,
    assert len(sizes) == 8 + 14 + 8 + 8 + 12 + 8 and sizes[-1] == 8192 and sizes[:3] == (4, 8, 12)  # 4608.. by 512
    assert prefill_graph_sizes(4096)[-1] == 4096 and len(prefill_graph_sizes(4096)) == 50


def test_a_prefill_server_keeps_the_decode_graph_reserve_for_kv():
    """DP8 at decode max_bs 512: 2 x 512 + 512 x 8 x (3 + 1.5) MiB = 19,456 MiB of graph reserve on a server that
    decodes, none on a prefill server (the breakable prefill graph reserve, 1.5 GiB for MLA, is on both)."""
    plan = _dp8(512)
    both, prefill = _kv_gb("deepseek-v3", plan, "both"), _kv_gb("deepseek-v3", plan, "prefill")
    assert prefill - both == pytest.approx(19456 * 2**20 / 1e9, rel=1e-6)


def test_a_decode_server_drops_the_prefill_graph_reserve_and_sizes_activations_by_its_batch():
    """Llama-3.1-70B (no MLA) TP8, chunk 8192, max_running 256: the prefill graphs' 58 sizes x 8 MiB go on a decode
    server, and its activation tokens are max(256 x 1, 2048) = 2048 instead of the chunk's 8192 (1.5 MiB each).
    Both sit above the 10 GiB floor (512 + 12,288 + graph MiB), so each MiB comes back to the KV pool."""
    batching = Batching(max_running=256, chunked_prefill_tokens=8192, cuda_graph_max_bs=256)
    plan = PhasePlan(gpus=tuple(range(8)), tp=8, batching=batching)
    both, decode = _kv_gb("llama-3.1-70b", plan, "both"), _kv_gb("llama-3.1-70b", plan, "decode")
    working_both = 512 + 1.5 * 8192 + 2 * 256 + 58 * 8
    working_decode = max(512 + 1.5 * 2048 + 2 * 256, 10 * 1024 - 8 / 8 * 1024)  # the floor binds here
    assert decode - both == pytest.approx((working_both - working_decode) * 2**20 / 1e9, rel=1e-6)


def test_deepep_buffers_cost_2_gib_on_servers_that_decode():
    """DeepEP's KV cost by role, less its weight effect (shared experts whole on every rank: the same on each role):
    2 GiB where decode graphs capture its buffers, 1 GiB where breakable prefill graphs run with it."""
    plain, deepep = _dp8(128), _dp8(128, comm=Comm(all2all="deepep"))
    lost = {
        r: _kv_gb("deepseek-v3", plain, r) - _kv_gb("deepseek-v3", deepep, r) for r in ("both", "decode", "prefill")
    }
    assert lost["both"] - lost["prefill"] == pytest.approx(2048 * 2**20 / 1e9, rel=1e-6)
    assert lost["decode"] - lost["prefill"] == pytest.approx(1024 * 2**20 / 1e9, rel=1e-6)


def test_a_decode_servers_activation_tokens_count_the_verified_tokens():
    """MTP 3 drafts, max_running 4096: a decode server's activations are 4096 x 4 tokens (1.5 MiB each) against the
    chunk's 8192 on a server that prefills, which also reserves the MLA prefill graphs' 1.5 GiB."""
    spec = Speculative(method="mtp", draft_tokens=3)
    batching = Batching(max_running=4096, chunked_prefill_tokens=8192, cuda_graph_max_bs=128)
    plan = PhasePlan(gpus=tuple(range(8)), tp=8, batching=batching, speculative=spec)
    gap = _kv_gb("deepseek-v3", plan, "both") - _kv_gb("deepseek-v3", plan, "decode")
    assert gap == pytest.approx((1.5 * (4096 * 4 - 8192) - 1536) * 2**20 / 1e9, rel=1e-6)
