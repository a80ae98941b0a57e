import json

import pytest

from autotune.capability import ENGINE_VENDORS
from autotune.engines import EMITTERS, ENGINE_VERSIONS, build_launch, validate_argv
from autotune.engines.flags import load_table
from autotune.specs import Batching, Comm, Kernels, Overlap, PhasePlan, Plan
from autotune.specs.errors import MiTuneError

ENGINES = sorted(e for e in EMITTERS if "nvidia" in ENGINE_VENDORS[e])  # CUDA emitters; Ascend: test_vllm_ascend.py
FRONT_TABLE = {"vllm": "vllm-router", "sglang": "sglang-router"}


def values(argv, *names) -> list[str]:
    """Every value given to any of the option strings `names` (argv is a simple flag/value list)."""
    argv = list(argv)
    return [argv[i + 1] for i, a in enumerate(argv) if a in names]


def value(argv, *names):
    found = values(argv, *names)
    return found[0] if found else None


def parallel_of(engine: str, argv) -> dict[str, int]:
    """tp/dp/ep/pp as mi-tune means them, read back from an engine's argv."""
    if engine == "vllm":
        tp, dp, pp = (int(value(argv, *flags)) for flags in (("-tp",), ("-dp",), ("-pp",)))
        return {"tp": tp, "dp": dp, "pp": pp, "ep": tp * dp if "--enable-expert-parallel" in argv else 1}
    dp = int(value(argv, "--attn-dp-size") or 1)
    return {
        "tp": int(value(argv, "--tp-size")) // dp,
        "dp": dp,
        "pp": int(value(argv, "--pp-size")),
        "ep": int(value(argv, "--ep-size") or 1),
    }


def phase(gpus, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(gpus), dp_attention=kw.get("dp", 1) > 1, **kw)


def layouts():
    """(mode, phases) covering aggregated, replicas and disaggregated layouts with every parallel dimension."""
    return {
        "agg-tp": ("aggregated", {"both": phase(range(4), tp=4)}),
        "agg-dp-ep": ("aggregated", {"both": phase(range(8), tp=2, dp=4, ep=8)}),
        "agg-pp": ("aggregated", {"both": phase(range(4), tp=2, pp=2)}),
        "replicas": ("aggregated", {"both": phase(range(8), replicas=4, tp=2)}),
        "disagg": (
            "disaggregated",
            {"prefill": phase(range(4), tp=1, dp=4, ep=4), "decode": phase(range(4, 8), replicas=2, tp=2, ep=2)},
        ),
    }


LAYOUTS = layouts()


def servers(launch):
    return [p for p in launch.processes if p.role != "router"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_parallel_flags_equal_the_plan(engine, layout, moe_model, box):
    mode, phases = LAYOUTS[layout]
    plan = Plan(engine=engine, mode=mode, phases=phases)
    launch = build_launch(plan, moe_model, box)
    expected = [
        (name, replica)
        for name in ("both", "prefill", "decode")
        if name in phases
        for replica in range(phases[name].replicas)
    ]
    assert len(servers(launch)) == len(expected)
    for proc, (name, replica) in zip(servers(launch), expected, strict=True):
        p = phases[name]
        assert parallel_of(engine, proc.argv) == {"tp": p.tp, "dp": p.dp, "pp": p.pp, "ep": p.ep}
        assert proc.gpus == p.replica_gpus(replica)
        assert proc.env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, p.replica_gpus(replica)))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_emitted_argv_passes_the_pinned_flag_table(engine, layout, moe_model, box):
    mode, phases = LAYOUTS[layout]
    launch = build_launch(Plan(engine=engine, mode=mode, phases=phases), moe_model, box)
    assert launch.engine_version == ENGINE_VERSIONS[engine]
    for proc in launch.processes:
        table = engine if proc.role != "router" else FRONT_TABLE[engine]
        if table:
            validate_argv(table, ENGINE_VERSIONS[table], proc.argv)
        assert all(isinstance(a, str) for a in proc.argv)


