"""Per-tensor FP8 experts: the checkpoint's activation scheme decides vLLM 0.34's fused-MoE kernel (issue 16).

vLLM walks one priority list for every FP8 MoE (fused_moe/oracle/fp8.py:94-110, :498-503) and moves Triton or
FlashInfer CUTLASS to the front for block FP8 on SM90 only (:127-139). Of per-tensor FP8, FlashInfer CUTLASS takes
static activation scales alone (experts/flashinfer_cutlass_moe.py:153-168), DeepGEMM takes none
(experts/deep_gemm_moe.py:178-188, required by its backend's class through experts/fallback.py:81-89), Triton takes
both (experts/triton_moe.py:197-204). ModelOpt FP8 is static
(quantization/modelopt.py:505-509), an `fp8` checkpoint follows its activation_scheme (quantization/fp8.py:509-518).
"""

from __future__ import annotations

import json
import random
from importlib.resources import files

import pytest

from autotune import capability
from autotune.capability import value_admitted
from autotune.catalog import load_preset
from autotune.catalog.models import model_from_config
from autotune.engines import build_launch
from autotune.perf import efficiency
from autotune.search import SearchRequest, load_space
from autotune.search.admit import Admission
from autotune.search.sampler import sample_plan
from autotune.search.study import study_choices
from autotune.specs import SpecError, Workload

MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8"}
FP8_STATIC = {"quant_method": "fp8", "activation_scheme": "static"}
FP8_DYNAMIC = {"quant_method": "fp8", "activation_scheme": "dynamic"}


def _ct(dynamic: bool) -> dict:
    group = {
        "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
        "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": dynamic},
    }
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}


def _spec(tmp_path, quant: dict, name: str = "qwen3-235b-a22b"):
    config = json.loads(files("autotune.catalog").joinpath("models", f"{name}.json").read_text())
    config.pop("_mi_tune", None)
    config["quantization_config"] = quant
    config["_name_or_path"] = f"example/{name}-fp8"  # what the emitted argv loads
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return model_from_config(path)


@pytest.mark.parametrize(
    ("quant", "fmt"),
    [
        (MODELOPT_FP8, "fp8_tensor"),
        (FP8_STATIC, "fp8_tensor"),
        (FP8_DYNAMIC, "fp8_tensor_dynamic"),
        ({"quant_method": "fp8"}, "fp8_tensor_dynamic"),  # vLLM's Fp8Config default (quantization/fp8.py:95)
        (_ct(dynamic=False), "fp8_tensor"),
        (_ct(dynamic=True), "fp8_tensor_dynamic"),
    ],
)
def test_the_per_tensor_fp8_format_carries_the_activation_scheme(tmp_path, quant, fmt):
    spec = _spec(tmp_path, quant)
    assert (spec.expert_dtype, spec.expert_format) == ("fp8", fmt)
    assert (spec.dense_dtype, spec.dense_format) == ("fp8", fmt)


def test_modelopt_per_channel_per_token_experts_are_dynamic(tmp_path):
    layers = {
        "model.layers.0.mlp.experts.0.gate_proj": {"quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"},
        "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
    }
    quant = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    spec = _spec(tmp_path, quant)
    assert (spec.dense_format, spec.expert_format) == ("fp8_tensor", "fp8_tensor_dynamic")


# (expert format, arch, ep) -> vLLM 0.34's pick, read from the oracle (module docstring): static scales reach
# FlashInfer (CUTLASS on SM90/SM120, TRT-LLM on SM100, valued as flashinfer_cutlass) before DeepGEMM and Triton;
# dynamic scales (and online FP8 of a bf16 checkpoint, quantization/online/fp8.py:665-674) reach Triton only
VLLM_PICKS = [
    ("fp8_tensor", "sm_90", 1, "flashinfer_cutlass"),
    ("fp8_tensor", "sm_90", 4, "flashinfer_cutlass"),
    ("fp8_tensor", "sm_100", 1, "flashinfer_cutlass"),
    ("fp8_tensor", "sm_120", 1, "flashinfer_cutlass"),
    ("fp8_tensor", "sm_89", 1, "triton"),
    ("fp8_tensor_dynamic", "sm_90", 4, "triton"),
    ("fp8_tensor_dynamic", "sm_100", 1, "triton"),
    ("fp8_tensor_dynamic", "sm_120", 1, "triton"),
    ("bf16", "sm_90", 4, "triton"),
    ("bf16", "sm_120", 1, "triton"),
    # block FP8 keeps its own rule
    ("fp8_block", "sm_90", 1, "triton"),
    ("fp8_block", "sm_90", 4, "flashinfer_cutlass"),
    ("fp8_block", "sm_120", 1, "deep_gemm"),
]


@pytest.mark.parametrize(("fmt", "arch", "ep", "kernel"), VLLM_PICKS)
def test_vllm_auto_moe_kernel_of_fp8_experts_follows_the_activation_scheme(fmt, arch, ep, kernel):
    assert efficiency.auto_moe_kernel("vllm", "fp8", arch, False, ep, fmt) == kernel


