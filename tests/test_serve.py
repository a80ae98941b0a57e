"""serve is safe and portable: it rebuilds the launch from best.yaml's plan, needs no other file, checks its flags."""

import json
import shutil
from importlib.resources import files

import pytest
import yaml

from autotune import api
from autotune.cli import run
from autotune.specs import dump_yaml, load_best

HF_ID = "meta-llama/Llama-3.1-70B-Instruct"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A local model directory: the catalog's Llama 3.1 70B config.json, as a downloaded checkpoint has it."""
    path = tmp_path_factory.mktemp("models") / "Llama-3.1-70B"
    path.mkdir()
    config = json.loads((files("autotune.catalog") / "models" / "llama-3.1-70b.json").read_text())
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, model_dir):
    out = tmp_path_factory.mktemp("serve") / "run"
    argv = ["search", "--model", str(model_dir / "config.json"), "--preset", "h200-x8", "--trials", "20"]
    assert run([*argv, "--seed", "3", "--out", str(out)]) == 0
    return out


def _alone(run_dir, tmp_path, edit=None):
    """best.yaml copied alone into a fresh directory (no hardware.yaml beside it), optionally edited as a mapping."""
    doc = yaml.safe_load((run_dir / "best.yaml").read_text())
    if edit:
        edit(doc)
    path = tmp_path / "elsewhere" / "best.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _dry_run(path, capsys, *flags):
    code = run(["serve", str(path), "--dry-run", *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_best_yaml_embeds_the_hardware_profile_and_round_trips(run_dir):
    best = load_best(run_dir / "best.yaml")
    assert best.hardware.profile is not None
    assert best.hardware.profile.fingerprint == best.hardware.fingerprint
    assert best.hardware.profile.num_gpus == best.hardware.num_gpus
    assert dump_yaml(best) == (run_dir / "best.yaml").read_text()


def test_a_local_model_is_served_from_its_directory(run_dir, model_dir):
    best = load_best(run_dir / "best.yaml")
    for proc in best.launch.processes:
        if proc.role == "router":
            continue
        model = proc.argv[2] if proc.argv[:2] == ("vllm", "serve") else proc.argv[proc.argv.index("--model-path") + 1]
        assert model == str(model_dir.resolve())
        assert HF_ID not in proc.argv and "" not in proc.argv


def test_a_catalog_model_is_served_by_its_hf_id(tmp_path):
    out = tmp_path / "run"
    assert run(["search", "--model", "llama-3.1-70b", "--preset", "h200-x8", "--trials", "10", "--out", str(out)]) == 0
    servers = [p for p in load_best(out / "best.yaml").launch.processes if p.role != "router"]
    assert servers and all(HF_ID in p.argv for p in servers)


def test_best_yaml_alone_is_enough_to_serve(run_dir, tmp_path, capsys):
    code, out, err = _dry_run(_alone(run_dir, tmp_path), capsys)
    assert code == 0 and err == ""
    assert out == _dry_run(run_dir / "best.yaml", capsys)[1]


def test_an_old_best_yaml_needs_hardware_yaml_beside_it(run_dir, tmp_path, capsys):
    path = _alone(run_dir, tmp_path, lambda doc: doc["hardware"].pop("profile"))
    code, _, err = _dry_run(path, capsys)
    assert code == 2
    assert err.startswith(f"mi-tune: error: {path}: records no hardware profile") and "hardware.yaml" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    shutil.copy(run_dir / "hardware.yaml", path.parent / "hardware.yaml")
    code, out, err = _dry_run(path, capsys)
    assert code == 0 and err == "" and out == _dry_run(run_dir / "best.yaml", capsys)[1]


def _servers(doc):
    return [p for p in doc["launch"]["processes"] if p["role"] != "router"]


def _add_trust_remote_code(doc):
    _servers(doc)[0]["argv"].append("--trust-remote-code")


def _executable_is_rm(doc):
    _servers(doc)[0]["argv"][:2] = ["rm", "-rf"]


def _preload_a_library(doc):
    _servers(doc)[0]["env"]["LD_PRELOAD"] = "/tmp/evil.so"


@pytest.mark.parametrize(
    ("tamper", "field", "planted"),
    [
        (_add_trust_remote_code, "argv", "--trust-remote-code"),
        (_executable_is_rm, "argv", "rm -rf"),
        (_preload_a_library, "env", "LD_PRELOAD"),
    ],
)
def test_a_tampered_launch_is_never_run(run_dir, tmp_path, capsys, tamper, field, planted):
    name = _servers(yaml.safe_load((run_dir / "best.yaml").read_text()))[0]["name"]
    code, out, err = _dry_run(_alone(run_dir, tmp_path, tamper), capsys)
    assert code == 0
    assert out == _dry_run(run_dir / "best.yaml", capsys)[1]  # the rebuilt commands, not the tampered ones
    assert planted not in out
    assert err == (
        f"mi-tune: warning: {tmp_path / 'elsewhere' / 'best.yaml'}: launch.processes[{name}].{field} differs from "
        "the launch rebuilt from the plan; running the rebuilt one\n"
    )


@pytest.mark.parametrize(
    "nccl", [{"LD_PRELOAD": "/tmp/evil.so"}, {"NCCL_DEBUG": "INFO; rm -rf /"}, {"NCCL_ALGO": "$(reboot)"}]
)
def test_a_plan_cannot_smuggle_environment_through_its_nccl_settings(run_dir, tmp_path, capsys, nccl):
    def edit(doc):
        for phase in doc["phases"].values():
            phase["comm"]["nccl"] = nccl

    code, out, err = _dry_run(_alone(run_dir, tmp_path, edit), capsys)
    assert code == 2 and out == ""
    assert "comm.nccl" in err and "is not an NCCL variable with a plain value" in err and err.count("\n") == 1


def test_host_and_port_apply_to_every_server(run_dir):
    launch = api.serve_launch(str(run_dir / "best.yaml"), "0.0.0.0", 9000).launch
    for proc in launch.processes:
        assert proc.host == "0.0.0.0"
        assert proc.argv[proc.argv.index("--host") + 1] == "0.0.0.0"
    assert launch.endpoint == "http://127.0.0.1:9000"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--host", "0.0.0.0; rm -rf /"], "--host: expected a host name or an IP address"),
        (["--host", "my host"], "--host: expected a host name or an IP address"),
        (["--host", "$(id)"], "--host: expected a host name or an IP address"),
        (["--host", ""], "--host: expected a host name or an IP address"),
        (["--host", "[::1]"], "--host: expected a host name or an IP address"),
        (["--port", "0"], "--port: expected 1..65535, got 0"),
        (["--port", "70000"], "--port: expected 1..65535, got 70000"),
        (["--port", "65535"], "--port 65535: "),
    ],
)
def test_bad_host_or_port_is_one_line_and_exit_2(run_dir, capsys, flags, message):
    code, out, err = _dry_run(run_dir / "best.yaml", capsys, *flags)
    assert code == 2 and out == ""
    assert err.startswith(f"mi-tune: error: {message}")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("host", ["localhost", "gpu-box-1.lab.example.com", "10.0.0.7", "::", "fe80::1"])
def test_host_names_and_ip_literals_are_accepted(run_dir, capsys, host):
    code, out, _ = _dry_run(run_dir / "best.yaml", capsys, "--host", host, "--port", "8100")
    assert code == 0 and f"--host {host} " in out
