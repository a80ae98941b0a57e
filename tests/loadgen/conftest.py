import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.engines import standin

STANDIN = Path(standin.__file__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"stand-in not listening on {port}")


@pytest.fixture
def stand_in(tmp_path):
    """start(timing dict, *engine argv) -> URL of a running stand-in engine; every one is killed at teardown."""
    procs = []

    def start(timing: dict, *engine_argv: str) -> str:
        port = free_port()
        path = tmp_path / f"timing-{len(procs)}.json"
        path.write_text(json.dumps(timing))
        argv = [sys.executable, str(STANDIN), "--timing", str(path), "--", *engine_argv, "--port", str(port)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        wait_listening(port, proc)
        return f"http://127.0.0.1:{port}"

    try:
        yield start
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
