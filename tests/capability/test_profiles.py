"""Engine profiles (capability/profiles/): one per engine version, the only place engine behaviour branches.

Adding an engine version is what README's recipe says: a copied profile resolves at every site that reads engine
behaviour (a throwaway "next version" of each CUDA engine predicts exactly as the engine it copies), and no module
outside the capability tables and the emitters compares an engine name with a string literal."""

import dataclasses
import re
from pathlib import Path

import pytest

from autotune import specs
from autotune.capability import TABLES, profiles
from autotune.capability.profiles import ENGINES, PROFILES, profile
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.engines import ENGINE_VERSIONS
from autotune.kernels import moe_configs as mc
from autotune.perf import efficiency, memory
from autotune.perf.predict import predict
from autotune.search.baseline import baseline_plan
from autotune.sim.serve import simulate_prediction
from autotune.specs import Batching, Comm, MiTuneError, PhasePlan, Plan, Workload

REPO = Path(__file__).resolve().parents[2]
# modules that are per engine by nature: the rule tables and profiles, and the emitters (Plan -> that engine's argv)
PER_ENGINE = (
    "autotune/capability/",
    "autotune/engines/vllm.py",
    "autotune/engines/sglang.py",
    "autotune/engines/vllm_ascend.py",
    "autotune/engines/flags_extract.py",  # each engine's parser, built from its wheel (a script run in that wheel)
    "autotune/video/",  # SGLang Diffusion, its own vertical slice with its own engine
)
ENGINE_LITERAL = "|".join(re.escape(e) for e in ENGINES)
# `engine == "vllm"`, `plan.engine != "sglang"`, `engine in ("vllm", ...)`, `c.engine == ascend.ENGINE`, and dict keys
# `{"vllm": ...}`
BRANCH = re.compile(
    rf"""engine\s*(?:==|!=|in|not in)\s*\(?["'](?:{ENGINE_LITERAL})["']"""  # a literal engine name
    r"""|engine\s*(?:==|!=)\s*[\w.]*ENGINE\b"""  # or a module's ENGINE constant (perf/ascend.ENGINE was one)
)
KEYED = re.compile(rf"""(?:^|[{{,])\s*["'](?:{ENGINE_LITERAL})["']\s*:""")


def test_the_engine_list_is_the_profiles():
    assert ENGINES == tuple(PROFILES) == specs.plan.ENGINES  # specs keeps a copy (it may not import capability)
    assert set(TABLES) == set(ENGINES)
    for engine, p in PROFILES.items():
        assert p.engine == engine == p.rules.engine
        assert p.version == p.rules.version == ENGINE_VERSIONS[engine]
        assert p.version in p.install
    with pytest.raises(MiTuneError, match="no engine profile"):
        profile("tgi")


def test_no_engine_branch_outside_the_profiles_and_emitters():
    found = []
    for path in sorted([*REPO.glob("autotune/**/*.py"), *REPO.glob("kernels/*.py")]):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(PER_ENGINE):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if BRANCH.search(code) or KEYED.search(code):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "engine branches outside capability/ (read the engine profile instead):\n" + "\n".join(found)


def _next_version(monkeypatch, engine: str) -> str:
    """A throwaway next version of `engine`: its profile copied under a new engine name, as the recipe does."""
    name = f"{engine}-next"
    monkeypatch.setitem(PROFILES, name, dataclasses.replace(PROFILES[engine], engine=name, version="99.0.0"))
    monkeypatch.setattr(specs.plan, "ENGINES", (*specs.plan.ENGINES, name))
    return name


def _plans(engine: str) -> list[Plan]:
    gpus, batching = tuple(range(8)), Batching(64, 8192)
    phase = PhasePlan(gpus=gpus, tp=2, dp=4, ep=8, dp_attention=True, batching=batching, comm=Comm("custom"))
    pp = PhasePlan(gpus=gpus, tp=4, pp=2, ep=4, batching=batching)  # SGLang's overlap scheduler is off under pp
    return [Plan(engine=engine, mode="aggregated", phases={"both": p}) for p in (phase, pp)]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("model_name", ["deepseek-v3", "qwen3.5-397b-a17b"])  # MLA MoE; hybrid linear attention
def test_a_copied_profile_predicts_as_the_engine_it_copies(monkeypatch, engine, model_name):
    copy = _next_version(monkeypatch, engine)
    model, hw, w = load_model(model_name), load_preset("h200-x8"), Workload(isl=2000, osl=200)
    for plan, twin in zip(_plans(engine), _plans(copy), strict=True):
        original = predict(plan, model, hw, w)
        assert original.feasible
        assert predict(twin, model, hw, w) == original
        simulated = simulate_prediction(plan, model, hw, w, original)
        assert simulate_prediction(twin, model, hw, w, original) == simulated
    assert efficiency.auto_moe_kernel(copy, "fp8", "sm_90", False, 8) == efficiency.auto_moe_kernel(
        engine, "fp8", "sm_90", False, 8
    )
    assert baseline_plan(copy, hw, 8, model).phases == baseline_plan(engine, hw, 8, model).phases
    shape, twin_shape = (mc.moe_shape(model, engine=e, tp=8) for e in (engine, copy))
    assert mc.config_file_name(twin_shape, "NVIDIA H200") == mc.config_file_name(shape, "NVIDIA H200")


