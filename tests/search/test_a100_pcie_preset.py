"""The 8x A100 80GB PCIe preset (sm80-25): a search on it finds a plan every capability rule admits."""

import pytest

from autotune import capability
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.engines import build_launch
from autotune.perf import comm
from autotune.search import SearchRequest, load_space
from autotune.search.study import run_study
from autotune.specs import Comm, Workload

TRIALS = 6  # seeded; CI has 2 cores


def test_preset_is_the_bridged_pcie_box():
    hw = load_preset("a100-pcie-x8")
    assert hw.gpu.arch == "sm_80" and not hw.gpu.features.fp8 and hw.interconnect == "mixed"
    bridged = {(i, j) for i in range(8) for j in range(8) if hw.links[i][j].startswith("NV")}
    assert bridged == {(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4), (6, 7), (7, 6)}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_search_finds_an_admitted_plan(engine):
    model, hw = load_model("llama-3.1-70b"), load_preset("a100-pcie-x8")
    req = SearchRequest(model, hw, Workload(isl=2048, osl=256), load_space(), hw.num_gpus, TRIALS, 1, engine=engine)
    best = run_study(req).best
    assert best.prediction.feasible and best.plan.engine == engine
    assert not capability.plan_violations(best.plan, model, hw)
    build_launch(best.plan, model, hw)  # every argv against the engine's parser table


def test_hgx_a100_preset_is_nvswitch_nvlink3():
    hw = load_preset("a100-sxm-x8")
    assert hw.interconnect == "nvlink" and hw.gpu.nvlink_gbs == 300.0 and hw.gpu.arch == "sm_80"
    assert hw.gpu.name == "NVIDIA A100-SXM4-80GB" and hw.gpu.mem_bw_gbs == 2039.0


def test_eight_gpu_nccl_ring_lands_in_the_measured_band():
    # NVIDIA/nccl#841 (8x A100 80GB PCIe, 2x EPYC 7543, P2P on): all_reduce_perf busbw "8 to 21" GB/s, a range with no
    # size sweep (shared calibration coll-a100-pcie-8gpu-allreduce): a plausibility band for the box's ring at 128 MB
    hw, nbytes = load_preset("a100-pcie-x8"), 128 * 2**20
    busbw_gbs = nbytes * 2 * 7 / 8 / comm.all_reduce_s(hw, tuple(range(8)), nbytes, Comm("nccl"), 1e12) / 1e9
    assert 8.0 <= busbw_gbs <= 21.0
