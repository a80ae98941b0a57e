"""Properties the performance model must have whatever its constants: monotonicity, conservation of bytes and
the directions public measurements agree on. No number here was fitted to the same points it checks; bounds are
physics (peak rates, byte counts) or the engines' documented rules. tests/bench/mutations.py checks that these
tests catch single-line mutations of the model."""

import dataclasses
from pathlib import Path

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import comm, predict
from autotune.perf.ops import distinct_experts
from autotune.specs import DTYPE_BYTES, Batching, Comm, Kernels, PhasePlan, Plan, Workload

FIXTURES = Path(__file__).parents[1] / "fixtures"
EIGHT = tuple(range(8))
MIB, GIB = 1 << 20, 1 << 30
FP8 = Kernels(gemm_dtype="fp8")


@pytest.fixture(scope="module")
def pro():
    return dataclasses.replace(load_preset("rtx-pro-6000-x8"), measured=None)  # the model, not recorded curves


@pytest.fixture(scope="module")
def llama():
    return load_model("llama-3.1-70b")


@pytest.fixture(scope="module")
def qwen():
    return load_model(str(FIXTURES / "qwen3-30b-a3b" / "config.json"))


def agg(n=8, engine="vllm", gpus=None, **kw) -> Plan:
    return Plan(engine, "aggregated", {"both": PhasePlan(gpus=gpus or tuple(range(n)), **kw)})


def disagg(pre: dict, dec: dict, engine="vllm") -> Plan:
    return Plan(engine, "disaggregated", {"prefill": PhasePlan(**pre), "decode": PhasePlan(**dec)})


def at(concurrency: int, isl=1000, osl=1000) -> Workload:
    return Workload(isl=isl, osl=osl, concurrency=concurrency)


def feasible(plan, model, hw, w):
    p = predict(plan, model, hw, w)
    assert p.feasible, p.reason
    return p


def with_gpu(hw, **changes):
    return dataclasses.replace(hw, accelerators=tuple(dataclasses.replace(a, **changes) for a in hw.accelerators))


def without_p2p(hw):
    n = hw.num_gpus
    return dataclasses.replace(hw, p2p=tuple(tuple(i == j for j in range(n)) for i in range(n)))


def comm_total(p, prefix="") -> float:
    return sum(v for s in p.steps for k, v in s.comm_ms.items() if k.startswith(prefix))


# --- monotonic ------------------------------------------------------------------------------------------------


def test_step_time_grows_with_decode_batch(pro, llama):
    plan = agg(2, tp=2, kernels=FP8)  # KV room for every batch below: the batch runs as asked
    tpots = [feasible(plan, llama, pro, at(c)).tpot_ms["mean"] for c in (1, 2, 8, 32, 64, 128)]
    assert all(a < b for a, b in zip(tpots, tpots[1:], strict=False)), tpots


def test_time_grows_with_context(pro, llama):
    plan = agg(2, tp=2, kernels=FP8)
    preds = [feasible(plan, llama, pro, at(4, isl=isl, osl=256)) for isl in (512, 2048, 8192, 16384)]
    tpots = [p.tpot_ms["mean"] for p in preds]
    ttfts = [p.ttft_ms["mean"] for p in preds]
    assert all(a < b for a, b in zip(tpots, tpots[1:], strict=False)), tpots
    assert all(a < b for a, b in zip(ttfts, ttfts[1:], strict=False)), ttfts


def test_prefill_attention_costs_at_least_its_flops_at_peak(pro, llama):
    # the same 8192-token chunk at a longer prefix differs only in attention: QK^T and PV are 2 x heads x
    # 2 x head_dim FLOPs per (query, key) pair per layer, and no GPU runs them above its dense peak
    plan = disagg(dict(gpus=(0,), kernels=FP8), dict(gpus=(1,), kernels=FP8))
    short, long = (feasible(plan, llama, pro, Workload(isl=isl, osl=16)).steps[0] for isl in (8192, 32768))
    assert short.batch_tokens == long.batch_tokens
    att = llama.layers[0].attention
    head_dim = llama.hidden_size // att.num_heads
    extra_keys = (32768 - 8192) / 2  # mean attended prefix grows by this much
    flops = 2 * att.num_heads * 2 * head_dim * extra_keys * long.batch_tokens * llama.num_layers
    assert (long.compute_ms - short.compute_ms) * 1e-3 >= flops / (pro.gpu.peak_tflops["bf16"] * 1e12)


