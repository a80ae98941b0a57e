import math

import pytest

from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space
from autotune.search.sampler import build_phase, layouts, sample_plan
from autotune.search.space import effective_choices
from autotune.search.study import study_choices
from autotune.specs import SpecError, Workload


def test_default_space_loads_and_every_field_is_a_plan_field():
    space = load_space()
    assert {
        "engine",
        "mode",
        "tp",
        "dp",
        "pp",
        "gemm_dtype",
        "kv_cache_dtype",
        "max_running",
        "chunked_prefill_tokens",
    } <= {d.name for d in space.dimensions}
    # the first choice of every phase dimension must build a valid PhasePlan on 8 GPUs
    values = {d.name: d.choices[0] for d in space.dimensions if d.scope == "phase"}
    assert not isinstance(build_phase(space, values, tuple(range(8))), str)


def test_space_file_errors_name_the_file(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("schema: mi-tune/space/v1\ndimensions:\n  - {name: tp, field: tp, choices: [1], colour: red}\n")
    with pytest.raises(SpecError, match=r"space.yaml: dimensions\[0\]: unknown key 'colour'"):
        load_space(path)
    path.write_text(
        "schema: mi-tune/space/v1\ndimensions:\n  - {name: tp, field: tp, choices: [1, 2],"
        " value_requires: {4: {arch: [sm_90]}}}\n"
    )
    with pytest.raises(SpecError, match="4 is not one of the choices"):
        load_space(path)
    path.write_text("schema: mi-tune/plan/v1\n")
    with pytest.raises(SpecError, match="schema: expected 'mi-tune/space/v1'"):
        load_space(path)


def test_choices_follow_the_box_and_model():
    space = load_space()
    pcie, nvl = load_preset("rtx-pro-6000-x8"), load_preset("h200-x8")
    v41, llama = load_model("deepseek-v4.1-flash"), load_model("llama-3.1-70b")
    assert effective_choices(space.dimension("all2all"), v41, pcie) == ("allgather_reducescatter",)
    assert "deepep" in effective_choices(space.dimension("all2all"), v41, nvl)
    assert effective_choices(space.dimension("dp"), llama, pcie) == ()  # moot: the plan keeps dp=1
    assert effective_choices(space.dimension("gemm_dtype"), v41, pcie) == ()  # checkpoint already fp8/fp4
    assert effective_choices(space.dimension("gemm_dtype"), llama, pcie) == ("auto", "fp8")
    assert effective_choices(space.dimension("allreduce_rmsnorm_fusion"), llama, pcie) == ()
    assert True in effective_choices(space.dimension("allreduce_rmsnorm_fusion"), llama, nvl)


def test_values_no_engine_accepts_are_pruned():
    space = load_space()
    v3, v41 = load_model("deepseek-v3"), load_model("deepseek-v4.1-flash")
    pcie, nvl = load_preset("rtx-pro-6000-x8"), load_preset("h200-x8")
    assert study_choices(SearchRequest(v3, pcie, Workload(), space, 8))["all2all"] == ("allgather_reducescatter",)
    assert study_choices(SearchRequest(v3, nvl, Workload(), space, 8))["two_batch_overlap"] == (False, True)
    # both engines refuse two-batch overlap for DeepSeek-V4.1 (vllm config/vllm.py, sglang deepseek_v4_hook.py)
    assert study_choices(SearchRequest(v41, nvl, Workload(), space, 8))["two_batch_overlap"] == (False,)


def test_layouts_are_the_fitting_combinations():
    space = load_space()
    req = SearchRequest(load_model("deepseek-v4.1-flash"), load_preset("h200-x8"), Workload(), space, 8)
    options = layouts(space, study_choices(req), 8)
    assert "tp=2,dp=2,pp=2" in options and "tp=8,dp=1,pp=1" in options
    assert "tp=8,dp=2,pp=1" not in options  # 16 GPUs do not fit in 8
    assert all(8 % math.prod(int(p.split("=")[1]) for p in o.split(",")) == 0 for o in options)
    dense = SearchRequest(load_model("llama-3.1-70b"), load_preset("h200-x8"), Workload(), space, 8)
    assert all("dp" not in o for o in layouts(space, study_choices(dense), 6))  # dp is moot for a dense model


def test_sampling_builds_replicas_and_rejects_with_reasons():
    space = load_space()
    req = SearchRequest(load_model("deepseek-v4.1-flash"), load_preset("h200-x8"), Workload(), space, 8)
    choices = study_choices(req)

    def picker(values):
        return lambda name, options: values.get(name, options[0])

    plan, reason = sample_plan(space, choices, picker({"both.layout@8": "tp=2,dp=1,pp=1"}), 8)
    assert reason == "" and plan.phases["both"].replicas == 4 and plan.phases["both"].tp == 2
    plan, reason = sample_plan(space, choices, picker({"both.all2all": "deepep"}), 8)
    assert plan is None and reason == "both.all2all=deepep needs expert_parallel=true"
    values = {
        "mode": "disaggregated",
        "prefill_share": 0.25,
        "prefill.layout@2": "tp=2,dp=1,pp=1",
        "decode.layout@6": "tp=2,dp=1,pp=1",
    }
    asked = []
    plan, reason = sample_plan(space, choices, lambda n, o: asked.append(n) or values.get(n, o[0]), 8)
    assert plan.phases["prefill"].gpus == (0, 1) and plan.phases["decode"].gpus == (2, 3, 4, 5, 6, 7)
    assert plan.phases["decode"].replicas == 3
    assert "decode.chunked_prefill_tokens" not in asked and "prefill.max_running" not in asked


def test_layouts_an_engine_refuses_are_not_offered_to_it():
    import random

    from autotune import capability
    from autotune.search.admit import Admission

    space, model, hw = load_space(), load_model("deepseek-v4.1-flash"), load_preset("h200-x8")
    choices = study_choices(SearchRequest(model, hw, Workload(), space, 8))
    assert 2 in choices["pp"]  # vLLM runs V4.1 with pipeline parallelism
    admission, rng, asked = Admission(capability.box_facts(hw, model)), random.Random(0), set()

    def pick(name, options):
        asked.add(name)
        return rng.choice(list(options))

    for _ in range(200):
        plan, reason = sample_plan(space, choices, pick, 8, admission)
        assert "pipeline" not in reason  # SGLang's V4.1 hook refuses pp > 1: never sampled for it
        if plan and plan.engine == "sglang":
            assert all(p.pp == 1 for p in plan.phases.values())
    assert any(name.endswith("/sglang") for name in asked)  # its layouts are asked under their own name
