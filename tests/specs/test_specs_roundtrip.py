"""Property: any valid plan survives dump -> load -> dump unchanged (best.yaml and plan files rely on it)."""

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.specs import Batching, Comm, Kernels, Overlap, PhasePlan, Plan, dump_yaml, from_dict

POW2 = st.sampled_from([1, 2, 4, 8])


@st.composite
def phase_plans(draw, first_gpu=0):
    tp, dp, pp, replicas = draw(POW2), draw(POW2), draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 3]))
    n = tp * dp * pp * replicas
    return PhasePlan(
        gpus=tuple(range(first_gpu, first_gpu + n)),
        replicas=replicas,
        tp=tp,
        dp=dp,
        pp=pp,
        ep=draw(st.sampled_from([1, tp * dp])),
        dp_attention=dp > 1,
        kernels=Kernels(
            gemm_dtype=draw(st.sampled_from(["auto", "fp8"])), kv_cache_dtype=draw(st.sampled_from(["auto", "fp8"]))
        ),
        fusion=draw(st.dictionaries(st.just("allreduce_rmsnorm"), st.booleans())),
        comm=Comm(
            allreduce=draw(st.sampled_from(["custom", "nccl"])),
            nccl=draw(
                st.dictionaries(
                    st.sampled_from(["NCCL_P2P_LEVEL", "NCCL_ALGO"]), st.sampled_from(["PIX", "SYS", "Ring"])
                )
            ),
        ),
        overlap=Overlap(two_batch=draw(st.booleans())),
        batching=Batching(max_running=draw(st.integers(1, 4096)), chunked_prefill_tokens=draw(st.integers(64, 65536))),
    )


@st.composite
def plans(draw):
    engine = draw(st.sampled_from(["vllm", "sglang"]))
    if draw(st.booleans()):
        return Plan(engine, "aggregated", {"both": draw(phase_plans())})
    prefill = draw(phase_plans())
    return Plan(engine, "disaggregated", {"prefill": prefill, "decode": draw(phase_plans(len(prefill.gpus)))})


@settings(max_examples=150, deadline=None)
@given(plans())
def test_plan_round_trip_is_identical(plan):
    text = dump_yaml(plan)
    again = from_dict(Plan, yaml.safe_load(text), "plan.yaml")
    assert again == plan
    assert dump_yaml(again) == text
