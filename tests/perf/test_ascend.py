"""The Ascend part of the model (perf/ascend.py): HCCL collectives on HCCS and PCIe, and each vllm-ascend platform
option moving the prediction the way its mechanism says."""

import dataclasses

import pytest

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import ascend
from autotune.perf.predict import predict
from autotune.specs import PhasePlan, Plan, Workload

A2, DUO = load_preset("atlas-800i-a2"), load_preset("atlas-300i-duo-x4")
WORKLOAD = Workload(isl=2048, osl=256)


def test_hccl_mesh_all_reduce_is_two_passes_of_the_shares_over_the_aggregate_hccs_bandwidth():
    nbytes = 256 << 20
    t = ascend.hccl_s("allreduce", nbytes, 8, True, 196.0, {})
    expected = (20.0 + 2 * 1.0) * 1e-6 + 2 * 7 / 8 * nbytes / 196e9
    assert t == pytest.approx(expected)
    assert ascend.hccl_s("allgather", nbytes, 8, True, 196.0, {}) < t
    assert ascend.hccl_s("allreduce", nbytes, 8, False, 31.5, {}) > 5 * t  # a PCIe ring of 8


def test_aiv_expansion_cuts_the_launch_latency_of_small_collectives():
    small = {name: ascend.hccl_s("allreduce", 64 << 10, 8, True, 196.0, p) for name, p in
             (("default", {}), ("aiv", {"hccl_op_expansion": "AIV"}))}  # fmt: skip
    assert small["aiv"] < 0.7 * small["default"]


def plan(model_name, hw, tp=4, dp=2, **platform) -> Plan:
    phase = PhasePlan(gpus=tuple(range(8)), tp=tp, dp=dp, dp_attention=dp > 1, platform=platform)
    return Plan("vllm-ascend", "aggregated", {"both": phase})


def tok_s(p: Plan, model, hw) -> float:
    pred = predict(p, load_model(model), hw, WORKLOAD)
    assert pred.feasible, pred.reason
    return pred.total_tok_s


@pytest.mark.parametrize(
    ("option", "value", "faster"),
    [
        ("graph_mode", "FULL_DECODE_ONLY", True),  # no eager attention launches between graph pieces
        ("flashcomm1", "on", True),  # norms on 1/tp of the tokens
        ("hccl_op_expansion", "AIV", True),
        ("weight_nz", "off", False),  # the W8A8 weights leave the NZ layout
    ],
)
def test_each_platform_option_moves_the_prediction(option, value, faster):
    base = tok_s(plan("qwen3-235b-a22b-w8a8", A2), "qwen3-235b-a22b-w8a8", A2)
    changed = tok_s(plan("qwen3-235b-a22b-w8a8", A2, **{option: value}), "qwen3-235b-a22b-w8a8", A2)
    assert (changed > base) == faster and changed != base


def test_multistream_shared_experts_hide_time_only_where_there_are_shared_experts():
    base = tok_s(plan("deepseek-v4-flash", A2), "deepseek-v4-flash", A2)
    overlapped = tok_s(plan("deepseek-v4-flash", A2, multistream_shared_expert="on"), "deepseek-v4-flash", A2)
    assert overlapped > base


def test_hccs_box_beats_the_pcie_box_on_collective_bound_tp8():
    p = plan("llama-3.1-70b", A2, tp=8, dp=1)
    slow = dataclasses.replace(A2, links=DUO.links, pcie_switch_uplink_gbs=DUO.pcie_switch_uplink_gbs)
    assert tok_s(p, "llama-3.1-70b", A2) > tok_s(p, "llama-3.1-70b", slow)
