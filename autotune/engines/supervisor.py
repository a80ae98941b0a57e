"""Run a Launch: start its processes (servers, then routers), prefix their output, stop them all together."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from autotune.capability.engine_profile import EngineProfile
from autotune.capability.profiles import PROFILES
from autotune.engines.flags import ROUTER_VERSIONS
from autotune.engines.layout import reach_host
from autotune.specs.best import Launch, ProcessSpec
from autotune.specs.errors import MiTuneError

GRACE_S = 15.0  # SIGTERM -> SIGKILL
POLL_S = 0.1
START_ORDER = {"server": 0, "prefill": 0, "decode": 0, "router": 1}
READY_TIMEOUT_S = 1800.0  # routers start once the servers listen; weights of a large MoE load for minutes
INTERRUPTED_EXIT = 130
TAIL_LINES = 20  # output lines kept per process to say why it exited


def _server_name(profile: EngineProfile) -> str:
    """The executable or `python -m` top-level package an engine's server command runs."""
    command = profile.server_command
    return command[2].split(".")[0] if command[1:2] == ("-m",) else Path(command[0]).name


def _install_hints() -> dict[str, str]:
    """Executable or `python -m` top-level package -> how to get it: the routers', then each engine profile's (the
    first profile whose server starts with an executable names its hint: vLLM 0.34.0 for `vllm`)."""
    hints = {name.replace("-", "_"): f"pip install {name}=={version}" for name, version in ROUTER_VERSIONS.items()}
    for profile in PROFILES.values():
        hints.setdefault(_server_name(profile), profile.install)
    return hints


INSTALL_HINTS = _install_hints()


def format_launch(launch: Launch) -> str:
    """The exact commands, one line per process in start order, as `ENV=value ... cmd args` (display only)."""
    return "\n".join(_command_line(p) for p in _in_start_order(launch))


def _command_line(spec: ProcessSpec) -> str:
    env = [f"{k}={shlex.quote(v)}" for k, v in spec.env.items()]
    return " ".join([*env, *(shlex.quote(a) for a in spec.argv)])


def _in_start_order(launch: Launch) -> list[ProcessSpec]:
    return sorted(launch.processes, key=lambda p: START_ORDER.get(p.role, 0))


def _search_path() -> str:
    """PATH with this interpreter's bin directory first, so a venv's own tools win (also when not activated)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])


def resolve_argv(argv: tuple[str, ...], engine: str = "") -> list[str]:
    """argv with its executable resolved on the search path; MiTuneError naming what is missing and how to get it.
    With `engine` (a server of that engine profile), the hint is that profile's install command and the profile's
    plugin packages must import in the Python that runs the server."""
    path = _search_path()
    exe = shutil.which(argv[0], path=path)
    if exe is None:
        raise MiTuneError(f"{argv[0]} not found on PATH; {_hint(Path(argv[0]).name, engine)}")
    python, packages = exe, []
    if len(argv) > 2 and argv[1] == "-m":
        packages.append(argv[2].split(".")[0])
    elif engine in PROFILES and PROFILES[engine].plugin_modules:
        python = _script_interpreter(exe) or sys.executable
    packages += PROFILES[engine].plugin_modules if engine in PROFILES else ()
    for package in packages:
        if not _imports(python, package, path):
            raise MiTuneError(f"{python} cannot import {package}; {_hint(package, engine)}")
    return [exe, *argv[1:]]


def _imports(python: str, package: str, path: str) -> bool:
    probe = [python, "-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec({package!r}) is None)"]
    return subprocess.run(probe, env={**os.environ, "PATH": path}, capture_output=True).returncode == 0


def _script_interpreter(exe: str) -> str:
    """The interpreter a console script names on its `#!` line ("" when it has none or it does not exist)."""
    try:
        with open(exe, "rb") as f:
            first = f.readline(512).decode(errors="replace")
    except OSError:
        return ""
    words = first[2:].split() if first.startswith("#!") else []
    return words[0] if words and os.path.isfile(words[0]) and os.access(words[0], os.X_OK) else ""


def _hint(name: str, engine: str = "") -> str:
    """How to get `name`: the launch's engine profile's install command when it is that engine's executable or one of
    its packages, else the table's (routers; engines by their executable)."""
    profile = PROFILES.get(engine)
    if profile is not None and name in (_server_name(profile), *profile.plugin_modules):
        return f"install it with: {profile.install}"
    return f"install it with: {INSTALL_HINTS[name]}" if name in INSTALL_HINTS else "install it first"


def _resolve(spec: ProcessSpec, engine: str) -> list[str]:
    """A process's argv resolved; an engine server is checked against its engine profile (routers are not)."""
    return resolve_argv(spec.argv, engine if spec.role != "router" else "")


def _pump(name: str, stream: TextIO, out: TextIO, lock: threading.Lock, tail: deque) -> None:
    for line in stream:
        text = line if line.endswith("\n") else line + "\n"
        tail.append(text.rstrip("\n"))
        with lock:
            out.write(f"[{name}] {text}")
            out.flush()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)  # start_new_session=True: the group holds the engine's own workers too


def stop_all(procs: list[subprocess.Popen], grace_s: float = GRACE_S) -> None:
    """SIGTERM every process group still running, then SIGKILL what is left after `grace_s`."""
    for proc in procs:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)  # also reaps workers that outlived their leader
        proc.wait()


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _wait_first_exit(procs: list[subprocess.Popen]) -> int:
    """The index of the first process found ended."""
    while True:
        for k, proc in enumerate(procs):
            if proc.poll() is not None:
                return k
        time.sleep(POLL_S)


