"""A step without CUDA graph is host-bound by its kernel launches (perf/eager_host.py): launches counted from the op
list times efficiency.EAGER_HOST_US_PER_LAUNCH, so a layer that launches fewer kernels pays less host time."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from autotune.catalog import load_preset
from autotune.catalog.models import load_model, model_from_config
from autotune.inputs import restrict_gpus
from autotune.perf import eager_host
from autotune.perf import efficiency as eff
from autotune.perf.layers import layer_groups
from autotune.perf.opcore import Op, StepInput, _collective, context
from autotune.perf.oplist import attention_ops, dcp_ops, ffn_ops, layer_input, step_tokens
from autotune.perf.ops import step_fn
from autotune.specs import Overlap, PhasePlan

FIXTURES = Path(__file__).parents[1] / "fixtures"
GRAPHLESS = (0.0, 0.0)  # step_fn's caps: every step without a graph


def _box(preset: str, gpus: int):
    return restrict_gpus(dataclasses.replace(load_preset(preset), measured=None), gpus)


def _qwen3_14b(tmp_path):
    config = json.loads((FIXTURES / "qwen3-dense" / "qwen3-14b" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if not k.startswith("_")}))
    return model_from_config(path)


def _graphless_ms_per_layer(m, preset: str, tp: int, x: StepInput) -> float:
    plan = PhasePlan(gpus=tuple(range(tp)), tp=tp)
    return step_fn(m, plan, "vllm", _box(preset, tp), plan.gpus, "decode", caps=GRAPHLESS)(x).step_ms / m.num_layers


def test_a_dense_tp1_layer_pays_less_eager_host_time_than_a_moe_tp4_layer(tmp_path):
    """vllm#20469's dense Qwen3-14B on one GPU launches no router, top-k, permutes, grouped GEMM or all-reduces:
    fewer kernels a layer than vllm#45709's Qwen3-30B-A3B at TP4, so less host time a layer (both steps are
    host-bound: their GPU time is well under it)."""
    dense = _graphless_ms_per_layer(_qwen3_14b(tmp_path), "a100-sxm-x8", 1, StepInput(1.0, 16100.0))
    moe_model = load_model(str(FIXTURES / "qwen3-30b-a3b" / "config.json"))
    moe = _graphless_ms_per_layer(moe_model, "rtx-4090-x8", 4, StepInput(8.0, 4250.0))
    assert dense < 0.85 * moe
    # each is its launches x the per-launch cost (and the engine's scheduler time, the same small term in both); the
    # layers' 12 and 16 include FA2's packed-GQA call copying its output back (perf/fa2_decode.py; A100 and 4090: FA2)
    # and its split kernel's combine (tiles.ATTENTION_DECODE_LAUNCHES)
    for ms, launches in ((dense, 12.0), (moe, 16.0)):
        assert ms == pytest.approx(launches * eff.EAGER_HOST_US_PER_LAUNCH / 1e3, rel=0.05)


def test_wave_terms_and_a_one_gpu_collective_launch_nothing():
    gemm = Op("gemm", "bf16", "m<=16", 1.0, 1.0, 1.0, 2.0, 1.0, 2.0, "tp")
    waves = Op("gemm", "bf16", "wave", 1.0, 0.0, 0.0, 0.0, 0.0, 7.5, "tp (tile waves)")
    paged = Op("attention", "bf16", "paged_wave", 1.0, 0.0, 0.0, 0.0, 0.0, 3.0, "kernels.attention (CTA waves)")
    alone, pair = _collective("allreduce", (0,), 1e6, "tp"), _collective("allreduce", (0, 1), 1e6, "tp")
    assert eager_host.op_launches([gemm, waves, paged, alone, pair]) == 3.0


STEPS = (
    StepInput(decode_seqs=1.0, decode_ctx=100.0),
    StepInput(decode_seqs=600.0, decode_ctx=4000.0),
    StepInput(prefill_tokens=64.0),
    StepInput(prefill_tokens=8192.0, prefill_ctx=8192.0),
    StepInput(decode_seqs=30.0, decode_ctx=2000.0, prefill_tokens=2048.0, prefill_ctx=1024.0),
    StepInput(decode_seqs=4.0, decode_ctx=500.0, prefill_tokens=16.0, prefill_ctx=3000.0),
    StepInput(decode_seqs=8.0, decode_ctx=900.0, decode_width=4.0),
)
CASES = (
    ("deepseek-v3", "h200-x8", "sglang", {"tp": 8}),
    ("deepseek-v3", "h200-x8", "vllm", {"tp": 4, "dp": 2, "dp_attention": True}),
    ("qwen3.5-35b-a3b", "h200-x8", "vllm", {"tp": 8}),
    ("llama-3.1-70b", "h200-x8", "sglang", {"tp": 4, "pp": 2}),
    ("deepseek-v4.1-flash", "rtx-pro-6000-x8", "vllm", {"tp": 2, "dp": 4, "dp_attention": True}),
    ("glm-5.3-flash", "rtx-pro-6000-x8", "sglang", {"tp": 8}),
    # vLLM's FA2 decode (A100: Context.fa2_decode): a swapped call's launches follow the decode rows and context
    ("llama-3.1-70b", "a100-sxm-x8", "vllm", {"tp": 4}),
)


@pytest.mark.parametrize("name, preset, engine, layout", CASES)
def test_the_remembered_launches_are_the_op_lists_at_every_input(name, preset, engine, layout):
    """stage_launches remembers a stage's count by the step's launch_key; whichever input asks first, each input's
    count is its own op list's (a Context no step_fn made counts afresh)."""
    m = load_model(name)
    ranks = layout.get("tp", 1) * layout.get("dp", 1)
    plan = PhasePlan(gpus=tuple(range(ranks * layout.get("pp", 1))), **layout)
    hw, groups = _box(preset, 8), layer_groups(m)
    fresh = context(m, plan, engine, hw, plan.gpus[:ranks])
    for order in (STEPS, STEPS[::-1]):
        eager_host._LAUNCHES.clear()
        remembered = context(m, plan, engine, hw, plan.gpus[:ranks])
        remembered.memo_keys["step"] = -1
        for x in order:
            assert eager_host.stage_launches(remembered, groups, x) == eager_host.stage_launches(fresh, groups, x)


