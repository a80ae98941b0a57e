"""A box is searched only with the engines that run on its vendor, and the Ascend dimensions only where they apply."""

import pytest

from autotune.capability import ENGINE_VENDORS
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.catalog.presets import preset_names
from autotune.search import SearchRequest, load_space
from autotune.search.study import study_choices
from autotune.specs import Workload

SPACE = load_space()
ASCEND_DIMS = [d.name for d in SPACE.dimensions if d.field.startswith("platform.")]


@pytest.mark.parametrize("preset", preset_names())
def test_engines_offered_run_on_the_box_vendor(preset):
    hw = load_preset(preset)
    choices = study_choices(SearchRequest(load_model("llama-3.1-70b"), hw, Workload(), SPACE, hw.num_gpus))
    assert choices["engine"] and all(hw.gpu.vendor in ENGINE_VENDORS[e] for e in choices["engine"])
    if hw.gpu.vendor == "nvidia":
        assert "vllm-ascend" not in choices["engine"]
        assert all(choices[name] == () for name in ASCEND_DIMS)  # moot: the engine default stays
    else:
        assert choices["engine"] == ("vllm-ascend",)
        assert any(len(choices[name]) > 1 for name in ASCEND_DIMS)
        assert choices["nccl_proto"] == (None,) and choices["allreduce"] == ("custom",)
