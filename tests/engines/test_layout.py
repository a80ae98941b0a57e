import dataclasses

import pytest

from autotune.engines import build_launch
from autotune.engines.layout import model_arg, url
from autotune.specs import PhasePlan, Plan
from autotune.specs.errors import MiTuneError

ENGINES = ("sglang", "vllm")


def replicas_plan(engine: str) -> Plan:
    return Plan(engine=engine, mode="aggregated", phases={"both": PhasePlan(gpus=tuple(range(8)), replicas=4, tp=2)})


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("host", "reached_at"), [("0.0.0.0", "127.0.0.1"), ("::", "[::1]"), ("10.1.2.3", "10.1.2.3")])
def test_host_applies_to_servers_behind_a_router(engine, host, reached_at, dense_model, box):
    launch = build_launch(replicas_plan(engine), dense_model, box, host=host, port=9000)
    servers = [p for p in launch.processes if p.role != "router"]
    assert len(servers) == 4 and all(p.host == host for p in launch.processes)
    for proc in launch.processes:
        assert proc.argv[proc.argv.index("--host") + 1] == host
    router = " ".join(launch.processes[-1].argv)
    assert all(f"http://{reached_at}:{p.port}" in router for p in servers)


def test_url_reaches_wildcards_at_loopback():
    assert url("0.0.0.0", 1) == "http://127.0.0.1:1" and url("::", 2) == "http://[::1]:2"
    assert url("gpu-box", 3) == "http://gpu-box:3"


def test_model_arg_is_the_local_directory_else_the_hf_id(dense_model):
    assert model_arg(dense_model) == dense_model.hf_id
    assert model_arg(dataclasses.replace(dense_model, checkpoint_dir="/models/tiny")) == "/models/tiny"
    with pytest.raises(MiTuneError, match=r"model 'tiny-dense' has no Hugging Face id .* pass --model"):
        model_arg(dataclasses.replace(dense_model, hf_id=""))


@pytest.mark.parametrize("engine", ENGINES)
def test_an_emitter_refuses_a_model_without_an_id(engine, dense_model, box):
    with pytest.raises(MiTuneError, match="--model"):
        build_launch(replicas_plan(engine), dataclasses.replace(dense_model, hf_id=""), box)