@pytest.mark.parametrize("engine", ENGINES)
def test_single_instance_serves_the_endpoint_itself(engine, dense_model, box):
    plan = Plan(engine=engine, mode="aggregated", phases={"both": phase(range(2), tp=2)})
    launch = build_launch(plan, dense_model, box, host="0.0.0.0", port=9000)
    (proc,) = launch.processes
    assert (proc.role, proc.host, proc.port) == ("server", "0.0.0.0", 9000)
    assert (value(proc.argv, "--host"), value(proc.argv, "--port")) == ("0.0.0.0", "9000")
    assert launch.endpoint == "http://127.0.0.1:9000"
    assert proc.numa_node == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_replicas_get_disjoint_gpus_distinct_ports_and_a_router(engine, dense_model, box):
    plan = Plan(engine=engine, mode="aggregated", phases={"both": phase(range(8), replicas=4, tp=2)})
    launch = build_launch(plan, dense_model, box, port=8000)
    workers, router = servers(launch), launch.processes[-1]
    assert [w.gpus for w in workers] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert [w.numa_node for w in workers] == [0, 0, 1, 1]
    ports = [w.port for w in workers]
    assert len(set(ports)) == 4 and 8000 not in ports
    assert all(w.host == "127.0.0.1" for w in workers)
    assert (router.role, router.port, router.gpus) == ("router", 8000, ())
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    start = router.argv.index("--worker-urls") + 1
    assert list(router.argv[start : start + 4]) == urls
    assert launch.endpoint == "http://127.0.0.1:8000"


def test_vllm_disaggregated_uses_nixl_and_distinct_side_channel_ports(moe_model, box):
    _, phases = LAYOUTS["disagg"]
    launch = build_launch(Plan(engine="vllm", mode="disaggregated", phases=phases), moe_model, box)
    prefill, decode0, decode1, router = launch.processes
    for proc in (prefill, decode0, decode1):
        config = json.loads(value(proc.argv, "--kv-transfer-config"))
        assert config["kv_connector"] == "NixlConnector"
    # the prefill instance has dp=4 ranks: base + dp_rank, so the next instance starts 4 ports later
    side = [int(p.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]) for p in (prefill, decode0, decode1)]
    assert side == [5600, 5604, 5605]
    assert value(prefill.argv, "--all2all-backend") is None  # allgather_reducescatter is the default
    assert router.argv[:3] == ("python3", "-m", "vllm_router.launch_router")
    assert "--vllm-pd-disaggregation" in router.argv
    assert values(router.argv, "--prefill") == [f"http://127.0.0.1:{prefill.port}"]
    assert values(router.argv, "--decode") == [f"http://127.0.0.1:{decode0.port}", f"http://127.0.0.1:{decode1.port}"]


def test_sglang_disaggregated_bootstrap_ports_reach_the_router(moe_model, box):
    prefill = phase(range(4), replicas=2, tp=2, ep=2)
    decode = phase(range(4, 8), tp=1, dp=4, ep=4)
    plan = Plan(engine="sglang", mode="disaggregated", phases={"prefill": prefill, "decode": decode})
    launch = build_launch(plan, moe_model, box)
    p0, p1, d0, router = launch.processes
    assert [value(p.argv, "--disaggregation-mode") for p in (p0, p1, d0)] == ["prefill", "prefill", "decode"]
    assert {value(p.argv, "--disaggregation-transfer-backend") for p in (p0, p1, d0)} == {"nixl"}
    boot = [value(p.argv, "--disaggregation-bootstrap-port") for p in (p0, p1)]
    assert len(set(boot)) == 2 and value(d0.argv, "--disaggregation-bootstrap-port") is None
    argv = list(router.argv)
    assert "--pd-disaggregation" in argv
    pairs = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--prefill"]
    assert pairs == [[f"http://127.0.0.1:{p0.port}", boot[0]], [f"http://127.0.0.1:{p1.port}", boot[1]]]
    assert values(argv, "--decode") == [f"http://127.0.0.1:{d0.port}"]


KERNELS = {
    "vllm": Kernels(attention="flashinfer", moe="triton", gemm_dtype="fp8", kv_cache_dtype="fp8", linear="cutlass"),
    "sglang": Kernels(attention="flashinfer", moe="triton", gemm_dtype="fp8", kv_cache_dtype="fp8"),
}
EXPECTED_KERNEL_ARGS = {
    "vllm": {
        "--attention-backend": "FLASHINFER",
        "--moe-backend": "triton",
        "--quantization": "fp8_per_tensor",
        "--kv-cache-dtype": "fp8",
        "--linear-backend": "cutlass",
    },
    "sglang": {
        "--attention-backend": "flashinfer",
        "--moe-runner-backend": "triton",
        "--quantization": "fp8",
        "--kv-cache-dtype": "fp8_e4m3",
    },
}


