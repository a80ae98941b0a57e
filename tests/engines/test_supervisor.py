import importlib.util
import io
import os
import socket
import sys
import time

import pytest

from autotune.engines import format_launch, run_launch
from autotune.engines.supervisor import TAIL_LINES, resolve_argv
from autotune.specs.best import Launch, ProcessSpec
from autotune.specs.errors import MiTuneError

PY = sys.executable


def launch(*processes: ProcessSpec) -> Launch:
    return Launch(engine="vllm", engine_version="0.34.0", endpoint="http://127.0.0.1:8000", processes=processes)


def proc(name: str, code: str, role: str = "server", env: dict | None = None) -> ProcessSpec:
    return ProcessSpec(name=name, role=role, argv=(PY, "-u", "-c", code), env=env or {})


def test_stops_all_when_one_exits_and_returns_its_code(tmp_path):
    marker = tmp_path / "sleeper-started"
    sleeper = proc("sleeper", f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(60)")
    failer = proc("failer", "import time, sys; time.sleep(0.5); print('bye'); sys.exit(3)", role="router")
    out = io.StringIO()
    started = time.monotonic()
    assert run_launch(launch(failer, sleeper), out=out, grace_s=5.0) == 3
    assert time.monotonic() - started < 10.0
    assert marker.exists()
    assert "[failer] bye\n" in out.getvalue()


def test_prefixes_every_line_and_passes_env():
    talker = proc("talker", "import os; print('a'); print(os.environ['MI_TUNE_TEST'])", env={"MI_TUNE_TEST": "xyz"})
    out = io.StringIO()
    assert run_launch(launch(talker), out=out) == 0
    assert out.getvalue().splitlines() == ["[talker] a", "[talker] xyz"]


def test_routers_start_once_servers_listen(tmp_path):
    order = tmp_path / "order"
    port = _free_port()
    append = f"import sys; open({str(order)!r}, 'a').write(sys.argv[1] + chr(10))"
    listen = f"import socket, time; time.sleep(0.5); s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
    router = ProcessSpec(
        name="router", role="router", argv=(PY, "-c", append + "; import time; time.sleep(0.3)", "router")
    )
    server = ProcessSpec(
        name="server-0", role="server", port=port, argv=(PY, "-c", listen + append + "; time.sleep(5)", "server")
    )
    run_launch(launch(router, server), out=io.StringIO(), grace_s=2.0)
    assert order.read_text().splitlines() == ["server", "router"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_is_escalated_to_sigkill_after_the_grace_period():
    stubborn = proc(
        "stubborn", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up'); time.sleep(60)"
    )
    quitter = proc("quitter", "import time; time.sleep(1.0)")
    started = time.monotonic()
    assert run_launch(launch(stubborn, quitter), out=io.StringIO(), grace_s=0.5) == 0
    assert time.monotonic() - started < 10.0


def test_missing_executable_is_a_one_line_error_with_the_install_command():
    with pytest.raises(MiTuneError, match=r"vllm not found on PATH; install it with: pip install vllm==0\.34\.0"):
        run_launch(launch(ProcessSpec(name="s", role="server", argv=("vllm", "serve", "m"))), out=io.StringIO())


@pytest.mark.skipif(importlib.util.find_spec("sglang_router") is not None, reason="sglang-router is installed here")
def test_missing_python_module_is_named():
    with pytest.raises(
        MiTuneError, match=r"cannot import sglang_router; install it with: pip install sglang-router==0\.3\.2"
    ):
        resolve_argv((PY, "-m", "sglang_router.launch_router"))


def _ascend(*processes: ProcessSpec) -> Launch:
    return Launch(
        engine="vllm-ascend", engine_version="0.23.0.post1", endpoint="http://127.0.0.1:8000", processes=processes
    )


def test_a_missing_engine_executable_names_the_launchs_own_engine_install(monkeypatch, tmp_path):
    """`vllm` of an Ascend plan is vLLM 0.23 with the plugin, not vLLM 0.34 (the executable's table hint)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # no bin directory of a venv with vllm
    spec = ProcessSpec(name="s", role="server", argv=("vllm", "serve", "m"))
    with pytest.raises(
        MiTuneError, match=r"vllm not found on PATH; install it with: pip install vllm==0\.23\.0 vllm-ascend="
    ):
        run_launch(_ascend(spec), out=io.StringIO())


def test_an_engine_plugin_the_servers_python_cannot_import_is_named_before_anything_starts(monkeypatch, tmp_path):
    """vLLM finds the NPU platform only through the vllm-ascend plugin: a `vllm` whose Python lacks vllm_ascend
    would start on the wrong platform, so the launch stops first, naming the package and the install command."""
    assert importlib.util.find_spec("vllm_ascend") is None
    script = tmp_path / "vllm"
    script.write_text(f"#!{PY}\nimport sys; sys.exit(0)\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    spec = ProcessSpec(name="s", role="server", argv=("vllm", "serve", "m"))
    with pytest.raises(MiTuneError, match=rf"{PY} cannot import vllm_ascend; install it with: pip install vllm==0\.23"):
        run_launch(_ascend(spec), out=io.StringIO())
    # the same executable serves a vLLM (CUDA) plan: no plugin is asked for
    assert resolve_argv(("vllm", "serve", "m"), "vllm") == [str(script), "serve", "m"]


def test_resolves_commands_from_this_interpreters_bin_directory_even_off_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    name = os.path.basename(PY)
    assert resolve_argv((name, "-c", "pass")) == [os.path.join(os.path.dirname(PY), name), "-c", "pass"]


def test_format_launch_shows_env_and_quoted_args():
    spec = ProcessSpec(
        name="server-0",
        role="server",
        argv=("vllm", "serve", "org/m", "--compilation-config", '{"pass_config":{"fuse_allreduce_rms":true}}'),
        env={"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_ALGO": "Ring Tree"},
    )
    router = ProcessSpec(
        name="router", role="router", argv=("python3", "-m", "vllm_router.launch_router", "--port", "8000")
    )
    text = format_launch(launch(router, spec))
    assert text.splitlines() == [
        "CUDA_VISIBLE_DEVICES=0,1 NCCL_ALGO='Ring Tree' vllm serve org/m --compilation-config "
        + '\'{"pass_config":{"fuse_allreduce_rms":true}}\'',
        "python3 -m vllm_router.launch_router --port 8000",
    ]


def test_says_which_process_exited_first_with_its_code_and_last_lines():
    failer = proc("failer", "import sys; [print('line', i) for i in range(30)]; sys.exit(3)")
    sleeper = proc("sleeper", "import time; time.sleep(60)")
    err = io.StringIO()
    assert run_launch(launch(sleeper, failer), out=io.StringIO(), err=err, grace_s=2.0) == 3
    lines = err.getvalue().splitlines()
    assert lines[0] == f"mi-tune: failer exited with code 3; its last {TAIL_LINES} lines:"
    assert lines[1:] == [f"  line {i}" for i in range(30 - TAIL_LINES, 30)]


def test_says_which_signal_killed_a_process():
    victim = proc("victim", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    err = io.StringIO()
    assert run_launch(launch(victim), out=io.StringIO(), err=err) == 137
    assert err.getvalue() == "mi-tune: victim was killed by signal 9 (SIGKILL); it printed nothing\n"