def test_faster_memory_is_never_slower(pro, llama, qwen):
    fast = with_gpu(pro, mem_bw_gbs=pro.gpu.mem_bw_gbs * 2)
    for model, plan in ((llama, agg(1, tp=1, kernels=FP8)), (qwen, agg(2, tp=1, dp=2, ep=2, dp_attention=True))):
        for c in (1, 64):
            slow_p, fast_p = feasible(plan, model, pro, at(c)), feasible(plan, model, fast, at(c))
            assert fast_p.tpot_ms["mean"] < slow_p.tpot_ms["mean"]
            assert fast_p.output_tok_s >= slow_p.output_tok_s


def test_lm_head_costs_time_growing_with_vocabulary(pro, llama):
    big_vocab = dataclasses.replace(llama, vocab_size=llama.vocab_size * 4)
    plan = agg(1, tp=1, kernels=FP8)
    for c in (1, 32):
        base, big = feasible(plan, llama, pro, at(c)), feasible(plan, big_vocab, pro, at(c))
        assert big.tpot_ms["mean"] > base.tpot_ms["mean"]


# --- conservation of bytes ------------------------------------------------------------------------------------


def test_all_gather_moves_p_minus_1_over_p_of_the_output_per_rank(pro):
    # 2 ranks on one switch: an all-gather of B puts B/2 on the one ring edge each way: one send of B/2
    nbytes = 256 * MIB
    sys_level = Comm("nccl", nccl={"NCCL_P2P_LEVEL": "SYS"})
    assert comm.all_gather_s(pro, (0, 1), nbytes, sys_level) == pytest.approx(
        comm.send_s(pro, 0, 1, nbytes / 2, sys_level), rel=1e-6
    )


@pytest.mark.parametrize("p", [2, 4, 8])
def test_ring_all_reduce_moves_twice_an_all_gather(pro, p):
    # ring all-reduce = reduce-scatter + all-gather: 2(p-1)/p of the message per rank, 2(p-1) steps
    group = tuple(range(p))
    for nbytes in (1 * GIB, 4 * GIB):  # large enough for latency to vanish
        ar = comm.all_reduce_s(pro, group, nbytes, Comm("nccl"))
        ag = comm.all_gather_s(pro, group, nbytes, Comm("nccl"))
        assert ar == pytest.approx(2 * ag, rel=0.01)


def test_moe_reads_at_most_every_expert_once(qwen):
    e, k = qwen.num_experts, qwen.layers[0].ffn.experts_per_token
    hits = [distinct_experts(e, k, t) for t in (1, 2, 8, 64, 1024, 100_000)]
    assert hits[0] == pytest.approx(k)
    assert all(a <= b <= e for a, b in zip(hits, hits[1:], strict=False))
    assert hits[-1] == pytest.approx(e, rel=1e-3)
    assert distinct_experts(e, k, 64) < 64 * k  # tokens share experts


def test_wider_expert_parallelism_reads_fewer_expert_bytes_per_gpu(pro, qwen):
    # one decoding token hits top-k experts per layer; each of n EP ranks reads 1/n of them, at best at peak HBM
    def decode_memory_ms(n):
        plan = agg(n, tp=1, dp=n, ep=n, dp_attention=True)
        return feasible(plan, qwen, pro, at(1)).steps[-1].memory_ms

    moe = [layer.ffn for layer in qwen.layers if layer.ffn.kind == "moe"]
    hit_bytes = sum(f.experts_per_token * f.expert_params for f in moe) * DTYPE_BYTES[qwen.expert_dtype]
    saved_ms = (1 / 2 - 1 / 8) * hit_bytes / (pro.gpu.mem_bw_gbs * 1e9) * 1e3
    assert decode_memory_ms(2) - decode_memory_ms(8) >= saved_ms


