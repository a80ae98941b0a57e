"""Which plans run the Triton fused-MoE path (autotune.kernels.moe_plans) and what tune-moe --best makes of them."""

import pytest

from autotune.catalog.models import load_model
from autotune.catalog.presets import load_preset
from autotune.cli import run
from autotune.kernels.moe_plans import phase_moe_kernel, triton_moe_shapes
from autotune.specs import load_best
from autotune.specs.plan import Kernels, PhasePlan, Plan


def _plan(engine, moe="auto", gemm="auto", tp=8, ep=1):
    phase = PhasePlan(gpus=tuple(range(8)), tp=tp, ep=ep, kernels=Kernels(moe=moe, gemm_dtype=gemm))
    return Plan(engine=engine, mode="aggregated", phases={"both": phase})


@pytest.mark.parametrize(
    ("engine", "model", "preset", "moe", "kernel", "expected"),
    [
        # vLLM bf16 experts: FlashInfer CUTLASS on sm_120, Triton on sm_89 (perf.efficiency.auto_moe_kernel)
        ("vllm", "qwen3-235b-a22b", "rtx-pro-6000-x8", "auto", "flashinfer_cutlass", None),
        ("vllm", "qwen3-235b-a22b", "l40s-x8", "auto", "triton", (128, 192, "bf16", None)),
        ("vllm", "qwen3-235b-a22b", "rtx-pro-6000-x8", "triton", "triton", (128, 192, "bf16", None)),
        # Marlin with bf16 experts: vLLM silently runs its auto choice (an "ignored" capability rule)
        ("vllm", "qwen3-235b-a22b", "l40s-x8", "marlin", "triton", (128, 192, "bf16", None)),
        # block-FP8 DeepSeek-V3 on H200: vLLM runs Triton with ep 1, SGLang fuses the shared expert
        ("vllm", "deepseek-v3", "h200-x8", "auto", "triton", (256, 256, "fp8_w8a8", (128, 128))),
        ("sglang", "deepseek-v3", "h200-x8", "auto", "triton", (257, 256, "fp8_w8a8", (128, 128))),
        # FP4 experts run other kernels
        ("sglang", "deepseek-v4-flash", "rtx-pro-6000-x8", "auto", "flashinfer_mxfp4", None),
    ],
)
def test_triton_path_and_shapes(engine, model, preset, moe, kernel, expected):
    spec, hw, plan = load_model(model), load_preset(preset), _plan(engine, moe)
    assert phase_moe_kernel(plan, "both", spec, hw) == kernel
    shapes = triton_moe_shapes(plan, spec, hw)
    if expected is None:
        assert shapes == {}
    else:
        s = shapes["both"]
        assert (s.num_experts, s.shard_n, s.dtype, s.block_shape) == expected and s.engine == engine


def test_online_fp8_and_expert_parallel_shapes():
    spec, hw = load_model("qwen3-235b-a22b"), load_preset("l40s-x8")
    fp8 = triton_moe_shapes(_plan("sglang", gemm="fp8"), spec, hw)["both"]
    assert (fp8.dtype, fp8.block_shape) == ("fp8_w8a8", None)  # online FP8 of a bf16 checkpoint: per-tensor
    ep = triton_moe_shapes(_plan("sglang", ep=8), spec, hw)["both"]
    assert (ep.num_experts, ep.shard_n) == (16, 1536)
    assert triton_moe_shapes(_plan("vllm"), load_model("llama-3.1-70b"), hw) == {}


def test_tune_moe_best_reads_the_plan_and_writes_into_its_run_dir(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["search", "--model", "qwen3-235b-a22b", "--preset", "l40s-x8", "--engine", "sglang", "--trials", "6"]
    assert run([*argv, "--seed", "2", "--out", str(run_dir)]) == 0
    capsys.readouterr()
    assert run(["kernels", "tune-moe", "--best", str(run_dir / "best.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    phase = load_best(run_dir / "best.yaml").plan.phases["both"]
    experts, shard = 128 // phase.ep, 1536 // (phase.tp * phase.dp // phase.ep)
    assert f"sglang: E={experts} N={shard} K=4096" in out and "vllm:" not in out
    assert f"writes:   {run_dir / 'moe_configs' / 'sglang' / 'configs'}/triton_" in out
    assert f"E={experts},N={shard},device_name=NVIDIA_L40S" in out
    assert run(["kernels", "tune-moe", "--best", str(run_dir / "best.yaml"), "--tp", "8", "--dry-run"]) == 2


def test_tune_moe_best_says_when_the_plan_runs_another_kernel(tmp_path, capsys):
    plan = tmp_path / "run"
    argv = ["search", "--model", "qwen3-235b-a22b", "--preset", "l40s-x8", "--engine", "vllm", "--trials", "6"]
    assert run([*argv, "--seed", "2", "--out", str(plan)]) == 0
    kernels = load_best(plan / "best.yaml").plan.phases["both"].kernels
    capsys.readouterr()
    code = run(["kernels", "tune-moe", "--best", str(plan / "best.yaml"), "--dry-run"])
    if kernels.moe == "marlin" and kernels.gemm_dtype == "fp8":
        assert code == 2 and "no phase runs the Triton fused-MoE kernel (both: marlin)" in capsys.readouterr().err
    else:
        assert code == 0
