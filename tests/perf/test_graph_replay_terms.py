"""The per-layer terms a graph-replayed step adds to its kernels' GPU time (perf/efficiency.py): the replay gap of a
whole decode graph (DECODE_LAUNCH_US_PER_LAYER, a prior read against a node-level trace) and, for a prompt-carrying
step, what a piecewise graph's eager attention calls and piece replays add over a whole graph
(PIECEWISE_EXTRA_US_PER_LAYER, vllm#20059). A step above the graph sizes replaces both with the eager host's excess
over its GPU time (perf/eager_host.py): nothing is counted twice."""

from __future__ import annotations

import dataclasses
from importlib.resources import files

import pytest
import yaml

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.inputs import restrict_gpus
from autotune.perf import efficiency as eff
from autotune.perf.opcore import StepInput
from autotune.perf.ops import step_fn
from autotune.specs import Batching, PhasePlan

BIG = Batching(max_running=1024, chunked_prefill_tokens=8192)
GRAPHED, GRAPHLESS = (float("inf"), float("inf")), (0.0, 0.0)


def _entry(entry_id: str) -> dict:
    entries = yaml.safe_load((files("autotune.catalog") / "calibration.yaml").read_text())["entries"]
    return next(e for e in entries if e["id"] == entry_id)


def test_the_piecewise_extra_is_vllm20059s_gap_per_layer():
    """Median ITL at 1 QPS, piecewise graphs against a full decode graph over the same piecewise split, over the
    model's 28 layers (old: 30 us a layer, no source)."""
    m = _entry("piecewise-graph-itl-vllm20059")["metrics"]
    piecewise, _, full = m["itl_median_ms"]
    assert pytest.approx((piecewise - full) / 28 * 1e3, rel=0.02) == eff.PIECEWISE_EXTRA_US_PER_LAYER
    piecewise, _, full = m["tpot_median_ms"]
    assert pytest.approx((piecewise - full) / 28 * 1e3, rel=0.1) == eff.PIECEWISE_EXTRA_US_PER_LAYER
    assert eff.PREFILL_LAUNCH_US_PER_LAYER == eff.DECODE_LAUNCH_US_PER_LAYER + eff.PIECEWISE_EXTRA_US_PER_LAYER


def test_the_replay_gap_prior_is_the_order_of_the_node_trace():
    m = _entry("graph-replay-gap-localai-nsys")["metrics"]
    assert pytest.approx(m["inter_kernel_idle_ms_per_step"] / 64 * 1e3, rel=0.2) == eff.DECODE_LAUNCH_US_PER_LAYER


def _step_ms(x: StepInput, caps) -> float:
    hw = restrict_gpus(dataclasses.replace(load_preset("h200-x8"), measured=None), 8)
    plan = PhasePlan(gpus=tuple(range(8)), batching=BIG, tp=8)
    return step_fn(load_model("llama-3.1-70b"), plan, "vllm", hw, plan.gpus, "mixed", caps=caps)(x).step_ms


@pytest.mark.parametrize(
    "x, us_per_layer",
    [
        (StepInput(prefill_tokens=8192.0, prefill_ctx=4096.0), eff.DECODE_LAUNCH_US_PER_LAYER + 15.0),
        (StepInput(decode_seqs=1024.0, decode_ctx=8192.0), eff.DECODE_LAUNCH_US_PER_LAYER),
    ],
)
def test_a_graphed_step_pays_its_per_layer_terms_where_a_gpu_bound_graphless_one_pays_none(x, us_per_layer):
    """A GPU-bound step (its host launches hidden behind the GPU) costs its GPU time without a graph, and that plus
    the replay gap (decode) or the gap and the piecewise extra (a prompt chunk) per layer with one."""
    layers = load_model("llama-3.1-70b").num_layers
    graphed, graphless = _step_ms(x, GRAPHED), _step_ms(x, GRAPHLESS)
    assert graphed - graphless == pytest.approx(layers * us_per_layer * 1e-3, rel=1e-6)
