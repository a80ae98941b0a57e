"""Rules over the whole plan: combinations of dimensions within a phase and agreement between the two phases of
a disaggregated plan, each with a recorded refused/admitted pair read from the engines' source; and the same
rules applied while a plan is sampled (decode sees the prefill it must agree with)."""

import dataclasses

import pytest

from autotune import capability
from autotune.catalog import load_model, load_preset
from autotune.search.admit import Admission
from autotune.specs import Comm, Kernels, Overlap, PhasePlan, Plan, Speculative


def box(name: str, arch: str | None = None):
    hw = load_preset(name)
    if arch:
        hw = dataclasses.replace(hw, accelerators=tuple(dataclasses.replace(a, arch=arch) for a in hw.accelerators))
    return hw


def _phase(gpus: tuple[int, ...], fields: dict) -> PhasePlan:
    fields = dict(fields)
    dp, pp = fields.get("dp", 1), fields.get("pp", 1)
    tp = fields.pop("tp", len(gpus) // dp // pp)
    fields.setdefault("dp_attention", dp > 1)
    fields.setdefault("replicas", len(gpus) // (tp * dp * pp))
    return PhasePlan(gpus=gpus, tp=tp, **fields)


def agg(engine: str, **fields) -> Plan:
    return Plan(engine=engine, mode="aggregated", phases={"both": _phase(tuple(range(8)), fields)})


def disagg(engine: str, prefill: dict, decode: dict) -> Plan:
    phases = {"prefill": _phase((0, 1, 2, 3), prefill), "decode": _phase((4, 5, 6, 7), decode)}
    return Plan(engine=engine, mode="disaggregated", phases=phases)


FP8_KV = {"kernels": Kernels(kv_cache_dtype="fp8")}
MTP = {"speculative": Speculative("mtp", 2)}
DSPARK = {"speculative": Speculative("dspark", 5)}
DEEPEP_TBO = {"dp": 8, "ep": 8, "comm": Comm(all2all="deepep"), "overlap": Overlap(two_batch=True)}

# (plan, model, box, refused?, words in the reason)
PAIRS = [
    # ---- vLLM: NIXL hashes KV-cache dtype, attention backend and the hidden-state speculator of both sides
    (disagg("vllm", {}, FP8_KV), "llama-3.1-70b", box("h200-x8"), True, "same KV-cache dtype"),
    (disagg("vllm", FP8_KV, FP8_KV), "llama-3.1-70b", box("h200-x8"), False, ""),
    (
        disagg("vllm", {"kernels": Kernels(attention="triton")}, {}),
        "llama-3.1-70b",
        box("h200-x8"),
        True,
        "same attention backend",
    ),
    (
        disagg("vllm", {"kernels": Kernels(attention="triton")}, {"kernels": Kernels(attention="triton")}),
        "llama-3.1-70b",
        box("h200-x8"),
        False,
        "",
    ),
    (disagg("vllm", {}, MTP), "deepseek-v3", box("h200-x8"), True, "speculate alike"),
    (disagg("vllm", MTP, MTP), "deepseek-v3", box("h200-x8"), False, ""),
    # ---- vLLM b12x: no expert parallelism, no EPLB (fused_moe/b12x.py:536-545)
    (agg("vllm", ep=8, kernels=Kernels(moe="b12x")), "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), True, "b12x"),
    (agg("vllm", kernels=Kernels(moe="b12x")), "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), False, ""),
    # ---- vLLM --linear-backend: triton has a block-FP8 kernel only, cutlass no MXFP8 kernel
    (agg("vllm", kernels=Kernels(linear="triton", gemm_dtype="fp8")), "llama-3.1-70b", box("h200-x8"), True, "block"),
    (agg("vllm", kernels=Kernels(linear="triton")), "deepseek-v3", box("h200-x8"), False, ""),
    (agg("vllm", kernels=Kernels(linear="cutlass")), "deepseek-v4.1-flash", box("rtx-pro-6000-x8"), True, "MXFP8"),
    (agg("vllm", kernels=Kernels(linear="cutlass", gemm_dtype="fp8")), "llama-3.1-70b", box("h200-x8"), False, ""),
    # ---- vLLM GQA decode context parallelism: tp > KV heads, dcp <= tp / KV heads (config/model.py:1598-1628)
    (agg("vllm", dcp=2), "qwen3-235b-a22b", box("h200-x8"), False, ""),
    (agg("vllm", dcp=4), "qwen3-235b-a22b", box("h200-x8"), True, "tp > KV heads"),
    (agg("vllm", dcp=2), "llama-3.1-70b", box("h200-x8"), True, "tp > KV heads"),
    (agg("vllm", dcp=2, kernels=Kernels(attention="triton")), "qwen3-235b-a22b", box("h200-x8"), True, "FLASHINFER"),
    # ---- SGLang: two-batch overlap needs an all-to-all dispatcher, except DeepSeek-V4 prefill
    (agg("sglang", tp=1, dp=8, overlap=Overlap(two_batch=True)), "deepseek-v3", box("h200-x8"), True, "dispatcher"),
    (agg("sglang", **DEEPEP_TBO), "deepseek-v3", box("h200-x8"), False, ""),
    (
        disagg("sglang", {"tp": 1, "dp": 4, "overlap": Overlap(two_batch=True)}, {}),
        "deepseek-v4-flash",
        box("h200-x8"),
        False,
        "",
    ),
    # ---- SGLang: PP with NEXTN only on a prefill server (validation_hook.py:119-164)
    (agg("sglang", tp=4, pp=2, **MTP), "deepseek-v3", box("rtx-pro-6000-x8"), True, "prefill server"),
    (disagg("sglang", {"tp": 2, "pp": 2, **MTP}, MTP), "deepseek-v3", box("rtx-pro-6000-x8"), False, ""),
    (disagg("sglang", MTP, {"tp": 2, "pp": 2, **MTP}), "deepseek-v3", box("rtx-pro-6000-x8"), True, "prefill server"),
    # ---- SGLang PD: KV-cache dtype and speculation alike on both sides
    (disagg("sglang", FP8_KV, {}), "llama-3.1-70b", box("h200-x8"), True, "--kv-cache-dtype"),
    (disagg("sglang", FP8_KV, FP8_KV), "llama-3.1-70b", box("h200-x8"), False, ""),
    (disagg("sglang", {}, DSPARK), "deepseek-v4.1-flash", box("h200-x8"), True, "DSpark"),
    (disagg("sglang", DSPARK, DSPARK), "deepseek-v4.1-flash", box("h200-x8"), False, ""),
    (
        disagg("sglang", {"kernels": Kernels(attention="triton")}, {}),
        "llama-3.1-70b",
        box("h200-x8", "sm_100"),
        True,
        "pages the KV cache",
    ),
    (disagg("sglang", {"kernels": Kernels(attention="triton")}, {}), "llama-3.1-70b", box("h200-x8"), False, ""),
    # ---- SGLang --fp8-gemm-backend: read for block-FP8 layers only; cutlass raises off SM120
    (agg("sglang", kernels=Kernels(linear="triton", gemm_dtype="fp8")), "llama-3.1-70b", box("h200-x8"), True, "block"),
    (agg("sglang", kernels=Kernels(linear="triton")), "deepseek-v4.1-flash", box("h200-x8"), False, ""),
    (agg("sglang", kernels=Kernels(linear="cutlass")), "deepseek-v4.1-flash", box("h200-x8"), True, "32-block"),
    # ---- SGLang --moe-dense-tp-size 1 on a model with no dense MLP layer
    (agg("sglang", tp=4, dp=2, dense_dp=True), "qwen3-235b-a22b", box("h200-x8"), True, "has none"),
    (agg("sglang", tp=4, dp=2, dense_dp=True), "deepseek-v3", box("h200-x8"), False, ""),
    # ---- SGLang DCP on Hopper's default MLA backend (fa3): suspected
    (agg("sglang", dcp=2), "deepseek-v3", box("h200-x8"), True, "suspected"),
    (agg("sglang", dcp=2, kernels=Kernels(attention="triton")), "deepseek-v3", box("h200-x8"), False, ""),
]


@pytest.mark.parametrize(("plan", "model", "hw", "is_refused", "words"), PAIRS)
def test_whole_plan_rule_on_recorded_case(plan, model, hw, is_refused, words):
    reason = capability.check_plan(plan, load_model(model), hw)
    assert bool(reason) == is_refused, reason
    assert words in reason
    if plan.mode == "disaggregated" and reason:
        assert reason.startswith(("prefill: ", "decode: "))  # names the phase


def test_the_emitters_refuse_a_launch_whose_phases_disagree():
    from autotune.engines import build_launch
    from autotune.specs import MiTuneError

    bad = disagg("vllm", {}, MTP)
    with pytest.raises(MiTuneError, match="speculate alike"):
        build_launch(bad, load_model("deepseek-v3"), box("h200-x8"))
    launch = build_launch(disagg("vllm", MTP, MTP), load_model("deepseek-v3"), box("h200-x8"))
    servers = [p for p in launch.processes if p.role != "router"]
    assert all("--speculative-config" in p.argv for p in servers)


def test_decode_is_offered_only_what_matches_the_prefill():
    admission = Admission(capability.box_facts(box("h200-x8"), load_model("deepseek-v3")))
    known = {"tp": 4, "dp": 1, "pp": 1, "mode": "disaggregated", "phase": "decode"}
    prefill = {"peer.kernels.kv_cache_dtype": "fp8", "peer.speculative.method": "mtp", "peer.kernels.attention": "auto"}
    for engine in ("vllm", "sglang"):
        got = admission.admitted((engine,), "kernels.kv_cache_dtype", ("auto", "fp8"), {**known, **prefill})
        assert got == ("fp8",)
        got = admission.admitted((engine,), "speculative", ("none", "mtp/1", "mtp/2"), {**known, **prefill})
        assert got == ("mtp/1", "mtp/2")
        # prefill is sampled first: nothing is known of the decode yet, so nothing is refused for it
        first = {**known, "phase": "prefill"}
        assert admission.admitted((engine,), "kernels.kv_cache_dtype", ("auto", "fp8"), first) == ("auto", "fp8")


def _random_suggest(rng):
    return lambda _name, options: rng.choice(list(options))


def test_sampled_disaggregated_plans_speculate_alike_on_both_sides():
    import random

    from autotune.search import SearchRequest, load_space
    from autotune.search.admit import default_facts
    from autotune.search.sampler import sample_plan
    from autotune.search.study import study_choices
    from autotune.specs import Workload

    assert "speculative.method" not in default_facts({"speculative"})  # unknown until sampled, not "none"
    space, hw, model = load_space(), box("rtx-pro-6000-x8"), load_model("deepseek-v3")
    for engine in ("vllm", "sglang"):
        req = SearchRequest(model, hw, Workload(), space, hw.num_gpus, engine=engine)
        choices = {**study_choices(req), "mode": ("disaggregated",)}
        admission, rng = Admission(capability.box_facts(hw, model)), random.Random(engine)
        suggest = _random_suggest(rng)
        plans = [sample_plan(space, choices, suggest, 8, admission)[0] for _ in range(60)]
        plans = [p for p in plans if p is not None]
        methods = [(p.phases["prefill"].speculative.method, p.phases["decode"].speculative.method) for p in plans]
        assert len(plans) >= 30 and all(pre == dec for pre, dec in methods)
        assert {"none", "mtp"} <= {pre for pre, _ in methods}
