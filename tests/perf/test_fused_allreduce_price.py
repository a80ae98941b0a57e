"""The fused all-reduce + residual add + RMSNorm is priced as the kernel the engine calls (perf/comm_fused.py):
FlashInfer's trtllm or mnnvl kernel (engine profile fused_allreduce_path, capability/flashinfer_comm.py) with its own
one-shot / two-shot split and the norm's work in its epilogue, not the engine's standalone all-reduce with the norm
gone (arn24's price)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.capability.flashinfer_comm import MNNVL_ONE_SHOT_MAX_COMM_BYTES, TRTLLM_ONE_SHOT_MAX_COMM_MIB
from autotune.capability.profiles.sglang_0_5_23 import V2_ONE_SHOT_MAX_BYTES
from autotune.catalog import load_model, load_preset
from autotune.perf import comm
from autotune.perf.comm_fused import fused_allreduce_norm_fn
from autotune.perf.comm_rates import FUSED_NORM_EPILOGUE_US
from autotune.perf.ops import StepInput, step_cost
from autotune.perf.rates import FUSED_ADD_NORM_MIN_US
from autotune.specs import Comm, PhasePlan

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")  # hidden 7168: 14 KiB a row in bf16
EIGHT = tuple(range(8))
MIB, KIB = 1 << 20, 1 << 10
ROW = DSV3.hidden_size * 2


def fused(engine: str, nbytes: float, hw=H200, group=EIGHT) -> tuple[str, float, bool]:
    return fused_allreduce_norm_fn(hw, group, Comm(), 64 * ROW, engine)(nbytes)


def step_ms(engine: str, rows: int, fusion: bool) -> float:
    p = PhasePlan(gpus=EIGHT, tp=8, fusion={"allreduce_rmsnorm": fusion})
    return step_cost(DSV3, p, engine, H200, EIGHT, StepInput(decode_seqs=rows, decode_ctx=1500), "t").step_ms


def test_sglang_on_sm90_runs_the_trtllm_kernel_one_shot_to_flashinfers_size():
    """SGLang on sm_90 calls FlashInfer's trtllm backend without use_oneshot: one-shot while 2 x world copies of the
    message fit 42 MiB at 8 ranks (trtllm_ar.py _use_oneshot_heuristics), two exchanges above -- with less wire, so
    the first two-shot size costs less than the last one-shot one."""
    limit = TRTLLM_ONE_SHOT_MAX_COMM_MIB[8] * MIB / 16
    name, at, norm_kernel = fused("sglang", limit)
    assert name == "fused_trtllm" and not norm_kernel
    assert fused("sglang", limit + 16)[1] < at


def test_sglang_fused_one_shot_costs_more_than_its_two_shot_custom_all_reduce_at_a_mib():
    """At 1 MiB on 8 H200s SGLang's own all-reduce runs two-shot (above its 128 KiB one-shot limit,
    V2_ONE_SHOT_MAX_BYTES) while the fused kernel stays one-shot, every rank receiving 7 MiB: the fused op costs
    more than the standalone all-reduce, which arn24 charged for it."""
    assert V2_ONE_SHOT_MAX_BYTES["sm_90"][8] < MIB
    standalone = comm.all_reduce_s(H200, EIGHT, MIB, Comm(), engine="sglang")
    assert fused("sglang", MIB)[1] > 1.5 * standalone


def test_small_fused_message_costs_its_all_reduce_plus_the_norms_epilogue_only():
    """Below both one-shot limits the fused kernel is the same one-shot exchange as the standalone kernel, plus the
    norm's epilogue: its fixed time (comm_rates.FUSED_NORM_EPILOGUE_US) and 3 message sizes of memory traffic, less
    than the norm kernel it replaces (rates.FUSED_ADD_NORM_MIN_US at least)."""
    nbytes = 8 * ROW
    standalone = comm.all_reduce_s(H200, EIGHT, nbytes, Comm(), engine="sglang")
    extra = fused("sglang", nbytes)[1] - standalone
    assert 0 < extra - FUSED_NORM_EPILOGUE_US * 1e-6 < 1e-6
    assert extra < FUSED_ADD_NORM_MIN_US * 1e-6


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_mnnvl_two_shot_leaves_the_norm_to_a_kernel_of_its_own(engine):
    """FlashInfer's mnnvl backend (vLLM on one NVSwitch node; SGLang on the 10.x family) runs the norm inside its
    one-shot kernel up to 1 MiB over all ranks, and as rmsNormLamport, a kernel of its own, after its two-shot."""
    sm100 = tuple(dataclasses.replace(a, arch="sm_100") for a in H200.accelerators)
    b200 = dataclasses.replace(H200, accelerators=sm100)
    hw = H200 if engine == "vllm" else b200
    limit = MNNVL_ONE_SHOT_MAX_COMM_BYTES / 8
    assert fused(engine, limit, hw)[0] == "fused_mnnvl" and not fused(engine, limit, hw)[2]
    assert fused(engine, limit + 16, hw)[2]


def test_sglang_h200_tp8_decode_fused_is_cheaper_small_and_dearer_at_128_rows():
    """Step level, DeepSeek-V3 TP8 on 8 H200s under SGLang: at 8 decode rows (112 KiB, one-shot both ways) the fused
    plan saves the norm kernels; at 128 rows (1.75 MiB) the fused kernel's one-shot wire outweighs them, where
    arn24's price (the all-reduce alone) had the fused plan cheaper at every size."""
    assert step_ms("sglang", 8, True) < step_ms("sglang", 8, False)
    assert step_ms("sglang", 128, True) > step_ms("sglang", 128, False)


def test_the_fused_op_is_reported_under_its_kernel():
    p = PhasePlan(gpus=EIGHT, tp=8)
    cost = step_cost(DSV3, p, "sglang", H200, EIGHT, StepInput(decode_seqs=8, decode_ctx=1500), "t")
    assert "allreduce:fused_trtllm" in cost.comm_ms and "allreduce:custom" not in cost.comm_ms


def test_the_fusion_dimension_is_open_on_sm103():
    """Both engines fuse on cc 10.3 (vLLM's rule cc [9.0, 10.0, 10.3]; SGLang's is_sm100 covers the 10.x family):
    the search space's fusion dimension admits an sm_103 box."""
    from autotune.search.space import load_space, static_ok

    dim = next(d for d in load_space().dimensions if d.field == "fusion.allreduce_rmsnorm")
    sm103 = dataclasses.replace(
        H200, accelerators=tuple(dataclasses.replace(a, arch="sm_103") for a in H200.accelerators)
    )
    assert static_ok(dim.requires, DSV3, sm103)


def test_vllm_standalone_flashinfer_all_reduce_takes_the_mnnvl_split():
    """vLLM's standalone FlashInfer all-reduce is allreduce_fusion's plain pattern on the same mnnvl workspace
    (vllm/distributed/device_communicators/flashinfer_all_reduce.py:551-566, no use_oneshot): one exchange up to
    1 MiB over all ranks (128 KiB at 8), two above -- a step of one more fixed time there, where the model's
    earlier split (the custom kernel's 256 KiB) ran one-shot to 256 KiB."""
    from autotune.perf.comm_rates import engine_ar_latency_us

    limit = MNNVL_ONE_SHOT_MAX_COMM_BYTES / 8
    at, above = (comm.all_reduce(H200, EIGHT, n, Comm(), engine="vllm") for n in (limit, limit + 16))
    assert at[0] == above[0] == "flashinfer"
    assert above[1] - at[1] > 0.5 * engine_ar_latency_us(8) * 1e-6