@pytest.mark.parametrize("engine", ENGINES)
def test_kernel_vocabulary_maps_to_engine_values(engine, moe_model, nvlink_box):
    plan = Plan(engine=engine, mode="aggregated", phases={"both": phase(range(2), tp=2, kernels=KERNELS[engine])})
    (proc,) = build_launch(plan, moe_model, nvlink_box).processes
    assert {flag: value(proc.argv, flag) for flag in EXPECTED_KERNEL_ARGS[engine]} == EXPECTED_KERNEL_ARGS[engine]


@pytest.mark.parametrize(("engine", "backend"), [("vllm", "TRITON_MLA"), ("sglang", "triton")])
def test_mla_models_get_mla_attention_backends(engine, backend, mla_model, box):
    kernels = Kernels(attention="triton")
    plan = Plan(engine=engine, mode="aggregated", phases={"both": phase(range(2), tp=2, kernels=kernels)})
    (proc,) = build_launch(plan, mla_model, box).processes
    assert value(proc.argv, "--attention-backend") == backend


@pytest.mark.parametrize("engine", ENGINES)
def test_auto_emits_no_kernel_flags_and_fp8_checkpoints_are_not_requantised(engine, fp8_model, box):
    kernels = Kernels(gemm_dtype="fp8")
    plan = Plan(engine=engine, mode="aggregated", phases={"both": phase(range(1), kernels=kernels)})
    (proc,) = build_launch(plan, fp8_model, box).processes
    emitted = set(proc.argv)
    assert not emitted & {
        "--attention-backend",
        "--moe-backend",
        "--moe-runner-backend",
        "--quantization",
        "--kv-cache-dtype",
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_nccl_env_custom_allreduce_and_batching(engine, dense_model, box):
    comm = Comm(allreduce="nccl", nccl={"NCCL_P2P_LEVEL": "PHB", "NCCL_ALGO": "Ring"})
    batching = Batching(max_running=48, chunked_prefill_tokens=4096)
    plan = Plan(engine=engine, mode="aggregated", phases={"both": phase(range(2), tp=2, comm=comm, batching=batching)})
    (proc,) = build_launch(plan, dense_model, box).processes
    assert proc.env["NCCL_P2P_LEVEL"] == "PHB" and proc.env["NCCL_ALGO"] == "Ring"
    assert proc.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "--disable-custom-all-reduce" in proc.argv
    if engine == "vllm":  # vLLM's FlashInfer and symmetric-memory all-reduces are not the custom kernel: off too
        assert proc.env["VLLM_ALLREDUCE_USE_FLASHINFER"] == proc.env["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    running, chunk = {"vllm": ("--max-num-seqs", "--max-num-batched-tokens")}.get(
        engine, ("--max-running-requests", "--chunked-prefill-size")
    )
    assert (value(proc.argv, running), value(proc.argv, chunk)) == ("48", "4096")


def test_vllm_fusion_goes_into_compilation_config_pass_config(dense_model, nvlink_box):
    for on in (True, False):
        plan = Plan(
            engine="vllm", mode="aggregated", phases={"both": phase(range(2), tp=2, fusion={"allreduce_rmsnorm": on})}
        )
        (proc,) = build_launch(plan, dense_model, nvlink_box).processes
        assert json.loads(value(proc.argv, "--compilation-config")) == {"pass_config": {"fuse_allreduce_rms": on}}
    assert "fuse_allreduce_rms" in load_table("vllm", "0.34.0").json_fields["--compilation-config"]["pass_config"]


def test_sglang_fusion_only_off_needs_a_flag(moe_model, nvlink_box):
    """On is SGLang's default for the architectures it lists (Qwen3-MoE, not Llama: arg_groups/overrides.py:928-951)."""

    def argv(on):
        plan = Plan(
            engine="sglang", mode="aggregated", phases={"both": phase(range(2), tp=2, fusion={"allreduce_rmsnorm": on})}
        )
        return build_launch(plan, moe_model, nvlink_box).processes[0].argv

    assert "--enforce-disable-flashinfer-allreduce-fusion" in argv(False)
    assert "--enforce-disable-flashinfer-allreduce-fusion" not in argv(True)


def test_deepep_per_phase_modes(moe_model, nvlink_box):
    deepep = Comm(all2all="deepep")
    phases = {
        "prefill": phase(range(4), dp=4, ep=4, comm=deepep),
        "decode": phase(range(4, 8), dp=4, ep=4, comm=deepep),
    }
    vllm = build_launch(Plan(engine="vllm", mode="disaggregated", phases=phases), moe_model, nvlink_box)
    assert [value(p.argv, "--all2all-backend") for p in servers(vllm)] == [
        "deepep_high_throughput",
        "deepep_low_latency",
    ]
    sglang = build_launch(Plan(engine="sglang", mode="disaggregated", phases=phases), moe_model, nvlink_box)
    assert [value(p.argv, "--moe-a2a-backend") for p in servers(sglang)] == ["deepep", "deepep"]
    assert [value(p.argv, "--deepep-mode") for p in servers(sglang)] == ["normal", "low_latency"]


@pytest.mark.parametrize("engine", ENGINES)
def test_two_batch_overlap_with_deepep(engine, moe_model, nvlink_box):
    both = phase(range(4), dp=4, ep=4, comm=Comm(all2all="deepep"), overlap=Overlap(two_batch=True))
    plan = Plan(engine=engine, mode="aggregated", phases={"both": both})
    (proc,) = build_launch(plan, moe_model, nvlink_box).processes
    assert {"vllm": "--enable-dbo", "sglang": "--enable-two-batch-overlap"}[engine] in proc.argv


def test_vllm_two_batch_without_deepep_is_refused(moe_model, nvlink_box):
    both = phase(range(4), dp=4, ep=4, overlap=Overlap(two_batch=True))
    with pytest.raises(MiTuneError, match=r"vllm 0\.34\.0: overlap\.two_batch=true: --enable-dbo needs a DeepEP"):
        build_launch(Plan(engine="vllm", mode="aggregated", phases={"both": both}), moe_model, nvlink_box)


def test_sglang_two_batch_without_deepep_needs_dp_attention(moe_model, box):
    both = phase(range(4), tp=4, overlap=Overlap(two_batch=True))
    with pytest.raises(MiTuneError, match="without an all-to-all backend two-batch overlap needs DP attention"):
        build_launch(Plan(engine="sglang", mode="aggregated", phases={"both": both}), moe_model, box)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"comm": Comm(all2all="deepep")}, r"all2all=deepep: .*(NVLink|expert parallelism)"),
        ({"kernels": Kernels(attention="flash_attn")}, "cannot express attention flash_attn"),
        ({"kernels": Kernels(moe="aiter")}, "cannot express moe kernel 'aiter'"),
        ({"fusion": {"attn_quant": True}}, "cannot express fusion 'attn_quant'"),
    ],
)
def test_inexpressible_plans_fail_with_one_line(engine, change, match, moe_model, box):
    plan = Plan(engine=engine, mode="aggregated", phases={"both": phase(range(2), tp=2, **change)})
    with pytest.raises(MiTuneError, match=match):
        build_launch(plan, moe_model, box)