def test_fp8_weights_are_half_the_bytes_of_bf16(pro, llama):
    bf16 = feasible(agg(8, tp=8), llama, pro, at(1))
    fp8 = feasible(agg(8, tp=8, kernels=FP8), llama, pro, at(1))
    ratio = fp8.memory["both"].weights_gb / bf16.memory["both"].weights_gb
    # embedding and LM head stay bf16 (2.1 of 70.6 B params): between exactly half and half + their share
    head_share = llama.embed_params / llama.total_params
    assert DTYPE_BYTES["fp8"] / DTYPE_BYTES["bf16"] <= ratio <= 0.5 + head_share / 2 + 1e-6
    assert fp8.tpot_ms["mean"] < bf16.tpot_ms["mean"]


def test_kv_capacity_is_free_memory_over_kv_bytes_and_doubles_with_fp8_kv(pro, llama):
    plan = agg(1, tp=1, kernels=FP8)
    fit = feasible(plan, llama, pro, at(1)).memory["both"]
    per_token = llama.kv_bytes_per_token("auto")
    assert fit.kv_tokens * per_token == pytest.approx(fit.kv_gb * 1e9, rel=0.01)
    fp8_kv = feasible(agg(1, tp=1, kernels=Kernels(gemm_dtype="fp8", kv_cache_dtype="fp8")), llama, pro, at(1))
    assert fp8_kv.memory["both"].kv_tokens == pytest.approx(2 * fit.kv_tokens, rel=0.01)


def test_memory_fit_leaves_room_for_the_runtime(pro, llama):
    # CUDA context, NCCL buffers and graph pools live outside weights, KV and activations
    fit = feasible(agg(1, tp=1, kernels=FP8), llama, pro, at(1)).memory["both"]
    assert fit.capacity_gb - (fit.weights_gb + fit.kv_gb + fit.activations_gb) >= 0.5


# --- directions -----------------------------------------------------------------------------------------------


def test_p2p_on_is_never_slower_than_p2p_off():
    shipped = load_preset("rtx-pro-6000-x8")
    for hw in (shipped, dataclasses.replace(shipped, measured=None)):
        off = without_p2p(hw)
        for group in ((0, 1), (0, 1, 2, 3), EIGHT):
            for nbytes in (4096, 1 * MIB, 64 * MIB):
                for setting in (Comm("custom"), Comm("nccl")):
                    on_s = comm.all_reduce_s(hw, group, nbytes, setting)
                    off_s = comm.all_reduce_s(off, group, nbytes, setting)
                    assert on_s <= off_s, (hw.measured is not None, group, nbytes, setting.allreduce)


def test_p2p_off_slows_a_tensor_parallel_plan(pro, llama):
    plan = agg(8, tp=8)
    on, off = feasible(plan, llama, pro, at(32)), feasible(plan, llama, without_p2p(pro), at(32))
    assert off.tpot_ms["mean"] > on.tpot_ms["mean"]


def test_replicas_beat_wide_expert_parallelism_for_a_small_moe_on_pcie(pro, qwen):
    w = Workload(isl=1000, osl=1000)
    replicas = feasible(agg(8, tp=1, replicas=8, kernels=FP8), qwen, pro, w)
    dep8 = feasible(agg(8, tp=1, dp=8, ep=8, dp_attention=True, kernels=FP8), qwen, pro, w)
    assert replicas.output_tok_s_per_gpu > dep8.output_tok_s_per_gpu


