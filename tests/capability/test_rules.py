"""Each capability rule against a recorded case from the engines' source (shared/reference/engine-knobs.md):
a plan the engine refuses is refused here, and the nearest plan it accepts is accepted."""

import dataclasses

import pytest

from autotune import capability
from autotune.catalog import load_model, load_preset
from autotune.search import SearchRequest, load_space
from autotune.search.study import study_choices
from autotune.specs import Batching, Comm, Kernels, MiTuneError, Overlap, PhasePlan, Plan, Speculative, Workload


def box(name: str, arch: str | None = None):
    hw = load_preset(name)
    if arch:
        hw = dataclasses.replace(hw, accelerators=tuple(dataclasses.replace(a, arch=arch) for a in hw.accelerators))
    return hw


def plan(engine: str, gpus: int = 8, **fields) -> Plan:
    tp = fields.pop("tp", gpus // fields.get("dp", 1) // fields.get("pp", 1))
    dp = fields.get("dp", 1)
    fields.setdefault("dp_attention", dp > 1)
    fields.setdefault("replicas", gpus // (tp * dp * fields.get("pp", 1)))
    return Plan(engine=engine, mode="aggregated", phases={"both": PhasePlan(gpus=tuple(range(gpus)), tp=tp, **fields)})


def refused(p: Plan, model: str, hw) -> str:
    return capability.check_plan(p, load_model(model), hw)


CASES = [
    # (engine, model, box, plan fields, refused?, words in the reason)
    ("vllm", "deepseek-v3", box("h200-x8"), {"kernels": Kernels(attention="flashinfer")}, True, "FLASHINFER_MLA"),
    ("vllm", "deepseek-v3", box("h200-x8", "sm_100"), {"kernels": Kernels(attention="flashinfer")}, False, ""),
    # vLLM CUTLASS MoE: only online per-channel FP8 (quantization/online/fp8.py:826-848), never what mi-tune emits
    ("vllm", "deepseek-v3", box("h200-x8"), {"kernels": Kernels(moe="cutlass")}, True, "checkpoint FP8"),
    (
        "vllm",
        "qwen3-235b-a22b",
        box("h200-x8"),
        {"kernels": Kernels(moe="cutlass", gemm_dtype="fp8")},
        True,
        "per-tensor",
    ),
    ("vllm", "qwen3-235b-a22b", box("rtx-pro-6000-x8"), {"kernels": Kernels(moe="marlin")}, True, "bf16 experts"),
    ("vllm", "qwen3-235b-a22b", box("h200-x8"), {"kernels": Kernels(moe="flashinfer_cutlass")}, False, ""),
    ("vllm", "deepseek-v3", box("rtx-pro-6000-x8"), {"kernels": Kernels(moe="flashinfer_cutlass")}, True, "cc 9.0"),
    ("vllm", "deepseek-v3", box("rtx-pro-6000-x8"), {"kernels": Kernels(moe="deep_gemm")}, False, ""),
    ("vllm", "deepseek-v3", box("l40s-x8"), {"kernels": Kernels(moe="deep_gemm")}, True, "DeepGEMM"),
    ("vllm", "deepseek-v3", box("rtx-pro-6000-x8"), {"kernels": Kernels(moe="marlin")}, False, ""),
    # FP8 experts on an A100 (sm80-25): Triton refuses FP8 below cc 8.9; Marlin (W8A16) takes them
    ("vllm", "deepseek-v3", box("a100-pcie-x8"), {"kernels": Kernels(moe="triton")}, True, "cc >= 8.9"),
    ("vllm", "deepseek-v3", box("a100-pcie-x8"), {"kernels": Kernels(moe="marlin")}, False, ""),
    ("vllm", "deepseek-v3", box("l40s-x8"), {"kernels": Kernels(moe="triton")}, False, ""),
    ("vllm", "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), {"kernels": Kernels(moe="b12x")}, False, ""),
    ("vllm", "deepseek-v4.1-flash", box("h200-x8"), {"kernels": Kernels(moe="b12x")}, True, "SM120"),
    ("vllm", "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), {"kernels": Kernels(attention="triton")}, True, "sparse"),
    ("vllm", "deepseek-v4.1-flash", box("l40s-x8"), {}, True, "compute capability 9.0"),
    ("vllm", "glm-5", box("rtx-4090-x8"), {}, True, "compute capability 9.0"),
    ("vllm", "deepseek-v3", box("h200-x8"), {"dp": 8, "ep": 8, "overlap": Overlap(two_batch=True)}, True, "DeepEP"),
    ("vllm", "deepseek-v3", box("h200-x8"), {"tp": 8, "ep": 8, "comm": Comm(all2all="deepep")}, True, "dp > 1"),
    (
        "vllm",
        "deepseek-v3",
        box("h200-x8"),
        {"dp": 8, "ep": 8, "comm": Comm(all2all="deepep"), "overlap": Overlap(two_batch=True)},
        False,
        "",
    ),
    (
        "vllm",
        "deepseek-v4.1-flash",
        box("h200-x8"),
        {"dp": 8, "ep": 8, "comm": Comm(all2all="deepep"), "overlap": Overlap(two_batch=True)},
        True,
        "V4.1",
    ),
    ("vllm", "llama-3.1-70b", box("rtx-pro-6000-x8"), {"comm": Comm(allreduce="pcie_ipc")}, False, ""),
    ("vllm", "llama-3.1-70b", box("h200-x8"), {"comm": Comm(allreduce="pcie_ipc")}, True, "PCIe"),
    ("vllm", "llama-3.1-70b", box("rtx-4090-x8"), {"comm": Comm(allreduce="pcie_ipc")}, True, "P2P"),
    ("vllm", "llama-3.1-70b", box("rtx-pro-6000-x8"), {"fusion": {"allreduce_rmsnorm": True}}, True, "cc 9.0/10.x"),
    ("vllm", "llama-3.1-70b", box("h200-x8"), {"fusion": {"allreduce_rmsnorm": True}}, False, ""),
    ("vllm", "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), {"speculative": Speculative("mtp", 1)}, True, "DSpark"),
    ("vllm", "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), {"speculative": Speculative("dspark", 5)}, False, ""),
    ("vllm", "deepseek-v3", box("h200-x8"), {"speculative": Speculative("mtp", 2)}, False, ""),
    ("vllm", "qwen3-235b-a22b", box("h200-x8"), {"speculative": Speculative("mtp", 1)}, True, "MTP layers"),
    ("vllm", "deepseek-v3", box("h200-x8"), {"dcp": 2}, False, ""),
    ("vllm", "deepseek-v3", box("h200-x8"), {"dcp": 2, "kernels": Kernels(attention="flashinfer")}, True, ""),
    # bf16 experts support EPLB (unquantized_fused_moe_method.py:64-66)
    ("vllm", "qwen3-235b-a22b", box("h200-x8"), {"eplb": True, "ep": 8}, False, ""),
    ("vllm", "deepseek-v3", box("h200-x8"), {"eplb": True, "ep": 8}, False, ""),
    ("vllm", "deepseek-v3", box("h200-x8"), {"eplb": True}, True, "expert parallelism"),
    ("vllm", "glm-5", box("h200-x8"), {"fusion": {"allreduce_rmsnorm": True}}, True, "torch.compile"),
    (
        "vllm",
        "llama-3.1-70b",
        box("h200-x8"),
        {"batching": Batching(max_running=1024, chunked_prefill_tokens=512)},
        True,
        ">= max_num_seqs",
    ),
    ("vllm", "deepseek-v3", box("h200-x8"), {"dp": 2, "tp": 4, "dense_dp": True}, True, "vLLM has no"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"kernels": Kernels(moe="cutlass")}, False, ""),
    ("sglang", "deepseek-v3", box("h200-x8"), {"ep": 8, "kernels": Kernels(moe="cutlass")}, True, "ep_size == 1"),
    ("sglang", "qwen3-235b-a22b", box("h200-x8"), {"kernels": Kernels(moe="cutlass", gemm_dtype="fp8")}, True, "block"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"kernels": Kernels(moe="marlin")}, True, "FP4-expert"),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"kernels": Kernels(moe="marlin")}, False, ""),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"tp": 4, "pp": 2}, True, "pipeline"),
    ("sglang", "deepseek-v4-flash", box("rtx-pro-6000-x8"), {"tp": 4, "pp": 2}, False, ""),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"dp": 8, "overlap": Overlap(two_batch=True)}, True, "V4.1"),
    ("sglang", "qwen3-235b-a22b", box("h200-x8"), {"tp": 8, "overlap": Overlap(two_batch=True)}, True, "DP attention"),
    ("sglang", "qwen3-235b-a22b", box("h200-x8"), {"tp": 2, "dp": 4, "overlap": Overlap(two_batch=True)}, True, "Deep"),
    ("sglang", "deepseek-v4.1-flash", box("l40s-x8"), {}, True, "compute capability 9.0"),
    # V4.1's candidate indexer: DeepGEMM paged sparse MQA logits on SM100 only (v41_indexer/__init__.py:99-110)
    ("sglang", "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), {}, True, "candidate indexer"),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8", "sm_120"), {"tp": 4, "dp": 2}, True, "compute capability 11 / 12"),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {}, False, ""),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8", "sm_100"), {}, False, ""),
    ("sglang", "deepseek-v4-flash", box("rtx-pro-6000-x8"), {}, False, ""),
    ("sglang", "llama-3.1-70b", box("rtx-pro-6000-x8"), {"tp": 2, "comm": Comm(allreduce="pcie_ipc")}, True, "custom"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"kernels": Kernels(moe="flashinfer_cutlass")}, True, "ModelOpt"),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"speculative": Speculative("dspark", 5)}, False, ""),
    (
        "sglang",
        "deepseek-v4.1-flash",
        box("h200-x8"),
        {"tp": 2, "dp": 4, "speculative": Speculative("dspark", 5)},
        True,
        "dp-lm-head",
    ),
    ("sglang", "llama-3.1-70b", box("rtx-pro-6000-x8"), {"comm": Comm(allreduce="pcie_ipc")}, False, ""),
    ("sglang", "deepseek-v3", box("h200-x8"), {"tp": 4, "dp": 2, "dp_lm_head": True, "dense_dp": True}, False, ""),
    ("sglang", "deepseek-v3", box("h200-x8"), {"dp_lm_head": True}, True, "DP attention"),
    # one case more for each remaining rule (test_every_rule_has_a_recorded_case keeps it so)
    ("vllm", "deepseek-v4.1-flash", box("h200-x8"), {"kernels": Kernels(moe="deep_gemm")}, True, "SM100 or SM120"),
    (
        "vllm",
        "qwen3-235b-a22b",
        box("h200-x8"),
        {"kernels": Kernels("auto", "flashinfer_cutlass", "fp8")},
        True,
        "online",
    ),
    ("vllm", "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), {"kernels": Kernels(moe="flashinfer_mxfp4")}, True, "name"),
    ("vllm", "llama-3.1-70b", box("rtx-pro-6000-x8"), {"kernels": Kernels(linear="cutlass")}, True, "FP8 GEMM"),
    ("vllm", "deepseek-v3", box("h200-x8", "sm_80"), {"kernels": Kernels(linear="cutlass")}, True, ">= 8.9"),
    ("vllm", "deepseek-v3", box("h200-x8"), {"speculative": Speculative("dspark", 5)}, True, "DSpark head"),
    ("vllm", "deepseek-v3", box("h200-x8"), {"tp": 4, "dp": 2, "dp_lm_head": True}, True, "no DP LM head"),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"kernels": Kernels(attention="triton")}, True, "dsv4"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"kernels": Kernels(moe="flashinfer_mxfp4")}, True, "MXFP4 experts"),
    ("sglang", "qwen3-235b-a22b", box("h200-x8"), {"kernels": Kernels(moe="deep_gemm")}, True, "block-FP8"),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"kernels": Kernels(moe="triton")}, True, "FP8 experts"),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"kernels": Kernels(moe="b12x")}, True, "no b12x"),
    ("sglang", "llama-3.1-70b", box("rtx-pro-6000-x8"), {"kernels": Kernels(linear="cutlass")}, True, "FP8 linear"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"kernels": Kernels(linear="cutlass")}, True, "off SM120"),
    ("sglang", "deepseek-v3", box("rtx-pro-6000-x8"), {"kernels": Kernels(linear="cutlass")}, False, ""),
    (
        "sglang",
        "deepseek-v3",
        box("rtx-pro-6000-x8"),
        {"dp": 8, "ep": 8, "comm": Comm(all2all="deepep")},
        True,
        "NVLink",
    ),
    (
        "sglang",
        "deepseek-v4-flash",
        box("h200-x8"),
        {"dp": 8, "ep": 8, "comm": Comm(all2all="deepep"), "overlap": Overlap(two_batch=True)},
        True,
        "EXTEND",
    ),
    ("sglang", "llama-3.1-70b", box("rtx-pro-6000-x8"), {"fusion": {"allreduce_rmsnorm": True}}, True, "SM90/SM10x"),
    ("sglang", "llama-3.1-70b", box("h200-x8"), {"fusion": {"allreduce_rmsnorm": True}}, True, "architectures SGLang"),
    ("sglang", "qwen3-235b-a22b", box("h200-x8"), {"fusion": {"allreduce_rmsnorm": True}}, False, ""),
    (
        "sglang",
        "deepseek-v4.1-flash",
        box("h200-x8", arch="sm_100"),
        {"tp": 4, "fusion": {"allreduce_rmsnorm": True}},
        True,
        "push plane",
    ),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"tp": 4, "fusion": {"allreduce_rmsnorm": True}}, False, ""),
    (  # --disable-custom-all-reduce lifts the V4.1 push-plane exception (arg_groups/overrides.py:978-986)
        "sglang",
        "deepseek-v4.1-flash",
        box("h200-x8", arch="sm_100"),
        {"tp": 4, "fusion": {"allreduce_rmsnorm": True}, "comm": Comm(allreduce="nccl")},
        False,
        "",
    ),
    ("sglang", "deepseek-v4.1-flash", box("h200-x8"), {"speculative": Speculative("mtp", 1)}, True, "DSPARK"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"speculative": Speculative("dspark", 5)}, True, "DSpark head"),
    ("sglang", "llama-3.1-70b", box("h200-x8"), {"dcp": 2}, True, "MLA latent KV"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"dense_dp": True}, True, "DP attention"),
    ("sglang", "deepseek-v3", box("h200-x8"), {"eplb": True}, True, "expert parallelism"),
    # hybrid linear-attention families (issue 19)
    ("vllm", "glm-5.3-flash", box("rtx-4090-x8"), {}, True, "compute capability 9.0"),
    ("vllm", "glm-5.3-flash", box("rtx-pro-6000-x8"), {}, False, ""),
    ("vllm", "glm-5.3-flash", box("h200-x8"), {"pp": 2}, True, "pipeline parallelism is not supported"),
    ("vllm", "qwen3.5-397b-a17b", box("h200-x8"), {"pp": 2}, False, ""),
    ("vllm", "qwen3.5-397b-a17b", box("h200-x8"), {"fusion": {"allreduce_rmsnorm": True}}, True, "breakable CUDA"),
    ("vllm", "qwen3.5-397b-a17b", box("h200-x8"), {"kernels": Kernels(attention="flashinfer")}, True, "own"),
    ("vllm", "qwen3.5-397b-a17b", box("h200-x8"), {"speculative": Speculative("mtp", 2)}, False, ""),
    ("sglang", "glm-5.3-flash", box("rtx-4090-x8"), {}, True, "compute capability 9.0"),
    ("sglang", "glm-5.3-flash", box("h200-x8"), {"pp": 2, "speculative": Speculative("mtp", 1)}, True, "NEXTN"),
    ("sglang", "qwen3.5-35b-a3b", box("h200-x8"), {"overlap": Overlap(two_batch=True), "dp": 8, "ep": 8}, True, ""),
]
# Rules no whole PhasePlan can break (PhasePlan itself refuses tp % dcp != 0): they act while a plan is sampled

