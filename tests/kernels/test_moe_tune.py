"""The tuner: pruning and constraints with a scripted timer, and a tiny tuning run of mi-tune's fused-MoE kernel
under Triton's CPU interpreter that writes both engines' files."""

import importlib.util
import json

import pytest

from autotune.catalog.models import load_model
from autotune.kernels import moe_configs as mc
from autotune.kernels.moe_tune import PRUNE_FACTOR, QUICK_ITERS, TuneRequest, build_request, describe, tune_batch

NO_TRITON = importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None
SHAPE = mc.MoeShape("vllm", 8, 64, 128, 2, "bf16")
# Two BLOCK_SIZE_K x two BLOCK_SIZE_N: (16 + 64) x 256 x 3 stages x 2 B = 122,880 B > sm_89's 101,376 B, the other
# three fit. Keys in SPACE order.
TINY_SPACE = {
    "BLOCK_SIZE_M": (16,),
    "BLOCK_SIZE_N": (32, 64),
    "BLOCK_SIZE_K": (64, 256),
    "GROUP_SIZE_M": (1,),
    "num_warps": (4,),
    "num_stages": (3,),
}


def test_slow_and_oversized_configs_are_pruned_and_the_fastest_wins():
    calls = []

    def measure(config, batch, iters):
        calls.append((config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"], iters))
        fast = config["BLOCK_SIZE_N"] == 32 and config["BLOCK_SIZE_K"] == 256
        slow = config["BLOCK_SIZE_N"] == 64
        us = 10.0 if fast else 100.0 if slow else 14.0
        return {"total_us": us}

    default = {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 3,
    }
    r = tune_batch(SHAPE, "sm_89", 8, measure, default, trials=10, space=TINY_SPACE)
    assert (r.config["BLOCK_SIZE_N"], r.config["BLOCK_SIZE_K"]) == (32, 256) and r.timing["total_us"] == 10.0
    assert (64, 256, QUICK_ITERS) not in calls  # over the shared-memory limit: never launched
    full = [c for c in calls if c[2] != QUICK_ITERS]
    # the 100 us config is timed in full only if it came before anything PRUNE_FACTOR faster
    slow_full = [c for c in full if c[0] == 64]
    first_fast = next(i for i, c in enumerate(calls) if c[0] == 32)
    assert not slow_full or calls.index(slow_full[0]) < first_fast
    assert r.default_timing["total_us"] == 14.0 and r.measured + r.pruned >= 3
    assert PRUNE_FACTOR * 10.0 < 100.0


def test_launch_failures_are_pruned_not_fatal():
    class OutOfResources(Exception):
        pass

    def measure(config, batch, iters):
        if config["BLOCK_SIZE_K"] == 64:
            raise OutOfResources("out of resource: shared memory")
        return {"total_us": 5.0}

    r = tune_batch(
        SHAPE, "sm_90", 8, measure, {**dict.fromkeys(mc.SPACE, 1), "BLOCK_SIZE_K": 256}, trials=4, space=TINY_SPACE
    )
    assert r.config["BLOCK_SIZE_K"] == 256 and r.pruned >= 1


@pytest.mark.skipif(NO_TRITON, reason="needs the gpu extra (torch, triton)")
def test_tiny_tuning_run_under_the_interpreter_writes_both_engines_files(tmp_path):
    """On CUDA when present (compiled kernel, GPU times), else Triton's CPU interpreter (times only rank)."""
    import torch

    from autotune.kernels.moe_tune import make_measure, write_files

    device = "cuda" if torch.cuda.is_available() else "cpu"

    results = {}
    for engine in ("vllm", "sglang"):
        shape = mc.MoeShape(engine, 4, 64, 128, 2, "bf16")
        measure, default_of, source = make_measure(shape, device, use_engine=False)
        assert "mi-tune kernels/fused_moe.py" in source and ("interpreter" in source) == (device == "cpu")
        results[engine] = (
            [tune_batch(shape, "sm_89", b, measure, default_of(b), trials=3, space=TINY_SPACE) for b in (1, 4)]
            if engine == "vllm"
            else results["vllm"]
        )
        req = TuneRequest(
            model=None,
            tp=1,
            ep=1,
            dtype="bf16",
            engines=(engine,),
            out_dir=tmp_path,
            device=device,
            device_name="NVIDIA L40S",
            arch="sm_89",
            triton_version="3.9.0",
        )
        paths = write_files(req, shape, results[engine], source)
        files = {p.name: json.loads(p.read_text()) for p in paths}
        config_doc = files[mc.config_file_name(shape, "NVIDIA L40S")]
        assert set(config_doc) - {"triton_version"} == {"1", "4"}
        for batch_config in (v for k, v in config_doc.items() if k != "triton_version"):
            assert set(batch_config) == set(mc.CONFIG_KEYS)
            assert not mc.violations(batch_config, shape, "sm_89", 1)
        sidecar = files[mc.sidecar_path(paths[0]).name]
        assert sidecar["schema"] == mc.SIDECAR_SCHEMA and sidecar["shape"]["E"] == 4
        row = sidecar["batches"]["4"]
        assert row["time_us"] == pytest.approx(row["up_us"] + row["down_us"]) and row["time_us"] > 0
        assert row["measured"] >= 1 and row["pruned"] >= 1  # the 122,880 B config never ran
    assert (tmp_path / "sglang/configs/triton_3_9_0" / mc.config_file_name(shape, "NVIDIA L40S", down=True)).exists()


def test_request_and_dry_run_text_without_a_gpu():
    req, notes = build_request("qwen3-235b-a22b", 8, dtype="fp8_w8a8", preset="l40s-x8", batch_sizes=(1, 256))
    assert (req.device_name, req.arch) == ("NVIDIA L40S", "sm_89") and notes
    text = describe(req)
    assert "E=128,N=192,device_name=NVIDIA_L40S,dtype=fp8_w8a8.json" in text
    assert "VLLM_TUNED_CONFIG_FOLDER=moe_configs/vllm" in text and "SGLANG_MOE_CONFIG_DIR=moe_configs/sglang" in text
    assert f"<= {99 * 1024} B (sm_89)" in text
    assert load_model("qwen3-235b-a22b").num_experts == 128
