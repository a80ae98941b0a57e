"""Collectives on recorded topologies, checked against public measurements (shared/reference/calibration.yaml and
autotune/catalog/calibration.yaml). Properties, not fitted numbers."""

import dataclasses
import math

import pytest

from autotune.capability.profiles.vllm_0_34_0 import CUSTOM_GRID_BYTES
from autotune.catalog import load_model, load_preset
from autotune.perf import comm
from autotune.perf import comm_rates as cr
from autotune.perf.ops import StepInput, step_cost
from autotune.specs import Batching, Comm, PhasePlan

KIB = 1 << 10
MB = 1 << 20
EIGHT = tuple(range(8))
SIZES = [2**k for k in range(8, 31, 2)]  # 256 B .. 1 GiB

SYS = {"NCCL_P2P_LEVEL": "SYS"}
TUNED = {"NCCL_MIN_NCHANNELS": "8"}
NO_P2P = {"NCCL_P2P_DISABLE": "1"}


def modelled(hw):
    """The same box without its measured curves, so the analytical model answers."""
    return dataclasses.replace(hw, measured=None)


def busbw_gbs(seconds, nbytes, p):
    return nbytes * 2 * (p - 1) / p / seconds / 1e9


def nccl(**env):
    return Comm(allreduce="nccl", nccl=env)


@pytest.fixture(scope="module")
def pro():
    return load_preset("rtx-pro-6000-x8")


def test_pcie_allreduce_busbw_matches_rtx6kpro_measurements(pro):
    # pcie-rtx6kpro-nccl-allreduce-8gpu: 37.6-41.1 GB/s busbw at 8 MB - 2 GB with NCCL_MIN_NCHANNELS=8
    hw = modelled(pro)
    nbytes = 512 * MB
    bw = busbw_gbs(comm.all_reduce_s(hw, EIGHT, nbytes, nccl(**TUNED)), nbytes, 8)
    assert 25 <= bw <= 45


def test_min_nchannels_8_lifts_large_message_busbw_toward_public_figures(pro):
    # pcie-rtx6kpro-nccl-allreduce-8gpu: 22.2 GB/s at NCCL defaults (dual socket) vs 37.6-41.1 with 8 channels
    for hw in (pro, modelled(pro)):
        default = busbw_gbs(comm.all_reduce_s(hw, EIGHT, 64 * MB, nccl()), 64 * MB, 8)
        tuned = busbw_gbs(comm.all_reduce_s(hw, EIGHT, 64 * MB, nccl(**TUNED)), 64 * MB, 8)
        assert 16 <= default <= 26
        assert 28 <= tuned <= 45
        assert tuned > 1.4 * default


def test_p2p_level_sys_lifts_4gpu_busbw_as_recorded(pro):
    # rtx6kpro-asus-nccl-p2p-level: 4 GPUs, 32 MB: 30.3 GB/s at defaults (SHM on NODE pairs) vs 39.3 with SYS
    hw = modelled(pro)
    group = (0, 1, 2, 3)
    default = busbw_gbs(comm.all_reduce_s(hw, group, 32 * MB, nccl()), 32 * MB, 4)
    forced = busbw_gbs(comm.all_reduce_s(hw, group, 32 * MB, nccl(**SYS)), 32 * MB, 4)
    assert forced / default == pytest.approx(39.3 / 30.3, rel=0.1)


def test_default_p2p_level_follows_nccl_paths_cc(pro):
    topo = comm.topology(pro)
    pxb, sys_ = comm.cr.NCCL_PATH_RANK["PXB"], comm.cr.NCCL_PATH_RANK["SYS"]
    assert comm.p2p_level(topo, EIGHT, comm.nccl_env(None)) == pxb  # > 2 GPUs: no P2P across host bridges
    assert comm.p2p_level(topo, (0, 4), comm.nccl_env(None)) == sys_  # AMD host, 2 GPUs
    assert comm.p2p_level(comm.topology(load_preset("l20-x8")), (0, 4), comm.nccl_env(None)) == pxb  # Intel
    assert comm.nccl_env({"NCCL_P2P_LEVEL": "4"}).p2p_level == sys_  # legacy integer levels
    assert comm.nccl_env(NO_P2P).p2p_level == 0