def test_two_batch_overlap_launches_every_layer_once_per_micro_batch():
    """Under two-batch overlap each micro-batch runs every layer's ops (SGLang's two stage executors, vLLM's DBO
    threads): the host launches the layers' kernels twice."""
    m, hw = load_model("deepseek-v3"), _box("h200-x8", 8)
    x = StepInput(prefill_tokens=4096.0)
    launches = {}
    for two_batch in (False, True):
        # EP 8: no shared-expert fusion either way (TBO turns SGLang's off: test_sglang_shared_fusion.py)
        plan = PhasePlan(gpus=tuple(range(8)), tp=8, ep=8, overlap=Overlap(two_batch=two_batch))
        c = context(m, plan, "sglang", hw, plan.gpus, graph_tokens=0.0)  # an eager step (no prefill graph)
        launches[two_batch] = eager_host.stage_launches(c, layer_groups(m), x)
    assert launches[True] == pytest.approx(2 * launches[False])


def _uncached(c, groups, x) -> float:
    """stage_launches without its memos: every layer kind's op lists at the layer's input, counted."""
    launches = 0.0
    for layer, count in groups:
        part = layer_input(layer, x)
        if step_tokens(part) > 0:
            half = eager_host.op_launches(attention_ops(c, layer.attention, part))
            half += eager_host.op_launches(dcp_ops(c, layer.attention, part))
            launches += count * half + count * eager_host.op_launches(ffn_ops(c, layer.ffn, step_tokens(part)))
    return launches * eager_host.micro_batches(c) / c.phase.pp


@pytest.mark.parametrize(
    "name, preset",
    (
        ("deepseek-v4.1-flash", "rtx-pro-6000-x8"),
        ("qwen3-235b-a22b", "h200-x8"),
        ("deepseek-v3", "h200-x8"),
        ("qwen3.5-35b-a3b", "rtx-pro-6000-x8"),  # vLLM's FA2 decode (sm_120) and GDN layers
    ),
)
def test_the_launches_remembered_across_plans_are_each_plans_own(name, preset, monkeypatch):
    """A search's plans share the remembered halves' launches (_half_launches: the attention prefix, the FFN's
    launch prefix): over sampled plans, every graphless step's count equals its own op lists', counted uncached."""
    from autotune.perf import predict
    from autotune.search.random_plans import random_plans
    from autotune.specs import Workload

    m, hw, w = load_model(name), load_preset(preset), Workload()
    seen = []
    count = eager_host.eager_host_s

    def spy(c, groups, x):
        seen.append((c, groups, x))
        return count(c, groups, x)

    monkeypatch.setattr(eager_host, "eager_host_s", spy)
    eager_host._LAUNCHES.clear()
    eager_host._HALF_LAUNCHES.clear()
    for plan in random_plans(m, hw, w, 60, seed=1):
        predict(plan, m, hw, w)
    assert len(seen) > 10
    for c, groups, x in seen:
        assert eager_host.stage_launches(c, groups, x) == _uncached(c, groups, x)
