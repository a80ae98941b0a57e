"""The stand-in engine: what it takes from an engine argv, how `serve` swaps it in, and that stopping a launch
ends it."""

import io
import json
import sys

import pytest

from autotune.engines import standin
from autotune.engines.supervisor import Started
from autotune.specs import Launch, MiTuneError, ProcessSpec
from tests.loadgen.conftest import free_port


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["vllm", "serve", "org/m", "--host", "0.0.0.0", "--port", "8010", "-tp", "8"], ("0.0.0.0", 8010, "org/m")),
        (["python3", "-m", "sglang.launch_server", "--model-path", "x/y", "--port", "9"], ("127.0.0.1", 9, "x/y")),
        (
            ["python3", "-m", "vllm_router.launch_router", "--worker-urls", "http://a:1", "--port", "7"],
            ("127.0.0.1", 7, "stand-in"),
        ),  # fmt: skip
        (["vllm", "serve", "org/m", "--served-model-name", "alias"], ("127.0.0.1", 8000, "alias")),
    ],
)
def test_engine_args(argv, expected):
    assert standin.engine_args(argv) == expected


def test_timing_file_errors_name_the_key(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"tpot_ms": -1}))
    with pytest.raises(ValueError, match="tpot_ms: expected a number >= 0"):
        standin.load_timing(path)
    path.write_text(json.dumps({"tpot": 1}))
    with pytest.raises(ValueError, match="unknown keys tpot"):
        standin.load_timing(path)


def _launch(port: int) -> Launch:
    argv = ("vllm", "serve", "org/m", "--host", "127.0.0.1", "--port", str(port), "--enable-expert-parallel")
    proc = ProcessSpec("server-0", "server", argv, env={"CUDA_VISIBLE_DEVICES": "0"}, port=port)
    return Launch("vllm", "0.34.0", f"http://127.0.0.1:{port}", (proc,))


def test_substitute_keeps_the_engine_argv_and_env(tmp_path):
    timing = tmp_path / "t.json"
    timing.write_text("{}")
    launch = standin.substitute(_launch(8123), timing)
    proc = launch.processes[0]
    assert proc.argv[0] == sys.executable and proc.argv[1] == standin.__file__
    assert proc.argv[proc.argv.index("--") + 1 :] == _launch(8123).processes[0].argv
    assert proc.env == {"CUDA_VISIBLE_DEVICES": "0"} and launch.endpoint == "http://127.0.0.1:8123"
    with pytest.raises(MiTuneError, match="--stand-in"):
        standin.substitute(_launch(8123), tmp_path / "missing.json")


def test_started_launch_serves_and_stops(tmp_path):
    import urllib.request

    timing = tmp_path / "t.json"
    timing.write_text(json.dumps({"startup_s": 0.2}))
    port = free_port()
    log = io.StringIO()
    started = Started(standin.substitute(_launch(port), timing), log)
    try:
        import time

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("stand-in never became healthy")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == "org/m"
        assert started.exited() == ""
    finally:
        started.stop(grace_s=5)
    assert started.procs[0].poll() is not None
    assert "[server-0] stand-in engine: listening" in log.getvalue()


def test_a_stand_in_that_fails_says_why(tmp_path):
    timing = tmp_path / "t.json"
    timing.write_text(json.dumps({"fail": "CUDA out of memory (stand-in)"}))
    started = Started(standin.substitute(_launch(free_port()), timing), io.StringIO())
    try:
        started.procs[0].wait(timeout=10)
        why = started.exited()
    finally:
        started.stop(grace_s=1)
    assert "server-0 exited with code 1" in why and "CUDA out of memory (stand-in)" in why


def test_a_router_starts_only_once_its_servers_listen(tmp_path):
    timing = tmp_path / "t.json"
    timing.write_text(json.dumps({"fail": "weights not found (stand-in)"}))
    server = _launch(free_port()).processes[0]
    router_port = free_port()
    router = ProcessSpec("router", "router", ("python3", "-m", "vllm_router.launch_router", "--port", str(router_port)))
    launch = Launch("vllm", "0.34.0", f"http://127.0.0.1:{router_port}", (router, server))
    started = Started(standin.substitute(launch, timing), io.StringIO(), ready_timeout_s=10)
    try:
        assert [s.name for s in started.specs] == ["server-0", "router"]
        assert len(started.procs) == 1  # the server exited before listening: no router was started
        assert "weights not found (stand-in)" in started.exited()
    finally:
        started.stop(grace_s=1)