def test_a_modelopt_fp8_checkpoint_runs_flashinfer_cutlass_on_hopper_and_rtx_pro(tmp_path):
    spec = _spec(tmp_path, MODELOPT_FP8)
    for arch in ("sm_90", "sm_120"):
        assert efficiency.auto_moe_kernel("vllm", spec.expert_dtype, arch, False, 1, spec.expert_format) == (
            "flashinfer_cutlass"
        )
    dynamic = _spec(tmp_path, FP8_DYNAMIC)
    assert efficiency.auto_moe_kernel("vllm", dynamic.expert_dtype, "sm_120", False, 1, dynamic.expert_format) == (
        "triton"
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("fmt", ["fp8_tensor", "fp8_tensor_dynamic"])
@pytest.mark.parametrize(
    ("arch", "cc"), [("sm_80", 8.0), ("sm_89", 8.9), ("sm_90", 9.0), ("sm_100", 10.0), ("sm_120", 12.0)]
)
def test_the_auto_moe_kernel_of_per_tensor_fp8_is_one_the_engines_own_rules_admit(engine, fmt, arch, cc):
    for ep in (1, 4):
        pick = efficiency.auto_moe_kernel(engine, "fp8", arch, False, ep, fmt)
        facts = {"engine": engine, "expert_weights": fmt, "cc": cc, "ep": ep, "eplb": False, "arch": arch}
        assert value_admitted(engine, "kernels.moe", pick, facts) is None, f"{engine} {arch} {fmt} ep={ep}: {pick}"


# vLLM 0.34's FP8 MoE kernel classes by scheme (module docstring): an explicit --moe-backend no class takes raises
# (fused_moe/oracle/base.py:215-236). ModelOpt and `fp8` checkpoints keep vLLM's own CUTLASS MoE off
# (allow_vllm_cutlass False: oracle/fp8.py:446-457,494-496, quantization/fp8.py:522-527).
@pytest.mark.parametrize(
    ("fmt", "cc", "kernel", "admitted"),
    [
        ("fp8_tensor", 9.0, "flashinfer_cutlass", True),
        ("fp8_tensor", 12.0, "flashinfer_cutlass", True),
        ("fp8_tensor", 8.9, "flashinfer_cutlass", False),
        ("fp8_tensor_dynamic", 9.0, "flashinfer_cutlass", False),
        ("fp8_tensor_dynamic", 12.0, "flashinfer_cutlass", False),
        ("fp8_tensor", 12.0, "deep_gemm", False),
        ("fp8_tensor_dynamic", 9.0, "deep_gemm", False),
        ("fp8_tensor", 9.0, "cutlass", False),
        ("fp8_tensor_dynamic", 12.0, "triton", True),
        ("fp8_tensor_dynamic", 9.0, "marlin", True),
    ],
)
def test_vllm_rules_admit_a_moe_kernel_for_per_tensor_fp8_as_its_kernel_classes_do(fmt, cc, kernel, admitted):
    facts = {"engine": "vllm", "expert_weights": fmt, "cc": cc, "ep": 1, "eplb": False}
    assert (value_admitted("vllm", "kernels.moe", kernel, facts) is None) == admitted


# what vLLM 0.34 would refuse for each format (the rules test above spells the kernel classes out)
REFUSED = {
    "fp8_tensor": {"deep_gemm", "cutlass", "b12x"},
    "fp8_tensor_dynamic": {"deep_gemm", "cutlass", "b12x"} | {"flashinfer_cutlass"},
}


@pytest.mark.parametrize("preset", ["h200-x8", "rtx-pro-6000-x8"])
@pytest.mark.parametrize("quant", [MODELOPT_FP8, FP8_DYNAMIC], ids=["modelopt_fp8", "fp8_dynamic"])
def test_a_search_never_runs_a_moe_kernel_vllm_refuses_for_per_tensor_fp8(tmp_path, preset, quant):
    """Sampled plans (explicit kernels and auto alike) never run a MoE kernel vLLM refuses for the format, and their
    argv passes the flag table extracted from vLLM's own parser (build_launch validates it)."""
    model, hw = _spec(tmp_path, quant), load_preset(preset)
    space = load_space()
    req = SearchRequest(model, hw, Workload(), space, hw.num_gpus, engine="vllm")
    choices = {**study_choices(req), "mode": ("aggregated",)}
    admission, rng = Admission(capability.box_facts(hw, model)), random.Random(f"{preset}/{model.expert_format}")
    emitted, kernels = 0, set()
    for _ in range(40):
        plan, reason = sample_plan(space, choices, lambda _n, o: rng.choice(list(o)), hw.num_gpus, admission)
        if plan is None:
            assert reason
            continue
        assert capability.check_plan(plan, model, hw) == "", plan.describe()
        for phase in plan.phases.values():
            kernel = phase.kernels.moe
            if kernel == "auto":
                fmt, arch = model.expert_format, hw.gpu.arch
                kernel = efficiency.auto_moe_kernel("vllm", model.expert_dtype, arch, False, phase.ep, fmt)
            assert kernel not in REFUSED[model.expert_format], plan.describe()
            kernels.add(kernel)
        assert build_launch(plan, model, hw).processes
        emitted += 1
    assert emitted >= 20
    assert kernels  # something ran


@pytest.mark.parametrize(
    "groups",
    [
        ["group_0"],  # a list, not a mapping of groups
        {"group_0": {"weights": "fp8"}},
        {"group_0": {"weights": {"num_bits": 8, "type": "float"}, "input_activations": "dynamic"}},
    ],
)
def test_malformed_compressed_tensors_groups_are_a_one_line_spec_error(tmp_path, groups):
    """A user's config.json: a malformed config_groups is a SpecError naming the file and the field (the CLI's
    one-line error), not an AttributeError traceback (before: `.get` on a list or a string)."""
    with pytest.raises(SpecError, match=r"config\.json: quantization_config\.config_groups"):
        _spec(tmp_path, {"quant_method": "compressed-tensors", "config_groups": groups})
