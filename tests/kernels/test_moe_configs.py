"""Config names, shapes and the config space of the fused-MoE files (pure: no torch, no engine)."""

import json

import pytest

from autotune.catalog.models import load_model
from autotune.kernels import moe_configs as mc
from autotune.specs.errors import MiTuneError

# Names of files the engines ship (vllm 0.34.0 model_executor/layers/fused_moe/configs/, sglang 0.5.23
# srt/layers/moe/moe_runner/triton_utils/configs/triton_3_*/), with the shape and GPU they were tuned for.
# These are data (what the engines' lookup must find), so naming mistakes here cannot be "fixed" in both places.
SHIPPED = [
    (
        "vllm",
        dict(E=128, N=384, dtype="fp8_w8a8", block=(128, 128)),
        "NVIDIA H20",
        "E=128,N=384,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128,128].json",
    ),
    (
        "vllm",
        dict(E=128, N=192, dtype="bf16", block=None),
        "NVIDIA A100-SXM4-80GB",
        "E=128,N=192,device_name=NVIDIA_A100-SXM4-80GB.json",
    ),
    (
        "vllm",
        dict(E=128, N=192, dtype="fp8_w8a8", block=None),
        "NVIDIA H800",
        "E=128,N=192,device_name=NVIDIA_H800,dtype=fp8_w8a8.json",
    ),
    (
        "vllm",
        dict(E=128, N=384, dtype="bf16", block=None),
        "NVIDIA H100 80GB HBM3",
        "E=128,N=384,device_name=NVIDIA_H100_80GB_HBM3.json",
    ),
    (
        "vllm",
        dict(E=128, N=384, dtype="bf16", block=None),
        "Intel(R) Arc(TM) Pro B70 Graphics",
        "E=128,N=384,device_name=Intel(R)_Arc(TM)_Pro_B70_Graphics.json",
    ),
    (
        "sglang",
        dict(E=257, N=256, dtype="fp8_w8a8", block=(128, 128)),
        "NVIDIA B200",
        "E=257,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json",
    ),
    (
        "sglang",
        dict(E=128, N=1024, dtype="fp8_w8a8", block=None),
        "NVIDIA H100 80GB HBM3",
        "E=128,N=1024,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8_down.json",
    ),
    (
        "sglang",
        dict(E=161, N=192, dtype="fp8_w8a8", block=None, per_channel=True),
        "NVIDIA H200",
        "E=161,N=192,device_name=NVIDIA_H200,dtype=fp8_w8a8,per_channel_quant=True.json",
    ),
    (
        "sglang",
        dict(E=64, N=896, dtype="bf16", block=None),
        "Intel(R) Arc(TM) Pro B60 Graphics",
        "E=64,N=896,device_name=Intel(R)_Arc(TM)_Pro_B60_Graphics_down.json",
    ),
]


@pytest.mark.parametrize(("engine", "shape", "device", "name"), SHIPPED)
def test_names_match_files_the_engines_ship(engine, shape, device, name):
    s = mc.MoeShape(
        engine,
        shape["E"],
        shape["N"],
        7168,
        8,
        shape["dtype"],
        shape["block"],
        per_channel_quant=shape.get("per_channel", False),
    )
    assert mc.config_file_name(s, device, down=name.endswith("_down.json")) == name


def test_vllm_renames_the_h200_family_and_sglang_does_not():
    shape = dict(num_experts=8, shard_n=64, hidden=128, topk=2, dtype="bf16")
    assert "device_name=NVIDIA_H200.json" in mc.config_file_name(mc.MoeShape("vllm", **shape), "NVIDIA H200 NVL")
    assert "device_name=NVIDIA_H200_NVL.json" in mc.config_file_name(mc.MoeShape("sglang", **shape), "NVIDIA H200 NVL")
    # vLLM collapses runs of whitespace and '/', SGLang replaces single spaces only
    assert mc.device_file_name("A  B/C", "vllm") == "A_B_C"
    assert mc.device_file_name("A  B/C", "sglang") == "A__B/C"


def test_paths_follow_each_engines_folder_layout(tmp_path):
    s = mc.MoeShape("sglang", 8, 64, 128, 2, "bf16")
    assert mc.config_path(tmp_path, s, "NVIDIA L40S", "3.9.0").parent == tmp_path / "sglang/configs/triton_3_9_0"
    v = mc.MoeShape("vllm", 8, 64, 128, 2, "bf16")
    assert mc.config_path(tmp_path, v, "NVIDIA L40S", "3.9.0").parent == tmp_path / "vllm"


def test_qwen3_shapes_from_the_catalog_and_layout():
    model = load_model("qwen3-235b-a22b")
    tp8 = mc.moe_shape(model, engine="vllm", tp=8, dtype="fp8_w8a8")
    assert (tp8.num_experts, tp8.shard_n, tp8.hidden, tp8.topk) == (128, 192, 4096, 8)
    assert tp8.block_shape is None and mc.default_block_shape(model, "fp8_w8a8") is None  # bf16 checkpoint
    ep8 = mc.moe_shape(model, engine="sglang", tp=8, ep=8)
    assert (ep8.num_experts, ep8.shard_n) == (16, 1536)
    tp4 = mc.moe_shape(model, engine="vllm", tp=4)
    assert tp4.shard_n == 384