def test_pairs_across_switches_share_the_uplink(pro):
    topo = comm.topology(pro)
    assert topo.switch_of[0] == topo.switch_of[1] != topo.switch_of[2] == topo.switch_of[3]
    same_switch = {(0, 1): GIB, (2, 3): GIB}
    across = {(0, 2): GIB, (1, 3): GIB}  # both flows climb switch 0's uplink
    assert comm.transfer_s(topo, across) > comm.transfer_s(topo, same_switch)
    assert comm.send_s(pro, 0, 2, GIB) >= comm.send_s(pro, 0, 1, GIB)


def test_pipeline_hand_off_costs_time_growing_with_batch(pro, llama):
    plan = agg(2, tp=1, pp=2, kernels=FP8)
    sends = [comm_total(feasible(plan, llama, pro, at(c)), "pp_send") for c in (2, 64)]
    assert 0 < sends[0] < sends[1]


def test_expert_imbalance_costs_time_without_the_load_balancer(pro, qwen):
    def step(eplb):
        plan = agg(4, tp=1, dp=4, ep=4, dp_attention=True, eplb=eplb)
        s = feasible(plan, qwen, pro, at(64)).steps[-1]
        return s.compute_ms + s.memory_ms

    assert step(eplb=False) > step(eplb=True)


def test_tensor_parallel_all_reduce_time_grows_with_tp_over_pcie(pro, llama):
    times = []
    for tp in (2, 4, 8):
        p = feasible(agg(tp, tp=tp, kernels=FP8, comm=Comm("nccl")), llama, pro, at(32))
        times.append(comm_total(p, "allreduce"))
    assert 0 < times[0] < times[1] < times[2], times
    group_times = [comm.all_reduce_s(pro, tuple(range(tp)), 1 * MIB, Comm("nccl")) for tp in (2, 4, 8)]
    assert group_times[0] < group_times[1] < group_times[2]


def test_tensor_parallel_reduces_each_layer_twice(pro, llama):
    # a TP dense layer all-reduces its hidden rows after attention and after the MLP: one decoding token, TP8
    p = feasible(agg(8, tp=8, kernels=FP8, comm=Comm("nccl")), llama, pro, at(1))
    decode = p.steps[-1]
    assert decode.batch_tokens == 1
    one = comm.all_reduce_s(pro, EIGHT, llama.hidden_size * 2, Comm("nccl"))
    total_ms = sum(v for k, v in decode.comm_ms.items() if k.startswith("allreduce"))
    assert total_ms == pytest.approx(2 * llama.num_layers * one * 1e3, rel=0.02)


def test_engine_custom_all_reduce_only_where_engines_run_it(pro):
    # vllm custom_all_reduce.py: "not supported on more than two PCIe-only GPUs"
    assert comm.all_reduce(pro, EIGHT, 4096, Comm("custom"))[0] == "nccl"
    assert comm.all_reduce(pro, (0, 1, 2, 3), 4096, Comm("custom"))[0] == "nccl"
    assert comm.all_reduce(pro, (0, 1), 4096, Comm("custom"))[0] == "custom"


def test_prefill_launches_cost_more_than_graph_replayed_decode(pro, llama):
    p = feasible(agg(1, tp=1, kernels=FP8), llama, pro, at(1, isl=16, osl=64))
    prefill, decode = p.steps
    assert prefill.launch_ms > decode.launch_ms


def test_no_step_runs_more_tokens_than_the_chunk_budget(pro, llama):
    chunk = 2048
    batching = Batching(max_running=256, chunked_prefill_tokens=chunk)
    plans = (
        agg(1, tp=1, kernels=FP8, batching=batching),
        disagg(dict(gpus=(0,), kernels=FP8, batching=batching), dict(gpus=(1,), kernels=FP8, batching=batching)),
    )
    for plan in plans:
        for w in (Workload(isl=8192, osl=256), at(1, isl=8192, osl=256), at(64, isl=4096, osl=64)):
            for s in feasible(plan, llama, pro, w).steps:
                assert s.batch_tokens <= chunk, (plan.mode, w, s.phase)