# ---- vendors (capability/vendors.py) and vLLM-Ascend 0.23.0.post1 (capability/vllm_ascend_0_23_0.py)
A2, DUO, Q3 = box("atlas-800i-a2"), box("atlas-300i-duo-x4"), "qwen3-235b-a22b-w8a8"
PLATFORM = {
    "graph_mode": "FULL_DECODE_ONLY",
    "flashcomm1": "on",
    "weight_nz": "all",
    "multistream_shared_expert": "on",
    "hccl_op_expansion": "AIV",
    "hccl_buffsize_mb": "512",
}
CASES += [
    ("vllm", "qwen3-235b-a22b", A2, {}, True, "runs on nvidia accelerators only"),
    ("sglang", "qwen3-235b-a22b", A2, {}, True, "runs on nvidia accelerators only"),
    ("vllm-ascend", "qwen3-235b-a22b", box("h200-x8"), {}, True, "runs on huawei accelerators only"),
    ("vllm-ascend", Q3, A2, {}, False, ""),
    ("vllm", Q3, box("h200-x8"), {}, True, "loads only through vllm-ascend"),
    ("sglang", Q3, box("h200-x8"), {}, True, "loads only through vllm-ascend"),
    *(
        (engine, "deepseek-v3", box("h200-x8"), {"platform": {name: value}}, True, f"platform option {name}")
        for engine in ("vllm", "sglang")
        for name, value in PLATFORM.items()
    ),
    ("vllm-ascend", "deepseek-v3", A2, {"platform": dict(PLATFORM)}, False, ""),
    ("vllm-ascend", "deepseek-v3", DUO, {}, True, "310P runs neither MLA"),
    ("vllm-ascend", "llama-3.1-70b", DUO, {}, False, ""),
    ("vllm-ascend", Q3, A2, {"kernels": Kernels(attention="triton")}, True, "its own attention backend"),
    ("vllm-ascend", Q3, A2, {"kernels": Kernels(moe="triton")}, True, "CUDA MoE kernels"),
    ("vllm-ascend", Q3, A2, {"kernels": Kernels(linear="cutlass")}, True, "CUDA GEMM"),
    ("vllm-ascend", Q3, A2, {"comm": Comm(allreduce="pcie_ipc")}, True, "HCCL"),
    ("vllm-ascend", Q3, A2, {"comm": Comm(allreduce="nccl")}, True, "HCCL"),
    ("vllm-ascend", Q3, A2, {"tp": 1, "dp": 8, "ep": 8, "comm": Comm(all2all="deepep")}, True, "DeepEP"),
    ("vllm-ascend", Q3, A2, {"tp": 1, "dp": 8, "ep": 8, "overlap": Overlap(two_batch=True)}, True, "dbo"),
    ("vllm-ascend", Q3, A2, {"tp": 1, "dp": 8, "ep": 8, "eplb": True}, True, "EPLB"),
    ("vllm-ascend", Q3, A2, {"speculative": Speculative("mtp", 1)}, True, "MTP layers"),
    ("vllm-ascend", "deepseek-v3", A2, {"speculative": Speculative("mtp", 1)}, False, ""),
    ("vllm-ascend", "deepseek-v4.1-flash", A2, {"speculative": Speculative("dspark", 5)}, True, "DSpark"),
    ("vllm-ascend", Q3, A2, {"dcp": 2}, True, "MLA models"),
    ("vllm-ascend", "deepseek-v3", A2, {"dcp": 2}, False, ""),
    ("vllm-ascend", Q3, A2, {"batching": Batching(max_running=1024, chunked_prefill_tokens=512)}, True, ">= max"),
    # decode CUDA graphs above max_num_seqs are never captured (vLLM), and vllm-ascend takes no capture size
    ("vllm", "llama-3.1-70b", box("h200-x8"), {"batching": Batching(64, 8192, 256)}, True, "max_num_seqs at"),
    ("vllm", "llama-3.1-70b", box("h200-x8"), {"batching": Batching(256, 8192, 256)}, False, ""),
    ("vllm-ascend", Q3, A2, {"batching": Batching(cuda_graph_max_bs=128)}, True, "own graph mode"),
    ("vllm-ascend", Q3, A2, {"tp": 1, "replicas": 8, "platform": {"flashcomm1": "on"}}, True, "TP group"),
    ("vllm-ascend", Q3, A2, {"platform": {"multistream_shared_expert": "on"}}, True, "shared experts"),
    *(
        ("vllm-ascend", Q3, A2, {"comm": Comm(nccl={name: value})}, True, "NCCL variables")
        for name, value in (("NCCL_PROTO", "LL"), ("NCCL_MIN_NCHANNELS", "8"), ("NCCL_P2P_LEVEL", "SYS"))
    ),
    ("vllm-ascend", Q3, A2, {"tp": 1, "dp": 8, "ep": 8, "dense_dp": True}, True, "dense MLP"),
    ("vllm-ascend", Q3, A2, {"tp": 1, "dp": 8, "ep": 8, "dp_lm_head": True}, True, "DP LM head"),
]