def test_small_message_latency_is_tens_of_microseconds_on_pcie(pro):
    t_us = comm.all_reduce_s(modelled(pro), EIGHT, 256, nccl(**SYS)) * 1e6
    assert 15 <= t_us <= 35  # calibration: 24-25 us (NCCL, 8 GPUs behind switches, P2P)


def test_measured_curve_is_used_and_interpolated(pro):
    assert pro.measured and "all_reduce/8" in pro.measured.collectives
    at_point = comm.all_reduce_s(pro, EIGHT, 262144, nccl())
    assert at_point == pytest.approx(86.2e-6)
    between = comm.all_reduce_s(pro, EIGHT, 1 * MB, nccl())
    assert 86.2e-6 < between < 2976e-6
    # a group the curves do not cover falls back to the model
    assert comm.all_reduce_s(pro, (2, 3), MB, nccl()) == comm.all_reduce_s(modelled(pro), (2, 3), MB, nccl())


def test_measured_curve_answers_only_for_the_setting_it_was_measured_with(pro):
    assert comm.nccl_env(None) == comm.MEASURED_CURVE_ENV
    measured = comm.all_reduce_s(pro, EIGHT, 262144, nccl())
    assert comm.all_reduce_s(pro, EIGHT, 262144, nccl(**SYS)) != pytest.approx(measured)


def test_pcie_ipc_beats_nccl_on_small_messages_and_is_nccl_above_its_limit(pro):
    # sglang pcie_ipc_ar.py docstring, 8x sm_120: 12 KiB 5.3 us vs NCCL 205 us; 384 KiB 34.6 vs 1169 us
    limit = 256 * 8192 * 2.0
    for hw in (pro, modelled(pro)):
        for size in (12 * KIB, 96 * KIB, 384 * KIB):
            algo, t_ipc = comm.all_reduce(hw, EIGHT, size, Comm("pcie_ipc"), limit)
            assert algo == "pcie_ipc"
            assert t_ipc * (3 if size < 64 * KIB else 1) < comm.all_reduce_s(hw, EIGHT, size, nccl())
        big = limit * 2
        fallback = comm.all_reduce(hw, EIGHT, big, Comm("pcie_ipc"), limit)
        assert fallback == comm.all_reduce(hw, EIGHT, big, nccl(), limit)
    assert comm.all_reduce_s(pro, EIGHT, 12 * KIB, Comm("pcie_ipc"), limit) < 10e-6


