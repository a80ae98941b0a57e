"""serve points the engine at the fused-MoE configs tuned into the run directory, and only at ones it will read;
the search knows which plans run the Triton MoE path and the shapes they look up."""

import pytest

from autotune.cli import run
from autotune.engines.tuned_moe import tuned_config_files
from autotune.inputs import recorded_hardware, resolve_model
from autotune.kernels import moe_configs as mc
from autotune.kernels.moe_plans import triton_moe_shapes
from autotune.kernels.moe_tune import BatchResult, TuneRequest, write_files
from autotune.specs import load_best

CONFIG = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 64,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 3,
}


@pytest.fixture(scope="module", params=["sglang", "vllm"])
def run_dir(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("tuned") / request.param
    argv = ["search", "--model", "qwen3-235b-a22b", "--preset", "l40s-x8", "--engine", request.param]
    assert run([*argv, "--trials", "8", "--seed", "1", "--out", str(out)]) == 0
    return out


def _inputs(run_dir):
    best = load_best(run_dir / "best.yaml")
    model, _ = resolve_model(best.model.name)
    return best, model, recorded_hardware(best, run_dir / "best.yaml")


def _tune_into(run_dir, shape, device_name, triton="3.9.0"):
    req = TuneRequest(
        model=None,
        tp=1,
        ep=1,
        dtype=shape.dtype,
        engines=(shape.engine,),
        out_dir=run_dir / "moe_configs",
        device_name=device_name,
        arch="sm_89",
        triton_version=triton,
    )
    timing = {"total_us": 20.0}
    write_files(req, shape, [BatchResult(1, CONFIG, timing, CONFIG, timing, 1, 0)], "test")


def _server_lines(run_dir, capsys):
    assert run(["serve", str(run_dir / "best.yaml"), "--dry-run"]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if " serve" in line or "launch_server" in line]


def test_qwen3_on_l40s_runs_the_triton_moe_path(run_dir):
    best, model, hw = _inputs(run_dir)
    shapes = triton_moe_shapes(best.plan, model, hw)
    assert set(shapes) == set(best.plan.phases)  # sm_89: both engines run bf16 / FP8 experts in Triton
    phase = next(iter(best.plan.phases.values()))
    shape = shapes[next(iter(shapes))]
    assert shape.engine == best.plan.engine and shape.num_experts == 128 // phase.ep
    assert shape.shard_n == 1536 // (phase.tp * phase.dp // phase.ep)
    assert shape.dtype == ("fp8_w8a8" if phase.kernels.gemm_dtype == "fp8" else "bf16")


def test_serve_dry_run_sets_the_variable_only_with_a_file_the_plan_reads(run_dir, capsys):
    best, model, hw = _inputs(run_dir)
    var = mc.CONFIG_DIR_ENV[best.plan.engine]
    assert all(var not in line for line in _server_lines(run_dir, capsys))  # nothing tuned yet
    shape = next(iter(triton_moe_shapes(best.plan, model, hw).values()))
    _tune_into(run_dir, shape, "NVIDIA GeForce RTX 4090")  # another GPU's file: not read here
    assert not tuned_config_files(best.plan, model, hw, run_dir)
    assert all(var not in line for line in _server_lines(run_dir, capsys))
    _tune_into(run_dir, shape, hw.gpu.name, triton="3.8.0")  # SGLang also reads another triton folder
    lines = _server_lines(run_dir, capsys)
    expected = f"{var}={(run_dir / 'moe_configs' / best.plan.engine).resolve()}"
    assert lines and all(expected in line for line in lines)


def test_the_performance_model_reads_the_tuned_kernel_time(run_dir):
    from autotune.kernels.moe_tune import hardware_with_tuned_moe, tuned_op_points
    from autotune.perf import rates

    best, model, hw = _inputs(run_dir)
    shape = next(iter(triton_moe_shapes(best.plan, model, hw).values()))
    _tune_into(run_dir, shape, hw.gpu.name)
    files = tuned_config_files(best.plan, model, hw, run_dir)
    points = tuned_op_points([mc.sidecar_path(path) for path in files.values()])
    assert points and all(p.op_class == "grouped_moe" and p.time_us == 20.0 for p in points)
    (point,) = points  # one batch (1 token): 8 routed rows over 128 experts
    assert point.bucket == "m<=16" and point.dtype == {"fp8_w8a8": "fp8", "bf16": "bf16"}[shape.dtype]
    assert point.tflops == pytest.approx(2 * 8 * 3 * shape.shard_n * shape.hidden / 20.0 / 1e6)

    tuned_hw = hardware_with_tuned_moe(hw, run_dir)
    assert tuned_hw.fingerprint != hw.fingerprint  # the rates table is cached per fingerprint
    entry = rates.build(tuned_hw).get("grouped_moe", point.dtype, "m<=16")
    assert entry.provenance == "probe" and entry.tflops == pytest.approx(point.tflops)
    assert rates.build(hw).get("grouped_moe", point.dtype, "m<=16").provenance != "probe"


def test_interpreter_timings_never_reach_the_model(run_dir, tmp_path):
    from autotune.kernels.moe_tune import hardware_with_tuned_moe

    best, model, hw = _inputs(run_dir)
    shape = next(iter(triton_moe_shapes(best.plan, model, hw).values()))
    req = TuneRequest(
        model=None,
        tp=1,
        ep=1,
        dtype=shape.dtype,
        engines=(shape.engine,),
        device="cpu",
        out_dir=tmp_path / "moe_configs",
        device_name=hw.gpu.name,
        arch="sm_89",
        triton_version="3.9.0",
    )
    write_files(req, shape, [BatchResult(1, CONFIG, {"total_us": 5.0}, CONFIG, {"total_us": 5.0}, 1, 0)], "test")
    assert hardware_with_tuned_moe(hw, tmp_path) is hw


def test_estimate_beside_tuned_benchmarks_reports_probe_provenance(run_dir, capsys):
    """`mi-tune estimate <run>/best.yaml` reads the GPU-timed tune-moe benchmarks in <run>/moe_configs: the grouped
    MoE entries the prediction leans on say `probe`."""
    import json

    best, model, hw = _inputs(run_dir)
    shape = next(iter(triton_moe_shapes(best.plan, model, hw).values()))
    # times as a kernel reaching 50 TFLOPS would take, at batches covering every rows-per-expert bucket
    batches = (1, 64, 512, 2048, 8192, 32768)
    results = []
    for tokens in batches:
        us = 2.0 * tokens * shape.topk * 3 * shape.shard_n * shape.hidden / 50e6
        results.append(BatchResult(tokens, CONFIG, {"total_us": us}, CONFIG, {"total_us": us * 1.2}, 1, 0))
    out = run_dir / "estimate"
    (out / "best.yaml").parent.mkdir(exist_ok=True)
    (out / "best.yaml").write_text((run_dir / "best.yaml").read_text())
    req = TuneRequest(
        model=None,
        tp=1,
        ep=1,
        dtype=shape.dtype,
        engines=(shape.engine,),
        out_dir=out / "moe_configs",
        device_name=hw.gpu.name,
        arch="sm_89",
        triton_version="3.9.0",
    )
    write_files(req, shape, results, "test")
    capsys.readouterr()
    assert run(["estimate", str(out / "best.yaml"), "--json"]) == 0
    rates = json.loads(capsys.readouterr().out)["rates"]
    grouped = {k: v for k, v in rates.items() if k.startswith("grouped_moe/")}
    assert grouped and all(v == "probe" for v in grouped.values())