SAMPLING_ONLY = {("vllm", "dcp", "the decode context parallel size must divide the tensor parallel size")}
# rules only a disaggregated plan reaches (test_ascend_refuses_disaggregated_plans)
SAMPLING_ONLY |= {("vllm-ascend", "mode", "mi-tune emits aggregated vllm-ascend plans only")}


@pytest.mark.parametrize(("engine", "model", "hw", "fields", "is_refused", "words"), CASES)
def test_rule_on_recorded_case(engine, model, hw, fields, is_refused, words):
    reason = refused(plan(engine, **fields), model, hw)
    assert bool(reason) == is_refused, reason
    assert words in reason
    if reason:
        assert reason.endswith("]") and f"{engine} " in reason  # names the engine version and the source


def test_every_rule_cites_an_engine_source_and_says_why():
    for table in capability.TABLES.values():
        for rule in table.rules:
            assert rule.why and rule.effect in ("raises", "ignored")
            assert ".py" in rule.source or "flags/" in rule.source, rule


def test_a_model_no_engine_can_serve_is_one_line():
    req = SearchRequest(load_model("deepseek-v4.1-flash"), box("l40s-x8"), Workload(), load_space(), 8, engine="vllm")
    with pytest.raises(MiTuneError, match=r"^no engine can serve deepseek-v4\.1-flash on NVIDIA L40S: vllm 0\.34\.0"):
        study_choices(req)
    req = dataclasses.replace(req, model=load_model("deepseek-v3"), engine="auto")
    assert study_choices(req)["engine"] == ("sglang", "vllm")  # dense MLA runs on sm_89 (TRITON_MLA / triton)