def test_the_profiles_differ_where_the_engines_do():
    vllm, sglang = profile("vllm"), profile("sglang")
    assert vllm.mixed_prefill_chunks and not sglang.mixed_prefill_chunks
    assert sglang.tp_spans_dp and not vllm.tp_spans_dp
    assert efficiency.scheduler_overlapped("vllm", 2) and not efficiency.scheduler_overlapped("sglang", 2)
    model, hw = load_model("deepseek-v3"), load_preset("h200-x8")
    phase = _plans("vllm")[0].phases["both"]
    assert memory.memory_fit(model, phase, hw, 4096, "vllm") != memory.memory_fit(model, phase, hw, 4096, "sglang")
    assert profile("vllm-ascend").moe_configs is None and "vllm-ascend" not in profiles.moe_config_engines()
    with pytest.raises(MiTuneError, match="--engine: expected vllm, sglang or both"):
        mc.files_rule("vllm-ascend")


@pytest.mark.parametrize(
    "engine, memory_gib, name, arch, expected",
    [
        # vllm/engine/arg_utils.py:2995-3045 (0.34): >= 160 GiB, >= 70 GiB but not A100 / GB10, else
        ("vllm", 96.0, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm_120", (1024, 8192)),
        ("vllm", 141.0, "NVIDIA H200", "sm_90", (1024, 8192)),
        ("vllm", 80.0, "NVIDIA A100 80GB PCIe", "sm_80", (256, 2048)),
        ("vllm", 119.7, "NVIDIA GB10", "sm_121", (256, 2048)),
        ("vllm", 180.0, "NVIDIA B200", "sm_100", (1024, 16384)),
        ("vllm", 48.0, "NVIDIA L40S", "sm_89", (256, 2048)),
        # srt/arg_groups/memory_hook.py:89-178: the chunk by GiB, 4096 when unknown
        ("sglang", 16.0, "Tesla T4", "sm_75", (1024, 2048)),
        ("sglang", 48.0, "NVIDIA L40S", "sm_89", (1024, 4096)),
        ("sglang", 64.0, "x", "sm_90", (1024, 8192)),
        ("sglang", 180.0, "NVIDIA B200", "sm_100", (1024, 16384)),
        ("sglang", 0.0, "unknown", "sm_90", (1024, 4096)),
        # the NPU platform reports no total memory: vLLM 0.23's small tier on every NPU
        ("vllm-ascend", 64.0, "Huawei Ascend 910B", "ascend910b", (256, 2048)),
    ],
)
def test_default_batching_follows_each_engines_own_rule(engine, memory_gib, name, arch, expected):
    got = profile(engine).default_batching(memory_gib, name, arch)
    assert (got.max_running, got.chunked_prefill_tokens) == expected


def test_the_baseline_reads_the_gpu_memory_as_gib():
    """96 GiB RTX PRO 6000 is in vLLM's >= 70 GiB tier (8192 tokens), not only Hopper names; 64 GiB is not 59.6 GB."""
    hw = load_preset("rtx-pro-6000-x8")
    assert hw.gpu.memory_gib == 96.0
    assert baseline_plan("vllm", hw, 8).phases["both"].batching == Batching(1024, 8192)
    assert baseline_plan("vllm-ascend", load_preset("atlas-800i-a2"), 8).phases["both"].batching == Batching(256, 2048)


# SGLang's MXFP4 pick below SM90 (flashinfer_mxfp4, which its rules refuse there) is not covered: what SGLang runs
# for MXFP4 experts on SM80/SM89 is not read yet
@pytest.mark.parametrize("engine, expert_format", [("vllm", "nvfp4"), ("sglang", "nvfp4"), ("vllm", "mxfp4")])
@pytest.mark.parametrize(
    "arch, cc", [("sm_80", 8.0), ("sm_89", 8.9), ("sm_90", 9.0), ("sm_100", 10.0), ("sm_120", 12.0)]
)
def test_the_auto_moe_kernel_of_an_fp4_checkpoint_is_one_the_engines_own_rules_admit(engine, expert_format, arch, cc):
    """kernels.moe = auto follows the checkpoint's format, not only its dtype: NVFP4 experts are not DeepGEMM's
    (vLLM) or flashinfer_mxfp4's (SGLang), whose rules admit only MXFP4 / block FP8."""
    from autotune.capability import value_admitted

    pick = efficiency.auto_moe_kernel(engine, "fp4", arch, False, 1, expert_format)
    facts = {"engine": engine, "expert_weights": expert_format, "cc": cc, "ep": 1, "eplb": False, "arch": arch}
    refused = value_admitted(engine, "kernels.moe", pick, facts)
    assert refused is None, f"{engine} {arch} {expert_format}: auto picks {pick}, refused: {refused}"