def test_sglang_fuses_deepseek_v3s_shared_expert_only_without_ep():
    model = load_model("deepseek-v3")
    assert mc.default_block_shape(model, "fp8_w8a8") == (128, 128)
    sg = mc.moe_shape(model, engine="sglang", tp=8, dtype="fp8_w8a8", block_shape=(128, 128))
    vl = mc.moe_shape(model, engine="vllm", tp=8, dtype="fp8_w8a8", block_shape=(128, 128))
    assert (sg.num_experts, sg.topk, sg.fused_shared_experts) == (257, 9, 1)
    assert (vl.num_experts, vl.topk, vl.shard_n) == (256, 8, 256)
    assert mc.moe_shape(model, engine="sglang", tp=8, ep=8, dtype="fp8_w8a8").num_experts == 32  # no fusion with EP
    assert mc.moe_shape(model, engine="sglang", tp=8, compute_capability=7.5).num_experts == 256  # sm < 80
    glm = mc.moe_shape(load_model("glm-5"), engine="sglang", tp=8)
    assert glm.num_experts == 257
    assert mc.moe_shape(load_model("qwen3-235b-a22b"), engine="sglang", tp=8).fused_shared_experts == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(model="llama-3.1-70b", tp=8), "not a MoE model"),
        (dict(model="qwen3-235b-a22b", tp=8, ep=3), "tp a multiple of ep"),
        (dict(model="qwen3-235b-a22b", tp=6, ep=6), "not divisible by 6"),
        (dict(model="qwen3-235b-a22b", tp=8, dtype="fp4"), "--dtype"),
        (dict(model="qwen3-235b-a22b", tp=8, engine="trtllm"), "--engine"),
    ],
)
def test_bad_layouts_name_the_flag(kwargs, message):
    kwargs = {"engine": "vllm", **kwargs}
    with pytest.raises(MiTuneError, match=message):
        mc.moe_shape(load_model(kwargs.pop("model")), **kwargs)


def test_shared_memory_limit_drops_configs_per_architecture():
    shape = mc.MoeShape("vllm", 128, 192, 4096, 8, "bf16")
    big = {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 8,
        "num_stages": 4,
    }
    assert mc.smem_bytes(big, "bf16") == (64 + 128) * 128 * 4 * 2 == 196608
    assert mc.smem_bytes(big, "fp8_w8a8") == 98304
    assert any("shared memory" in v for v in mc.violations(big, shape, "sm_89", 4096))  # 99 KB
    assert not mc.violations(big, shape, "sm_90", 4096)  # 227 KB
    for arch in ("sm_89", "sm_90", "sm_120"):
        kept = mc.candidates(shape, arch, 4096)
        assert kept and all(mc.smem_bytes(c, "bf16") <= mc.SMEM_LIMIT_BYTES[arch] for c in kept)
    assert len(mc.candidates(shape, "sm_89", 4096)) < len(mc.candidates(shape, "sm_90", 4096))
    with pytest.raises(MiTuneError, match="no shared-memory limit known"):
        mc.smem_limit("gfx942")


def test_block_fp8_tiles_must_divide_the_scale_block_and_small_batches_cap_block_m():
    shape = mc.MoeShape("vllm", 256, 256, 7168, 8, "fp8_w8a8", (128, 128))
    for c in mc.candidates(shape, "sm_90", 64):
        assert 128 % c["BLOCK_SIZE_K"] == 0 and 128 % c["BLOCK_SIZE_N"] == 0
        assert c["BLOCK_SIZE_M"] <= 64
    assert {c["BLOCK_SIZE_M"] for c in mc.candidates(shape, "sm_90", 1)} == {16}


def test_documents_are_what_each_engine_parses():
    best = {64: dict.fromkeys(mc.CONFIG_KEYS, 16), 1: dict.fromkeys(mc.CONFIG_KEYS, 32)}
    vllm = mc.config_document(best, "vllm", "3.9.0")
    sglang = mc.config_document(best, "sglang", "3.9.0")
    assert vllm.pop("triton_version") == "3.9.0"  # vLLM pops this key before int() on the rest
    assert vllm == sglang and list(sglang) == ["1", "64"]
    assert all(isinstance(int(k), int) for k in sglang)  # SGLang int()s every key
    assert json.loads(json.dumps(sglang))["64"]["num_stages"] == 16


def test_nearest_batch_is_the_engines_pick():
    table = {1: "a", 16: "b", 64: "c"}
    assert [mc.nearest(table, m) for m in (1, 8, 9, 40, 41, 4096)] == ["a", "a", "b", "b", "c", "c"]


def test_sidecar_reader_names_the_file(tmp_path):
    bad = tmp_path / "x.mi-tune.json"
    bad.write_text('{"schema": "other"}')
    with pytest.raises(MiTuneError, match=r"x\.mi-tune\.json: not a tune-moe benchmark"):
        mc.read_sidecar(bad)
    bad.write_text("{")
    with pytest.raises(MiTuneError, match="cannot read"):
        mc.read_sidecar(bad)