def test_the_emitters_refuse_a_plan_that_breaks_a_rule():
    from autotune.engines import build_launch

    hw = box("rtx-pro-6000-x8")
    bad = plan("vllm", kernels=Kernels(attention="flashinfer"))
    with pytest.raises(MiTuneError, match="plan breaks an engine rule: .*FLASHINFER_MLA needs compute capability 10"):
        build_launch(bad, load_model("deepseek-v3"), hw)


def test_every_rule_has_a_recorded_case():
    from tests.capability.test_plan_rules import PAIRS  # rules over the whole plan (both phases, combinations)

    recorded = [(plan(engine, **fields), model, hw) for engine, model, hw, fields, _, _ in CASES]
    recorded += [(p, model, hw) for p, model, hw, _, _ in PAIRS]
    broken = set()
    for p, model, hw in recorded:
        for v in capability.plan_violations(p, load_model(model), hw):
            broken.add((p.engine, v.rule.field, v.rule.why))
    missing = [
        (table.engine, rule.field, rule.why)
        for table in capability.TABLES.values()
        for rule in table.rules
        if (table.engine, rule.field, rule.why) not in broken | SAMPLING_ONLY
    ]
    assert not missing, missing


def test_dcp_must_divide_tp_while_sampling():
    from autotune.search.admit import Admission

    admission = Admission(capability.box_facts(box("h200-x8"), load_model("deepseek-v3")))
    assert "must divide the tensor parallel size" in admission.refusal("vllm", "dcp", 4, {"tp": 2, "dp": 1})
    assert admission.refusal("vllm", "dcp", 2, {"tp": 2, "dp": 1}) == ""


def test_ascend_refuses_disaggregated_plans():
    phases = {"prefill": PhasePlan(gpus=(0, 1, 2, 3), tp=4), "decode": PhasePlan(gpus=(4, 5, 6, 7), tp=4)}
    reason = capability.check_plan(Plan("vllm-ascend", "disaggregated", phases), load_model("qwen3-235b-a22b-w8a8"), A2)
    assert "aggregated vllm-ascend plans only" in reason


def test_a_box_no_engine_serves_says_so_in_one_line():
    import dataclasses as dc

    hw = load_preset("atlas-800i-a2")
    mlu = dc.replace(
        hw, accelerators=tuple(dc.replace(a, vendor="cambricon", name="Cambricon MLU590") for a in hw.accelerators)
    )
    req = SearchRequest(load_model("qwen3-235b-a22b"), mlu, Workload(), load_space(), 8)
    with pytest.raises(MiTuneError) as err:
        study_choices(req)
    message = str(err.value)
    assert "cambricon accelerators are detected and modelled, but no engine" in message and "\n" not in message