def test_pcie_ipc_reproduces_the_sglang_docstring_on_its_host(pro):
    # the docstring's host: 8 GPUs, one root port each, GPUs 0-3 / 4-7 on two NUMA nodes, no switches
    n = 8
    links = tuple(tuple("X" if i == j else ("NODE" if i // 4 == j // 4 else "SYS") for j in range(n)) for i in range(n))
    host = dataclasses.replace(modelled(pro), links=links, pcie_switch_uplink_gbs=0.0)
    for size, measured_us in ((12 * KIB, 5.3), (96 * KIB, 15.3), (384 * KIB, 34.6), (100 * MB, 8500.0)):
        t_us = comm.all_reduce_s(host, EIGHT, size, Comm("pcie_ipc"), 1e12) * 1e6
        # within 35%: the kernel latency is the engines' shared P2P-kernel figure (comm_rates.engine_ar_latency_us,
        # fitted on NVLink and PCIe sources together: 6.0 us at 8 ranks, this table's 12 KiB row implies ~4.3)
        assert t_us == pytest.approx(measured_us, rel=0.35)


def test_pcie_ipc_needs_p2p_and_a_supported_world_size():
    no_p2p = load_preset("rtx-4090-x8")
    assert comm.all_reduce(no_p2p, EIGHT, 12 * KIB, Comm("pcie_ipc"))[0] == "nccl"
    pro = load_preset("rtx-pro-6000-x8")
    assert comm.all_reduce(pro, (0, 1, 2, 3, 4, 5), 12 * KIB, Comm("pcie_ipc"))[0] == "nccl"
    assert comm.all_reduce(pro, (0, 1, 2, 3), 12 * KIB, Comm("pcie_ipc"))[0] == "pcie_ipc"


def test_custom_allreduce_only_where_engines_enable_it():
    pcie = comm.topology(load_preset("rtx-pro-6000-x8"))
    assert comm.custom_allreduce_applies(pcie, (0, 1))
    assert not comm.custom_allreduce_applies(pcie, (0, 1, 2, 3))
    assert comm.custom_allreduce_applies(comm.topology(load_preset("h200-x8")), tuple(range(8)))
    assert not comm.custom_allreduce_applies(comm.topology(load_preset("rtx-4090-x8")), (0, 1))


def test_custom_equals_nccl_above_its_size_limit_and_on_more_than_two_pcie_gpus(pro):
    hw = modelled(pro)
    pair = (0, 1)
    assert comm.all_reduce(hw, pair, 64 * KIB, Comm("custom"))[0] == "custom"
    assert comm.all_reduce_s(hw, pair, 64 * KIB, Comm("custom")) < comm.all_reduce_s(hw, pair, 64 * KIB, nccl())
    above = 16 * MB
    assert comm.all_reduce(hw, pair, above, Comm("custom")) == comm.all_reduce(hw, pair, above, nccl())
    for size in (KIB, 64 * KIB, MB):
        assert comm.all_reduce(hw, EIGHT, size, Comm("custom")) == comm.all_reduce(hw, EIGHT, size, nccl())
    for engine in ("vllm", "sglang"):  # both engines: the pair only, up to their legacy kernels' 8 MiB
        assert comm.all_reduce(hw, pair, 4 * MB, Comm("custom"), engine=engine)[0] == "custom"
        assert comm.all_reduce(hw, pair, above, Comm("custom"), engine=engine)[0] == "nccl"
        assert comm.all_reduce(hw, (0, 1, 2, 3), KIB, Comm("custom"), engine=engine)[0] == "nccl"
    nvl = load_preset("h200-x8")
    assert comm.all_reduce(nvl, EIGHT, 4 * MB, Comm("custom"), engine="sglang")[0] == "custom"  # two-shot on NVLink
    assert comm.all_reduce(nvl, EIGHT, 32 * MB, Comm("custom"), engine="sglang")[0] == "nccl"


def test_ll_wins_small_messages_and_simple_wins_large_ones(pro):
    for hw in (pro, modelled(pro)):
        ll, simple = nccl(NCCL_PROTO="LL"), nccl(NCCL_PROTO="Simple")
        assert comm.all_reduce_s(hw, EIGHT, KIB, ll) < comm.all_reduce_s(hw, EIGHT, KIB, simple)
        assert comm.all_reduce_s(hw, EIGHT, 64 * MB, ll) > comm.all_reduce_s(hw, EIGHT, 64 * MB, simple)
        default = comm.all_reduce_s(hw, EIGHT, 64 * MB, nccl())
        assert default == pytest.approx(comm.all_reduce_s(hw, EIGHT, 64 * MB, simple))  # the tuner's pick
    assert comm.nccl_env({"NCCL_PROTO": "^LL128"}).protos == ("LL", "Simple")


@pytest.mark.parametrize("preset", ["rtx-pro-6000-x8", "rtx-4090-x8", "l20-x8", "h200-x8"])
def test_p2p_on_is_never_slower_than_p2p_off(preset):
    hw = load_preset(preset)
    hw_p2p = dataclasses.replace(modelled(hw), p2p=tuple(tuple(True for _ in r) for r in hw.p2p))
    hw_off = dataclasses.replace(modelled(hw), p2p=tuple(tuple(False for _ in r) for r in hw.p2p))
    for size in SIZES:
        for box in (hw, modelled(hw)):
            on, default, off = (comm.all_reduce_s(box, EIGHT, size, nccl(**e)) for e in (SYS, {}, NO_P2P))
            assert on <= default * (1 + 1e-9) and default <= off * (1 + 1e-9)
        assert comm.all_reduce_s(hw_p2p, EIGHT, size, nccl(**SYS)) <= comm.all_reduce_s(hw_off, EIGHT, size, nccl())
        assert comm.send_s(hw_p2p, 0, 7, size, nccl(**SYS)) <= comm.send_s(hw_off, 0, 7, size)


@pytest.mark.parametrize(
    "setting", [nccl(), nccl(**TUNED), nccl(**SYS), nccl(NCCL_PROTO="LL"), Comm("custom"), Comm("pcie_ipc")]
)
@pytest.mark.parametrize("group", [(0, 1), (0, 1, 2, 3), EIGHT])
def test_time_is_monotonic_in_bytes(pro, setting, group):
    hw = modelled(pro)
    times = [comm.all_reduce_s(hw, group, size, setting) for size in SIZES]
    assert all(a <= b for a, b in zip(times, times[1:], strict=False))
    gathers = [comm.all_gather_s(hw, group, size, setting) for size in SIZES]
    assert all(a <= b for a, b in zip(gathers, gathers[1:], strict=False))


def test_nvlink_is_much_faster_than_pcie_for_large_messages():
    pcie = modelled(load_preset("rtx-pro-6000-x8"))
    nvl = modelled(load_preset("h200-x8"))
    assert comm.all_reduce_s(nvl, EIGHT, 256 * MB) * 5 < comm.all_reduce_s(pcie, EIGHT, 256 * MB)


def test_crossing_sockets_costs_more_than_staying_on_one(pro):
    hw = modelled(pro)
    slow = dataclasses.replace(hw, host=dataclasses.replace(hw.host, inter_socket_gbs=8.0))
    same_socket, cross = (0, 1, 2, 3), (0, 1, 4, 5)
    for env in ({}, SYS, TUNED):
        t_cross = comm.all_reduce_s(slow, cross, 64 * MB, nccl(**env))
        assert t_cross > 1.5 * comm.all_reduce_s(slow, same_socket, 64 * MB, nccl(**env))


def test_disabled_p2p_goes_through_host_memory_and_is_slower():
    no_p2p = modelled(load_preset("rtx-4090-x8"))
    assert not no_p2p.p2p[0][1]
    enabled = dataclasses.replace(no_p2p, p2p=tuple(tuple(True for _ in r) for r in no_p2p.p2p))
    assert comm.all_reduce_s(no_p2p, EIGHT, 64 * MB) > 2 * comm.all_reduce_s(enabled, EIGHT, 64 * MB, nccl(**SYS))
    assert comm.transport(comm.topology(no_p2p), EIGHT) == "shm"


def test_all_to_all_is_bound_by_shared_switch_uplinks():
    hw = modelled(load_preset("l20-x8"))
    per_rank = 64 * MB
    assert comm.all_to_all_s(hw, EIGHT, per_rank) > comm.all_to_all_s(hw, (0, 1), per_rank)


def test_ring_order_keeps_switch_neighbours_together():
    topo = comm.topology(load_preset("rtx-pro-6000-x8"))
    assert comm.ring_order(topo, (4, 0, 5, 1)) == (0, 1, 4, 5)


def test_breakdown_names_the_allreduce_algorithm_that_ran(pro):
    model = load_model("llama-3.1-70b")
    phase = PhasePlan(gpus=EIGHT, tp=8, comm=Comm("pcie_ipc"), batching=Batching(max_running=64))
    decode = step_cost(model, phase, "sglang", pro, EIGHT, StepInput(decode_seqs=32, decode_ctx=2000), "decode")
    # besides the all-reduces, the LM head's logits all-gather over the TP group (perf/lm_head.py)
    assert set(decode.comm_ms) == {"allreduce:pcie_ipc", "allgather"}
    mixed = StepInput(decode_seqs=32, decode_ctx=2000, prefill_tokens=8192, prefill_ctx=4096)
    prefill = step_cost(model, phase, "sglang", pro, EIGHT, mixed, "mixed")
    assert set(prefill.comm_ms) == {"allreduce:nccl", "allgather"}  # a prefill chunk exceeds the decode workspace
    forced = dataclasses.replace(phase, comm=Comm("nccl"))
    slower = step_cost(model, forced, "sglang", pro, EIGHT, StepInput(decode_seqs=32, decode_ctx=2000), "decode")
    assert set(slower.comm_ms) == {"allreduce:nccl", "allgather"}
    assert slower.step_ms > decode.step_ms


def test_engine_all_reduce_latency_grows_per_peer_at_every_world_size():
    """The custom all-reduce's fixed time is a launch part plus one flag exchange per peer (comm_rates
    engine_ar_latency_us): it rises at every world size, 6 included. The old per-world-size table had no 6 and
    gave it the largest entry (5.9 us, the same as 8 GPUs)."""
    h200 = modelled(load_preset("h200-x8"))
    tiny = {p: comm.all_reduce(h200, tuple(range(p)), 512, "custom", engine="sglang") for p in (2, 4, 6, 8)}
    assert all(algo == "custom" for algo, _ in tiny.values())
    t2, t4, t6, t8 = (tiny[p][1] for p in (2, 4, 6, 8))
    assert t2 < t4 < t6 < t8
    assert t8 - t6 > 0.4 * (t6 - t4)  # one more flag exchange per peer, as from 4 to 6 (old: 6 cost what 8 did)


def test_pcie_ipc_and_custom_share_the_kernel_latency(pro):
    """FlashInfer's PCIe-IPC kernel and the custom all-reduce pay the same fixed time at one world size (one
    kernel, two barriers over the peers' flags); the old model had 4.3 us for one and 7.5 us for the other."""
    hw = modelled(pro)
    _, ipc_s = comm.all_reduce(hw, (0, 1), 2, "pcie_ipc")
    _, custom_s = comm.all_reduce(hw, (0, 1), 2, "custom")
    assert ipc_s == pytest.approx(custom_s, rel=0.02)


def _b200_box():
    """8x B200 on NVSwitch: the H200 preset's box with catalog.devices "b200" GPUs (sm_100, NVLink5)."""
    from autotune.catalog.devices import DEVICES_BY_KEY

    spec, hw = DEVICES_BY_KEY["b200"], modelled(load_preset("h200-x8"))
    gpus = tuple(dataclasses.replace(a, arch=spec.arch, nvlink_gbs=spec.nvlink_gbs) for a in hw.accelerators)
    return dataclasses.replace(hw, accelerators=gpus)


def test_b200_nvlink_small_all_reduce_takes_longer_than_hopper():
    """NVIDIA/nccl#1940: an 8 B all-reduce on 8 GPUs takes ~3.0 us on B200 against ~2.3 us on H200 / H800 with
    the same tuning (calibration id nvlink-small-message-latency-b200-nccl1940): the custom all-reduce's fixed time
    on a B200 NVLink group is 3.0 / 2.3 of the Hopper one. The old model gave B200 Hopper's fixed time (its faster
    NVLink only shortened the wire part). NCCL's ring latencies are its tuner's, the same on both."""
    h200, b200 = modelled(load_preset("h200-x8")), _b200_box()
    for p in (2, 4, 8):
        group = tuple(range(p))
        algo, t_b200 = comm.all_reduce(b200, group, 512, "custom", engine="sglang")
        assert algo == "custom"
        t_h200 = comm.all_reduce_s(h200, group, 512, "custom", engine="sglang")
        assert t_b200 / t_h200 == pytest.approx(3.0 / 2.3, rel=0.02)
        assert comm.all_reduce_s(b200, group, 512, "nccl") == pytest.approx(
            comm.all_reduce_s(h200, group, 512, "nccl"), rel=0.01
        )
    for engine in ("vllm", "sglang"):  # the step costing path agrees (vLLM: its FlashInfer path, the same fixed time)
        fn = comm.all_reduce_fn(b200, EIGHT, "custom", 1e12, engine)
        assert fn(512)[1] == pytest.approx(comm.all_reduce_s(b200, EIGHT, 512, "custom", engine=engine))


def test_vllm_two_stage_custom_kernel_pays_two_fixed_times_sglang_one():
    """vLLM's two-stage custom kernel synchronises twice (start_sync, then an end_sync every block waits on before
    the all-gather): two fixed times, where SGLang's two-shot pull kernel has one barrier before and one after the
    reads (the engine profiles' allreduce_paths). vllm#24111 / #24532 (H100 TP4): ca_2stage 17 us against ca_1stage
    10 us at 0.5 MiB though it moves half the bytes. The old model had one custom all-reduce cost for both engines."""
    h200, four = modelled(load_preset("h200-x8")), (0, 1, 2, 3)
    topo = comm.topology(h200)
    for size in (3 * MB, 4 * MB):  # past vLLM's FlashInfer limit at 4 ranks on sm_90 (2 MiB): its custom kernel
        vllm_algo, vllm_s = comm.all_reduce(h200, four, size, Comm("custom"), engine="vllm")
        sglang_algo, sglang_s = comm.all_reduce(h200, four, size, Comm("custom"), engine="sglang")
        assert vllm_algo == sglang_algo == "custom"  # both two-shot traffic; vLLM's kernel at least a floor per pass
        latency_s = comm.custom_latency_s(topo, four)
        passes = math.ceil(size / (4 * CUSTOM_GRID_BYTES))
        link_s = sglang_s - latency_s  # SGLang's one-round two-shot: the link rate
        assert vllm_s == pytest.approx(2 * latency_s + max(passes * cr.CUSTOM_TWO_STAGE_WAVE_US * 1e-6, link_s))
        fn = comm.all_reduce_fn(h200, four, Comm("custom"), 1e12, "vllm")  # the step costing path agrees
        assert fn(size) == ("custom", pytest.approx(vllm_s))


def test_vllm_two_stage_kernel_steps_with_its_grid_passes():
    """vLLM's two-stage kernel walks each rank's 1/p part with a fixed grid (36 blocks x 512 threads x 16 B,
    csrc/custom_all_reduce.cuh allreduce() / cross_device_reduce_2stage): its time steps with the grid's passes, a
    floor per pass (comm_rates.CUSTOM_TWO_STAGE_WAVE_US). vllm#24111 / #24532 (H100 SXM, CUDA graphs): at 4 ranks
    ca_2stage 18 us at 1 MiB (one pass), 25-27 us at 1.5 and 2 MiB alike (two passes), and slower than ca_1stage at
    3-4 MiB (35 / 43 against 30 / 38 us) though it moves half the bytes; at 6 ranks faster than ca_1stage from 2 MiB
    (26 / 29 / 37 against 38 / 53 / 70 us). The old model priced the two-stage wire at the link rate, linear in bytes:
    15.7 / 17.8 us at 1.5 / 2 MiB, 26.6 against one-stage 39.5 us at 4 MiB."""
    h200 = modelled(load_preset("h200-x8"))

    def forced(group, stages):
        custom = next(p for p in comm.allreduce_paths("vllm", h200, group) if p.name == "custom")
        assert custom.two_stage_grid_bytes == CUSTOM_GRID_BYTES
        one_max = float("inf") if stages == 1 else 0.0
        return lambda size: comm.path_s(h200, group, dataclasses.replace(custom, one_shot_max_bytes=one_max), size)

    four, six = (0, 1, 2, 3), tuple(range(6))
    two4, one4, two6, one6 = forced(four, 2), forced(four, 1), forced(six, 2), forced(six, 1)
    assert two4(2 * MB) == pytest.approx(two4(1.5 * MB))  # the same two passes
    assert two4(1.5 * MB) - two4(MB) > 0.5 * (two4(MB) - 2 * comm.custom_latency_s(comm.topology(h200), four))
    for size in (3 * MB, 4 * MB):
        assert two4(size) > one4(size)
    for size in (2 * MB, 3 * MB, 4 * MB):
        assert two6(size) < one6(size)
    # SGLang's two-shot pull is one round: no grid passes, the link rate
    assert comm.allreduce_paths("sglang", h200, four)[0].two_stage_grid_bytes == 0


def test_vllm_dispatch_follows_its_size_rules_on_nvswitch():
    """vLLM 0.34 on an NVSwitch box runs FlashInfer's all-reduce first, then its custom kernel, then torch symmetric
    memory, then NCCL, each up to its per-arch, per-world-size limit (vllm/distributed/device_communicators/
    cuda_communicator.py:389-458; the limits in capability/profiles/vllm_0_34_0.py). The old model ran the custom
    kernel up to 8 MiB at every world size and NCCL above, so 16-64 MiB at 8 ranks went to NCCL."""
    h200 = modelled(load_preset("h200-x8"))
    cases = {  # (world, bytes) -> path on sm_90
        (8, 256 * KIB): "flashinfer",
        (8, 512 * KIB): "flashinfer",  # inclusive 0.5 MiB
        (8, MB): "symm_mem",  # the custom kernel stops at 256 KiB with symmetric memory on (sm_90, 8 ranks)
        (8, 64 * MB): "symm_mem",
        (8, 128 * MB): "nccl",
        (4, MB): "flashinfer",
        (4, 4 * MB): "custom",
        (4, 16 * MB): "symm_mem",
        (4, 64 * MB): "nccl",
        (6, 256 * KIB): "custom",  # no FlashInfer limit at 6 ranks; custom up to 512 KiB there
        (6, MB): "symm_mem",
        (2, 32 * MB): "flashinfer",
    }
    for (p, size), path in cases.items():
        group = tuple(range(p))
        assert comm.all_reduce(h200, group, size, Comm("custom"), engine="vllm")[0] == path, (p, size)
        fn = comm.all_reduce_fn(h200, group, Comm("custom"), 1e12, "vllm")
        assert fn(size) == comm.all_reduce(h200, group, size, Comm("custom"), engine="vllm")
    b200 = _b200_box()  # sm_100, 8 ranks: FlashInfer's MNNVL backend up to 128 MiB
    assert comm.all_reduce(b200, EIGHT, 64 * MB, Comm("custom"), engine="vllm")[0] == "flashinfer"
    # symmetric memory at 16 MiB on 8 H200s prices below NCCL's ring (vllm#42324's multimem column beats pynccl)
    assert comm.all_reduce_s(h200, EIGHT, 16 * MB, Comm("custom")) < comm.all_reduce_s(h200, EIGHT, 16 * MB, nccl())


def test_sglang_custom_all_reduce_takes_up_to_16_mib_on_nvlink():
    """SGLang 0.5.23's custom all-reduce v2 (the default on CUDA) sizes its workspace to 16 MiB and its two-shot
    limit is above that at every world size on sm_90 (configs/custom_all_reduce_v2.py): a 12 MiB reduction runs it,
    not NCCL (the old model stopped every engine's custom kernel at 8 MiB)."""
    h200 = modelled(load_preset("h200-x8"))
    for p in (2, 4, 8):
        group = tuple(range(p))
        assert comm.all_reduce(h200, group, 12 * MB, Comm("custom"), engine="sglang")[0] == "custom"
        assert comm.all_reduce(h200, group, 16 * MB + 16, Comm("custom"), engine="sglang")[0] == "nccl"


@pytest.mark.parametrize("preset", ["rtx-pro-6000-x8", "l40s-x8"])
def test_pcie_boxes_run_the_custom_kernel_on_pairs_only_and_no_nvswitch_paths(preset):
    """PCIe boxes (sm_120 / sm_89, no NVLink): both engines run their custom kernel on 2 P2P GPUs only, up to
    8 MiB, and NCCL on 4 or 8 GPUs (vllm custom_all_reduce.py:268-273; sglang custom_all_reduce.py:272-273: the
    v2 kernel needs full NVLink); vLLM's FlashInfer and symmetric-memory paths need NVSwitch multicast and have no
    sm_120 / sm_89 limits, so they never run here."""
    hw = modelled(load_preset(preset))
    for engine in ("vllm", "sglang"):
        for size in (KIB, 256 * KIB, 4 * MB, 32 * MB):
            for p in (2, 4, 8):
                algo, _ = comm.all_reduce(hw, tuple(range(p)), size, Comm("custom"), engine=engine)
                assert algo == ("custom" if p == 2 and size <= 4 * MB else "nccl"), (engine, size, p)


def test_step_costing_runs_the_plans_engine_dispatch():
    """A step's all-reduces go through its engine's dispatch (costing passes the Context's engine): on 8 H200s a
    Llama-70B decode step's reductions (32 rows x 8192 x bf16 = 512 KiB) run FlashInfer's all-reduce under vLLM and
    SGLang's custom kernel under SGLang; a prefill chunk's (4096 rows = 64 MiB) vLLM's symmetric memory and NCCL
    under SGLang (above its 16 MiB). The old model named and priced one custom kernel for both engines. The fused
    all-reduce + RMSNorm (on by default in vLLM at this size) runs a kernel of its own (test_fused_allreduce_price):
    turned off here, the standalone dispatch is what runs."""
    model, h200 = load_model("llama-3.1-70b"), modelled(load_preset("h200-x8"))
    phase = PhasePlan(gpus=EIGHT, tp=8, batching=Batching(max_running=64), fusion={"allreduce_rmsnorm": False})
    decode, prefill = StepInput(decode_seqs=32, decode_ctx=2000), StepInput(prefill_tokens=4096)
    vllm = step_cost(model, phase, "vllm", h200, EIGHT, decode, "decode")
    sglang = step_cost(model, phase, "sglang", h200, EIGHT, decode, "decode")
    gather = {"allgather"}  # the LM head's logits all-gather over the TP group (perf/lm_head.py)
    assert (
        set(vllm.comm_ms) == {"allreduce:flashinfer"} | gather and set(sglang.comm_ms) == {"allreduce:custom"} | gather
    )
    assert (
        set(step_cost(model, phase, "vllm", h200, EIGHT, prefill, "prefill").comm_ms) == {"allreduce:symm_mem"} | gather
    )
    assert (
        set(step_cost(model, phase, "sglang", h200, EIGHT, prefill, "prefill").comm_ms) == {"allreduce:nccl"} | gather
    )


def test_kv_transfer_is_a_dma_copy_not_an_nccl_ring(pro):
    """P/D KV moves through NIXL (UCX cuda_ipc: cuMemcpyDtoDAsync on the copy engines), so a P2P pair under one
    switch moves at the copy efficiency (hardware.md 5.1: 50-55 of 63 GB/s on Gen5), not at an NCCL ring's 0.62
    (before: the ring's)."""
    from autotune.perf import efficiency as eff
    from autotune.perf.topology import transfer_s

    topo = comm.topology(pro)
    pair = (0, 1)
    gib = float(1 << 30)
    copy = transfer_s(topo, {pair: gib}, p2p_eff=eff.PCIE_COPY_EFFICIENCY)
    ring = transfer_s(topo, {pair: gib}, p2p_eff=eff.PCIE_COLLECTIVE_EFFICIENCY)
    assert copy < ring
    assert comm.kv_transfer_s(pro, (0,), (1,), gib) == pytest.approx(copy)


def _with_arch(hw, arch):
    return dataclasses.replace(hw, accelerators=tuple(dataclasses.replace(a, arch=arch) for a in hw.accelerators))


def _with_cpu(hw, cpu_model):
    return dataclasses.replace(hw, host=dataclasses.replace(hw.host, cpu_model=cpu_model))


def test_nccl_runs_simple_on_small_messages_when_its_ring_search_fails_across_amd_sockets(pro):
    """Blackwell GPUs on both sockets of an AMD host: NCCL rates the inter-CPU link at 16 GB/s, below the 18 GB/s
    its ring search stops at for compute capability >= 10.0, falls back to a 0.1 GB/s graph and its tuner picks
    Simple past a few KB (comm_rates.NCCL_AMD_INTER_CPU_GBS). The rtx-pro-6000-x8 box's own 8-GPU curve: 28.6 us at
    256 B, 66-86 us at 4-256 KB (rtx6kpro-asus-nccl-p2p-level)."""
    hw = modelled(pro)
    at = lambda box, group, n: comm.all_reduce_s(box, group, n, nccl()) * 1e6  # noqa: E731
    small, past = at(hw, EIGHT, 2 * KIB), at(hw, EIGHT, 8 * KIB)
    assert small < 40 and past > 1.5 * small  # LL below the tuner's switch point, Simple's latency above it
    # the same sizes stay on LL where NCCL finds a ring: one socket, a Hopper part, an Intel host
    for box, group in ((hw, (0, 1, 2, 3)), (_with_arch(hw, "sm_90"), EIGHT), (_with_cpu(hw, "Intel Xeon"), EIGHT)):
        assert at(box, group, 8 * KIB) < 1.2 * at(box, group, 2 * KIB)


def test_simple_ring_steps_cost_the_fitted_step_time_while_the_tuner_rates_with_its_own(pro, monkeypatch):
    """On the fallback ring the tuner picks the protocol with NCCL's latency table (5.7 us a Simple step), but the
    time of the Simple steps it runs is comm_rates.NCCL_PCIE_SIMPLE_STEP_US: moving that moves an 8 KB all-reduce
    by 14 steps x the change and leaves the protocol choice (LL at 2 KB) alone."""
    hw = modelled(pro)

    def at(nbytes):
        comm._nccl_profile.cache_clear()
        comm._all_reduce.cache_clear()
        return comm.all_reduce_s(hw, EIGHT, nbytes, nccl()) * 1e6

    before = at(2 * KIB), at(8 * KIB)
    monkeypatch.setattr(cr, "NCCL_PCIE_SIMPLE_STEP_US", cr.NCCL_PCIE_SIMPLE_STEP_US + 1.0)
    after = at(2 * KIB), at(8 * KIB)
    monkeypatch.undo()
    at(0)  # clear the caches filled under the patched value
    assert after[0] == pytest.approx(before[0])
    assert after[1] - before[1] == pytest.approx(14.0, rel=0.01)