def test_plan_engine_must_match_the_emitter(dense_model, box):
    plan = Plan(engine="sglang", mode="aggregated", phases={"both": phase(range(1))})
    with pytest.raises(MiTuneError, match="plan is for sglang"):
        EMITTERS["vllm"](plan, dense_model, box)


def test_gpus_outside_the_box_are_refused(dense_model, box):
    plan = Plan(engine="vllm", mode="aggregated", phases={"both": phase((8, 9), tp=2)})
    with pytest.raises(MiTuneError, match=r"gpus: \[8, 9\] not on this box"):
        build_launch(plan, dense_model, box)


@pytest.mark.parametrize("engine", ENGINES)
def test_cuda_graph_max_bs_is_emitted_only_when_the_plan_sets_it(engine, dense_model, nvlink_box):
    """vLLM 0.34: compilation_config max_decode_cudagraph_capture_requests (the key that sets the decode graphs'
    request count, vllm/config/vllm.py:2655-2659), merged with the fusion passes into one --compilation-config;
    SGLang 0.5.23: --cuda-graph-max-bs-decode. build_launch checks the argv against the engine's flag table."""

    def argv(graph_bs, fusion=None):
        both = phase(range(2), tp=2, batching=Batching(cuda_graph_max_bs=graph_bs), fusion=fusion or {})
        plan = Plan(engine=engine, mode="aggregated", phases={"both": both})
        (proc,) = build_launch(plan, dense_model, nvlink_box).processes
        return proc.argv

    if engine == "vllm":
        assert value(argv(None), "--compilation-config") is None
        assert json.loads(value(argv(256), "--compilation-config")) == {"max_decode_cudagraph_capture_requests": 256}
        merged = argv(128, {"allreduce_rmsnorm": True})
        assert values(merged, "--compilation-config") == [
            '{"pass_config":{"fuse_allreduce_rms":true},"max_decode_cudagraph_capture_requests":128}'
        ]
    else:
        assert "--cuda-graph-max-bs-decode" not in argv(None)
        assert value(argv(256), "--cuda-graph-max-bs-decode") == "256"
