import pytest

from autotune.engines import ENGINE_VERSIONS, build_launch, validate_argv
from autotune.engines.routers import SGLANG_ROUTER, VLLM_ROUTER
from autotune.engines.supervisor import INSTALL_HINTS
from autotune.specs import PhasePlan, Plan
from autotune.specs.errors import MiTuneError

VLLM_ROUTER_MODULE = ("python3", "-m", "vllm_router.launch_router")


def phase(gpus, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(gpus), dp_attention=kw.get("dp", 1) > 1, **kw)


REPLICAS = ("aggregated", {"both": phase(range(8), replicas=4, tp=2)})
DISAGG = (
    "disaggregated",
    {"prefill": phase(range(4), replicas=2, tp=2, ep=2), "decode": phase(range(4, 8), dp=4, ep=4)},
)


def launch_of(engine, layout, model, box, **kw):
    mode, phases = layout
    return build_launch(Plan(engine=engine, mode=mode, phases=phases), model, box, **kw)


def values(argv, name) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def router_of(launch):
    *servers, router = launch.processes
    assert router.role == "router" and all(p.role != "router" for p in servers)
    return servers, list(router.argv)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_vllm_replicas_are_fronted_by_vllm_router_on_the_given_host(host, moe_model, box):
    servers, argv = router_of(launch_of("vllm", REPLICAS, moe_model, box, host=host, port=9000))
    assert tuple(argv[:3]) == VLLM_ROUTER_MODULE
    start = argv.index("--worker-urls") + 1
    assert argv[start : start + len(servers)] == [f"http://127.0.0.1:{s.port}" for s in servers]
    assert (values(argv, "--host"), values(argv, "--port"), values(argv, "--policy")) == (
        [host],
        ["9000"],
        ["round_robin"],
    )
    assert "--vllm-pd-disaggregation" not in argv
    validate_argv(VLLM_ROUTER, ENGINE_VERSIONS[VLLM_ROUTER], argv)


def test_vllm_disaggregation_uses_the_routers_nixl_mode_without_bootstrap_ports(moe_model, box):
    servers, argv = router_of(launch_of("vllm", DISAGG, moe_model, box))
    assert tuple(argv[:3]) == VLLM_ROUTER_MODULE
    assert "--vllm-pd-disaggregation" in argv and values(argv, "--kv-connector") == ["nixl"]
    urls = {role: [f"http://127.0.0.1:{s.port}" for s in servers if s.role == role] for role in ("prefill", "decode")}
    assert values(argv, "--prefill") == urls["prefill"] and len(urls["prefill"]) == 2
    assert values(argv, "--decode") == urls["decode"]
    for i, token in enumerate(argv):  # NIXL pulls KV: no bootstrap port after a prefill URL
        if token == "--prefill":
            assert argv[i + 2].startswith("--")
    assert values(argv, "--host") == ["127.0.0.1"]
    validate_argv(VLLM_ROUTER, ENGINE_VERSIONS[VLLM_ROUTER], argv)


def test_sglang_router_argv_is_unchanged(moe_model, box):
    _, replicas = router_of(launch_of("sglang", REPLICAS, moe_model, box, port=9000))
    _, disagg = router_of(launch_of("sglang", DISAGG, moe_model, box, port=9000))
    command = ["python3", "-m", "sglang_router.launch_router"]
    workers = [f"http://127.0.0.1:{p}" for p in (9010, 9020, 9030, 9040)]
    assert replicas == [*command, "--worker-urls", *workers, "--host", "127.0.0.1", "--port", "9000"]
    assert disagg == [
        *command,
        "--pd-disaggregation",
        *("--prefill", "http://127.0.0.1:9010", "9011", "--prefill", "http://127.0.0.1:9020", "9021"),
        *("--decode", "http://127.0.0.1:9030", "--host", "127.0.0.1", "--port", "9000"),
    ]
    for argv in (replicas, disagg):
        validate_argv(SGLANG_ROUTER, ENGINE_VERSIONS[SGLANG_ROUTER], argv)


def test_each_router_is_pinned_checked_and_has_an_install_hint(moe_model, box):
    launches = {
        "vllm": launch_of("vllm", DISAGG, moe_model, box),
        "sglang": launch_of("sglang", DISAGG, moe_model, box),
    }
    for engine, table in (("vllm", VLLM_ROUTER), ("sglang", SGLANG_ROUTER)):
        _, argv = router_of(launches[engine])
        assert all(isinstance(a, str) for a in argv)
        hint = INSTALL_HINTS[argv[2].split(".")[0]]
        assert hint == f"pip install {table}=={ENGINE_VERSIONS[table]}"


def test_router_flag_tables_do_not_mix():
    with pytest.raises(MiTuneError, match=r"vllm-router 0\.1\.17 does not accept flag --pd-disaggregation"):
        validate_argv(VLLM_ROUTER, ENGINE_VERSIONS[VLLM_ROUTER], ["--pd-disaggregation"])
    with pytest.raises(MiTuneError, match=r"sglang-router 0\.3\.2 does not accept flag --vllm-pd-disaggregation"):
        validate_argv(SGLANG_ROUTER, ENGINE_VERSIONS[SGLANG_ROUTER], ["--vllm-pd-disaggregation"])
