"""The memory pre-check refuses only boxes no plan fits, and says why with the arithmetic."""

import dataclasses

import pytest

import autotune.search.study as study
from autotune.catalog import load_model, load_preset
from autotune.inputs import restrict_gpus
from autotune.search import SearchRequest, load_space, run_study
from autotune.search.diagnose import check_fits
from autotune.specs import MiTuneError, Workload

W = Workload(isl=2048, osl=512)


def _request(model: str, preset: str, gpus: int, trials: int = 30) -> SearchRequest:
    hw = restrict_gpus(load_preset(preset), gpus)
    return SearchRequest(load_model(model), hw, W, load_space(), hw.num_gpus, trials=trials, seed=1)


@pytest.mark.parametrize(
    ("model", "preset", "gpus"),
    [("deepseek-v4.1-flash", "h200-x8", 2), ("llama-3.1-70b", "rtx-4090-x8", 2), ("qwen3-235b-a22b", "l20-x8", 4)],
)
def test_a_refused_box_has_no_plan_that_fits_when_searched_anyway(model, preset, gpus, monkeypatch):
    req = _request(model, preset, gpus)
    with pytest.raises(MiTuneError, match=r"needs [\d.,]+ GB of weights.*: no plan fits"):
        check_fits(req, study.study_choices(req))
    monkeypatch.setattr(study, "check_fits", lambda *_: None)  # search without the pre-check
    with pytest.raises(MiTuneError, match="out of memory"):
        run_study(req)


@pytest.mark.parametrize(
    ("model", "preset", "gpus"),
    [("deepseek-v4.1-flash", "h200-x8", 4), ("llama-3.1-70b", "rtx-4090-x8", 4), ("qwen3-235b-a22b", "l20-x8", 8)],
)
def test_the_next_larger_box_passes_and_its_search_finds_a_plan(model, preset, gpus):
    req = _request(model, preset, gpus)
    check_fits(req, study.study_choices(req))
    assert run_study(req).best.value > 0


def test_unknown_gpu_figures_are_named_before_any_trial():
    hw = load_preset("l40s-x8")
    blank = dataclasses.replace(hw.gpu, mem_bw_gbs=0.0, peak_tflops={})
    hw = dataclasses.replace(hw, accelerators=tuple(blank for _ in hw.accelerators))
    req = SearchRequest(load_model("llama-3.1-70b"), hw, W, load_space(), 8)
    with pytest.raises(MiTuneError, match=r"mem_bw_gbs, peak_tflops\.bf16 of 'NVIDIA L40S' unknown"):
        check_fits(req, study.study_choices(req))
