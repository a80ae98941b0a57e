import pytest
import yaml

from autotune.engines import ENGINE_VERSIONS, validate_argv
from autotune.engines.flags import FLAGS_DIR, load_table
from autotune.specs.errors import MiTuneError


@pytest.mark.parametrize("engine", sorted(ENGINE_VERSIONS))
def test_every_pinned_version_has_a_table_that_records_its_extraction(engine):
    version = ENGINE_VERSIONS[engine]
    doc = yaml.safe_load((FLAGS_DIR / f"{engine}-{version}.yaml").read_text())
    assert (doc["schema"], doc["engine"], doc["version"]) == ("mi-tune/engine-flags/v1", engine, version)
    assert doc["wheel"].startswith(engine.replace("-", "_") + "-" + version)
    assert len(doc["wheel_sha256"]) == 64
    assert "flags_extract.py" in doc["extracted"]["command"]
    assert len(doc["flags"]) > 50


@pytest.mark.parametrize(
    ("engine", "argv"),
    [
        ("vllm", ["vllm", "serve", "org/model", "-tp", "2", "--enable-expert-parallel", "--no-enable-dbo"]),
        ("vllm", ["org/model", "--tensor-parallel-size=2", "--enable-custom-all-reduce", "--max-num-seqs", "8"]),
        ("vllm", ["vllm", "serve", "m", "--compilation-config", '{"pass_config":{"fuse_allreduce_rms":true}}']),
        (
            "sglang",
            ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tensor-parallel-size", "2", "--ep", "2"],
        ),
        ("sglang", ["/venv/bin/python", "-m", "sglang.launch_server", "--chunked-prefill-size", "-1"]),
        ("sglang-router", ["--pd-disaggregation", "--prefill", "http://h:1", "8998", "--decode", "http://h:2"]),
    ],
)
def test_accepts_real_flags_aliases_and_command_prefixes(engine, argv):
    validate_argv(engine, ENGINE_VERSIONS[engine], argv)


def test_rejects_an_invented_flag_naming_it_and_the_version():
    with pytest.raises(
        MiTuneError, match=r"vllm 0\.34\.0 does not accept flag --tensor-paralel-size.*--tensor-parallel-size"
    ):
        validate_argv("vllm", "0.34.0", ["vllm", "serve", "m", "--tensor-paralel-size", "2"])


@pytest.mark.parametrize(
    ("engine", "argv", "match"),
    [
        ("vllm", ["--attention-backend", "TRITON"], r"vllm 0\.34\.0: --attention-backend 'TRITON' is not one of"),
        ("vllm", ["--all2all-backend", "deepep"], r"--all2all-backend 'deepep'"),
        ("sglang", ["--kv-cache-dtype", "fp8"], r"sglang 0\.5\.23: --kv-cache-dtype 'fp8' is not one of"),
        ("sglang", ["--deepep-mode=lowlatency"], r"--deepep-mode 'lowlatency'"),
        ("sglang-router", ["--policy", "least_load"], r"sglang-router 0\.3\.2: --policy 'least_load'"),
    ],
)
def test_rejects_a_bad_choice(engine, argv, match):
    with pytest.raises(MiTuneError, match=match):
        validate_argv(engine, ENGINE_VERSIONS[engine], argv)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--enable-dbo=true"], "takes no value"),
        (["--max-num-seqs"], "expects 1 value"),
        (["--max-num-seqs", "--enable-dbo"], "expects 1 value"),
        (["m", "extra"], "positional"),
        (["--compilation-config", '{"pass_config":{"enable_sp":true}}'], "no key 'pass_config.enable_sp'"),
        (["--kv-transfer-config", '{"kv_connector":"NixlConnector","role":"x"}'], "no key 'role'"),
        (["--compilation-config", "{not json"], "needs a JSON object"),
    ],
)
def test_rejects_malformed_values(argv, match):
    with pytest.raises(MiTuneError, match=match):
        validate_argv("vllm", "0.34.0", argv)


def test_abbreviations_are_rejected_though_argparse_may_expand_them():
    with pytest.raises(MiTuneError, match="does not accept flag --tp "):
        validate_argv("sglang", "0.5.23", ["--tp", "2"])


def test_removed_and_renamed_flags_are_rejected():
    # engines.md: SGLang 0.5.23 dropped --cuda-graph-max-bs; vLLM 0.34.0 has no --max-num-partial-prefills
    with pytest.raises(MiTuneError, match="--cuda-graph-max-bs"):
        validate_argv("sglang", "0.5.23", ["--cuda-graph-max-bs", "64"])
    with pytest.raises(MiTuneError, match="--max-num-partial-prefills"):
        validate_argv("vllm", "0.34.0", ["--max-num-partial-prefills", "2"])


def test_unpinned_version_is_a_one_line_error():
    with pytest.raises(MiTuneError, match=r"no flag table for vllm 0\.99\.0 \(pinned: .*vllm 0\.34\.0"):
        validate_argv("vllm", "0.99.0", [])


def test_table_knows_nargs_and_json_fields():
    table = load_table("sglang-router", "0.3.2")
    assert table.options["--prefill"].nargs == "+"
    assert table.options["--worker-urls"].nargs == "*"
    vllm = load_table("vllm", "0.34.0")
    assert "fuse_allreduce_rms" in vllm.json_fields["--compilation-config"]["pass_config"]
    assert vllm.options["-tp"] is vllm.options["--tensor-parallel-size"]
