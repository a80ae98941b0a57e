"""vLLM-Ascend 0.23.0.post1: the emitted `vllm serve` passes vLLM 0.23's real parser table, its --additional-config
keys are ones vllm_ascend/ascend_config.py reads, each server is placed with ASCEND_RT_VISIBLE_DEVICES and gets
its HCCL settings, and `search` on an Ascend preset ends in a best.yaml that `serve --dry-run` prints."""

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from autotune import capability
from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.cli import run
from autotune.engines import build_launch, validate_argv
from autotune.engines.flags import FLAGS_DIR
from autotune.specs import Comm, MiTuneError, PhasePlan, Plan

ASCEND_CONFIG = Path("/tmp/wheels/src/vllm-ascend/vllm_ascend/ascend_config.py")
A2, MODEL = load_preset("atlas-800i-a2"), load_model("qwen3-235b-a22b-w8a8")
PLATFORM = {"graph_mode": "FULL_DECODE_ONLY", "flashcomm1": "on", "weight_nz": "all", "hccl_op_expansion": "AIV"}


def plan(tp=4, dp=2, replicas=1, platform=None, **fields) -> Plan:
    gpus = tuple(range(tp * dp * replicas))
    phase = PhasePlan(
        gpus=gpus, tp=tp, dp=dp, replicas=replicas, dp_attention=dp > 1, platform=platform or {}, **fields
    )
    return Plan("vllm-ascend", "aggregated", {"both": phase})


def _additional_config(argv) -> dict:
    return json.loads(argv[list(argv).index("--additional-config") + 1])


def test_argv_passes_the_vllm_0_23_parser_table_and_the_plugin_keys():
    launch = build_launch(plan(platform=PLATFORM), MODEL, A2)
    (server,) = launch.processes
    argv = list(server.argv)
    assert argv[:3] == ["vllm", "serve", "Modelers_Park/Qwen3-235B-A22B-w8a8"]
    assert argv[argv.index("--quantization") + 1] == "ascend"  # msModelSlim W8A8 (platform.py:188-197)
    assert json.loads(argv[argv.index("--compilation-config") + 1]) == {"cudagraph_mode": "FULL_DECODE_ONLY"}
    assert _additional_config(argv) == {"enable_flashcomm1": True, "weight_nz_mode": 2}
    # the raw vLLM 0.23 table (extracted from its parser) accepts everything but the plugin's own 'ascend' choice
    raw = [a for i, a in enumerate(argv) if not (a == "--quantization" or argv[i - 1] == "--quantization")]
    validate_argv("vllm", "0.23.0", raw)
    with pytest.raises(MiTuneError, match="--quantization 'ascend' is not one of"):
        validate_argv("vllm", "0.23.0", argv)
    validate_argv("vllm-ascend", "0.23.0.post1", argv)


def test_the_derived_table_is_the_0_23_table_plus_cited_plugin_additions():
    base = yaml.safe_load((FLAGS_DIR / "vllm-0.23.0.yaml").read_text())
    derived = yaml.safe_load((FLAGS_DIR / "vllm-ascend-0.23.0.post1.yaml").read_text())
    assert set(derived["flags"]) == set(base["flags"]) and derived["derived"]["from_wheel"] == base["wheel"]
    changed = {f for f in base["flags"] if base["flags"][f] != derived["flags"][f]}
    assert changed == {"--quantization"}
    extra = set(derived["flags"]["--quantization"]["choices"]) - set(base["flags"]["--quantization"]["choices"])
    assert extra == {"ascend"} and all(
        "platform.py" in a or "ascend_config.py" in a for a in derived["derived"]["additions"]
    )


def test_every_additional_config_key_is_read_by_ascend_config():
    if not ASCEND_CONFIG.is_file():  # `make test` unpacks the sdist (.ci/test_deps.sh)
        pytest.fail(f"{ASCEND_CONFIG}: vllm-ascend 0.23.0.post1 source not unpacked: run `make test`")
    source = ASCEND_CONFIG.read_text()
    keys = yaml.safe_load((FLAGS_DIR / "vllm-ascend-0.23.0.post1.yaml").read_text())["json_fields"]
    for key in keys["--additional-config"]["top"]:
        assert re.search(rf'additional_config(\.get\(|,)\s*"{key}"', source), key


def test_unknown_additional_config_key_is_refused():
    argv = ["vllm", "serve", "m", "--additional-config", '{"enable_flashcom1": true}']
    with pytest.raises(MiTuneError, match="has no key 'enable_flashcom1'"):
        validate_argv("vllm-ascend", "0.23.0.post1", argv)


def test_each_replica_sees_its_npus_through_the_ascend_variable_with_hccl_env():
    launch = build_launch(plan(tp=2, dp=1, replicas=4, platform={"hccl_op_expansion": "AIV"}), MODEL, A2)
    servers = [p for p in launch.processes if p.role == "server"]
    assert [p.env["ASCEND_RT_VISIBLE_DEVICES"] for p in servers] == ["0,1", "2,3", "4,5", "6,7"]
    assert all("CUDA_VISIBLE_DEVICES" not in p.env and p.env["HCCL_OP_EXPANSION_MODE"] == "AIV" for p in servers)
    assert launch.processes[-1].role == "router" and len({p.port for p in servers}) == 4


def test_cuda_only_choices_and_nccl_settings_are_refused():
    with pytest.raises(MiTuneError, match="NCCL variables do not reach HCCL"):
        build_launch(plan(comm=Comm(nccl={"NCCL_PROTO": "LL"})), MODEL, A2)
    assert "runs on huawei accelerators only" in capability.check_plan(plan(), MODEL, load_preset("h200-x8"))


def test_search_on_the_a2_preset_gives_a_best_yaml_serve_prints(tmp_path, capsys):
    out = tmp_path / "run"
    code = run(["search", "--model", "qwen3-235b-a22b-w8a8", "--preset", "atlas-800i-a2", "--trials", "20",
                "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["engine"] == "vllm-ascend" and best["launch"]["engine_version"] == "0.23.0.post1"
    capsys.readouterr()
    assert run(["serve", str(out / "best.yaml"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    line = next(x for x in printed.splitlines() if " vllm serve " in x)
    words = shlex.split(line)
    assert words[0].startswith("ASCEND_RT_VISIBLE_DEVICES=") and "CUDA_VISIBLE_DEVICES" not in printed
    argv = words[words.index("vllm") :]
    validate_argv("vllm-ascend", "0.23.0.post1", argv)
    assert capability.check_plan(_plan_of(out), MODEL, A2) == ""


def _plan_of(out: Path) -> Plan:
    from autotune.specs import load_best

    return load_best(out / "best.yaml").plan
