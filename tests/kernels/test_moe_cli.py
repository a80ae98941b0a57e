"""`mi-tune kernels tune-moe` on the command line: the dry run works without a GPU, bad input is one line, exit 2."""

import importlib.util

import pytest

from autotune.cli import run


def test_dry_run_prints_each_engines_file_and_the_space(capsys):
    argv = ["kernels", "tune-moe", "--model", "qwen3-235b-a22b", "--tp", "8", "--dtype", "fp8_w8a8", "--dry-run"]
    assert run([*argv, "--preset", "l40s-x8"]) == 0
    out = capsys.readouterr().out
    name = "E=128,N=192,device_name=NVIDIA_L40S,dtype=fp8_w8a8.json"
    assert f"moe_configs/vllm/{name}" in out
    assert "moe_configs/sglang/configs/triton_" in out and out.count(name) == 4  # looks up / writes, per engine
    assert "BLOCK_SIZE_M [16, 32, 64, 128, 256]" in out and "num_stages [2, 3, 4, 5]" in out
    assert "<= 101376 B (sm_89)" in out
    assert "note:" not in out  # both engines run bf16 / FP8 experts in Triton on sm_89


def test_dry_run_notes_when_the_engine_would_not_run_triton_here(capsys):
    argv = [
        "kernels",
        "tune-moe",
        "--model",
        "qwen3-235b-a22b",
        "--tp",
        "8",
        "--dry-run",
        "--preset",
        "rtx-pro-6000-x8",
    ]
    assert run(argv) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "note:" in line]
    assert notes == [
        "  note:     vllm's default MoE kernel here is flashinfer_cutlass (perf.efficiency.auto_moe_kernel); "
        "the file is read by plans that set kernels.moe: triton"
    ]


def test_dry_run_without_hardware_flags_names_the_gpu_it_planned_for(capsys):
    assert (
        run(
            [
                "kernels",
                "tune-moe",
                "--model",
                "deepseek-v3",
                "--tp",
                "8",
                "--dtype",
                "fp8_w8a8",
                "--dry-run",
                "--device-name",
                "NVIDIA H200",
                "--engine",
                "sglang",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "E=257,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json" in out
    assert "vllm:" not in out and "(incl. 1 fused shared expert)" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model", "qwen3-235b-a22b", "--tp", "8", "--ep", "3"], "--tp/--ep"),
        (["--model", "qwen3-235b-a22b", "--tp", "8", "--batch-sizes", "1,x"], "--batch-sizes"),
        (["--model", "qwen3-235b-a22b", "--tp", "8", "--batch-sizes", "0"], "--batch-sizes"),
        (["--model", "qwen3-235b-a22b", "--tp", "8", "--block-shape", "128"], "--block-shape"),
        (["--model", "qwen3-235b-a22b", "--tp", "8", "--engine", "trt"], "--engine"),
        (["--model", "qwen3-235b-a22b", "--tp", "8", "--trials", "0"], "--trials"),
        (["--model", "qwen3-235b-a22b", "--tp", "8", "--device-name", "Mystery GPU"], "--device-name"),
        (["--model", "llama-3.1-70b", "--tp", "8"], "not a MoE model"),
        (["--model", "nope", "--tp", "8"], "unknown model"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, flags, message):
    assert run(["kernels", "tune-moe", *flags, "--preset", "l40s-x8", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("mi-tune: error:") and "Traceback" not in "\n".join(err)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or __import__("torch").cuda.is_available(),
    reason="checks the no-GPU message",
)
def test_tuning_without_a_gpu_says_so(capsys):
    assert run(["kernels", "tune-moe", "--model", "qwen3-235b-a22b", "--tp", "8", "--preset", "l40s-x8"]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