def exit_reason(name: str, returncode: int, tail: list[str]) -> str:
    """'mi-tune: NAME exited with code N' or '... was killed by signal N (SIGX)', then its last output lines."""
    how = f"exited with code {returncode}" if returncode >= 0 else f"was killed by signal {_signal_name(-returncode)}"
    if not tail:
        return f"mi-tune: {name} {how}; it printed nothing"
    return "\n".join([f"mi-tune: {name} {how}; its last {len(tail)} lines:", *(f"  {line}" for line in tail)])


def _signal_name(number: int) -> str:
    try:
        return f"{number} ({signal.Signals(number).name})"
    except ValueError:
        return str(number)


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_servers_ready(specs: list[ProcessSpec], procs: list[subprocess.Popen], timeout_s: float) -> None:
    """Block until every started server accepts connections on its port (routers need live workers), one of
    them exits (the caller's wait sees it), or `timeout_s` passes (loading large weights takes minutes)."""
    deadline = time.monotonic() + timeout_s
    pending = [s for s in specs if s.port]
    while pending and time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            return
        pending = [s for s in pending if not _listening(reach_host(s.host), s.port)]
        if pending:
            time.sleep(POLL_S)


def _spawn(spec, argv: list[str]) -> subprocess.Popen:
    """Start one process of a launch: its own session (so a stop reaches its children), output captured line by
    line, no stdin, an argument list (never a shell)."""
    return subprocess.Popen(
        argv,
        env=os.environ | spec.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,
    )


def run_launch(
    launch: Launch,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    grace_s: float = GRACE_S,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> int:
    """Start every process, stream their prefixed output, and stop all when one exits or on Ctrl-C / SIGTERM.

    Says on `err` (stderr) which process ended first and why, with its last output lines. Returns that process's
    exit code (128 + N when killed by signal N; 130 after an interrupt with none ended).
    """
    out, err = out or sys.stdout, err or sys.stderr
    specs = _in_start_order(launch)
    argvs = [_resolve(spec, launch.engine) for spec in specs]  # fail before anything starts
    lock, procs, pumps, tails = threading.Lock(), [], [], []
    first = None
    restore = _sigterm_as_interrupt()
    try:
        for spec, argv in zip(specs, argvs, strict=True):
            if spec.role == "router":
                servers = [s for s in specs if START_ORDER[s.role] == 0]
                _wait_servers_ready(servers, procs, ready_timeout_s)
                if any(p.poll() is not None for p in procs):
                    break
            proc = _spawn(spec, argv)
            procs.append(proc)
            tails.append(deque(maxlen=TAIL_LINES))
            pumps.append(
                threading.Thread(target=_pump, args=(spec.name, proc.stdout, out, lock, tails[-1]), daemon=True)
            )
            pumps[-1].start()
        first = _wait_first_exit(procs)
        code = _exit_code(procs[first].returncode)
    except KeyboardInterrupt:
        first = next((k for k, p in enumerate(procs) if p.poll() not in (None, 0)), None)
        code = INTERRUPTED_EXIT if first is None else _exit_code(procs[first].returncode)
    finally:
        stop_all(procs, grace_s)
        for pump in pumps:
            pump.join(timeout=1.0)
        restore()
    if first is not None:
        with lock:
            print(exit_reason(specs[first].name, procs[first].returncode, list(tails[first])), file=err, flush=True)
    return code


def _sigterm_as_interrupt() -> Callable[[], None]:
    """Treat SIGTERM like Ctrl-C while the launch runs (main thread only); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)


class Started:
    """A launch running in the background (`measure`): its processes, each with its last output lines; `stop()`
    ends them all (SIGTERM to each process group, SIGKILL after the grace period). Output goes to `out`."""

    def __init__(self, launch: Launch, out: TextIO, ready_timeout_s: float = READY_TIMEOUT_S):
        self.specs = _in_start_order(launch)
        argvs = [_resolve(spec, launch.engine) for spec in self.specs]  # fail before anything starts
        self.procs: list[subprocess.Popen] = []
        self.tails: list[deque] = []
        self._pumps: list[threading.Thread] = []
        lock = threading.Lock()
        try:
            for spec, argv in zip(self.specs, argvs, strict=True):
                if spec.role == "router":  # as run_launch: routers start once the servers listen
                    servers = [s for s in self.specs if START_ORDER[s.role] == 0]
                    _wait_servers_ready(servers, self.procs, ready_timeout_s)
                    if any(p.poll() is not None for p in self.procs):
                        break  # exited() says which
                proc = _spawn(spec, argv)
                self.procs.append(proc)
                self.tails.append(deque(maxlen=TAIL_LINES))
                pump = threading.Thread(target=_pump, args=(spec.name, proc.stdout, out, lock, self.tails[-1]))
                pump.daemon = True
                pump.start()
                self._pumps.append(pump)
        except BaseException:
            self.stop()
            raise

    def exited(self) -> str:
        """exit_reason() of the first process found ended, or '' while all run."""
        for spec, proc, tail in zip(self.specs, self.procs, self.tails, strict=True):
            if proc.poll() is not None:
                for pump in self._pumps:
                    pump.join(timeout=1.0)  # its last lines
                return exit_reason(spec.name, proc.returncode, list(tail))
        return ""

    def last_lines(self) -> str:
        return "\n".join(f"[{s.name}] {line}" for s, tail in zip(self.specs, self.tails, strict=True) for line in tail)

    def stop(self, grace_s: float = GRACE_S) -> None:
        stop_all(self.procs, grace_s)
        for pump in self._pumps:
            pump.join(timeout=1.0)
