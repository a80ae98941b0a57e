"""The 8x A100 80GB PCIe preset (sm80-25): a search on it finds a plan every capability rule admits."""

import pytest

from autotune import capability
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.engines import build_launch
from autotune.search import SearchRequest, load_space
from autotune.search.study import run_study
from autotune.specs import Workload

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
