"""A process started beside a search that gets the report's libraries ready while the search runs, then writes the
search's report.

A search spends its time in its trials; the report needs pandas, matplotlib and its own modules (0.6-1.0 s of
imports on the DeepSeek-V3 question) only after them. `Worker.start`, called when the search starts, starts a fresh
interpreter (`python -c`, not a fork: a forked copy shares the search's memory pages, and every page the search
then writes during its trials is copied, which cost the trials 0.1-0.7 s of CPU on the DeepSeek-V3 question on this
machine) that imports and warms the report side on another core, then blocks on a pipe until `run` sends it the
job (a function's "module:name" and its arguments, pickled: 0.5 MB, 13 ms each way for the DeepSeek-V3 question's
result) and sends back the job's return value, pickled. The search's process never imports pandas or matplotlib.

Failures and interrupts: the child ignores SIGINT (Ctrl-C reaches the whole process group; the search decides
what an interrupt means) and dies with the process that started it (Linux PR_SET_PDEATHSIG; elsewhere an end of
file on its job pipe). Any failure of the child (an import, the job, a signal) makes `run` call the job in the
caller's own process, so an error is raised there exactly as without the child. `close` kills and reaps a child
still running (one never given a job: an error or an interrupt before the report). In-process where a second core
or fork is missing."""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.report.drawing import die_with_parent

HEADER = struct.Struct("<Q")  # every message: its length, then that many bytes of pickle
ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding this `autotune`: the child imports the same
BOOT = (  # SIGINT ignored first: a Ctrl-C while the child starts is the search's to handle
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); import sys; sys.path.insert(0, sys.argv[1]); "
    "from autotune.report.worker import serve; serve(*map(int, sys.argv[2:5]), sys.argv[5])"
)


class Worker:
    """The child process and this process's ends of its two pipes (jobs out, results in)."""

    def __init__(self, proc: subprocess.Popen, jobs_fd: int, results_fd: int):
        self.proc, self.jobs_fd, self.results_fd = proc, jobs_fd, results_fd
        self.used = False  # the last `run` got its value from the child
        self.warm_s: float | None = None  # the child's start, imports and warm-up, seconds (beside the search)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def start(cls, warm: str) -> Worker | None:
        """Start the child; it imports `warm` ("module:function") and calls the function. None (and no child)
        with one core or without fork (the child's figures are drawn in forked copies of it)."""
        if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            return None
        jobs_r, jobs_w = os.pipe()
        results_r, results_w = os.pipe()
        argv = [sys.executable, "-c", BOOT, ROOT, str(os.getpid()), str(jobs_r), str(results_w), warm]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    pass_fds=(jobs_r, results_w), close_fds=True)  # fmt: skip
        except OSError:
            os.close(jobs_w)
            os.close(results_r)
            return None
        finally:
            os.close(jobs_r)
            os.close(results_w)
        return cls(proc, jobs_w, results_r)

    def call(self, target: str, *args: Any) -> tuple[bool, Any]:
        """(True, the value of function `target` ("module:name") on `args` as the child returned it), or
        (False, None) when the child could not do it."""
        try:
            _send(self.jobs_fd, pickle.dumps((target, args), protocol=pickle.HIGHEST_PROTOCOL))
            reply = _receive(self.results_fd)
        except (OSError, EOFError, pickle.PickleError):
            return False, None
        finally:
            self.close()
        if reply is None:
            return False, None
        self.warm_s, value = pickle.loads(reply)
        return True, value

    def close(self) -> None:
        """Kill and reap the child if it still runs (it has sent its reply or never will); idempotent."""
        for fd in (self.jobs_fd, self.results_fd):
            if fd >= 0:
                os.close(fd)
        self.jobs_fd = self.results_fd = -1
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run(worker: Worker | None, target: str, *args: Any) -> Any:
    """Function `target` ("module:name") on `args` in the worker's child, or here when there is none or it failed
    (the child is reaped either way)."""
    if worker is not None:
        done, value = worker.call(target, *args)
        worker.used = done
        if done:
            return value
    return _function(target)(*args)


def _function(target: str) -> Callable:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def serve(parent: int, jobs_fd: int, results_fd: int, warm: str) -> None:
    """The child (started by `Worker.start`): warm up, take one job, send its value back, end; exit code 0 when
    the value was sent. No traceback: the caller computes the job itself and raises any error there."""
    code = 1
    try:
        code = _serve(parent, jobs_fd, results_fd, warm)
    finally:
        sys.stderr.flush()
        os._exit(code)  # no teardown either: the interpreter's would free every module one by one


def _serve(parent: int, jobs_fd: int, results_fd: int, warm: str) -> int:
    import gc

    die_with_parent(parent)
    gc.set_threshold(50_000, *gc.get_threshold()[1:])  # as the CLI process (cli/app.py YOUNG_GC_THRESHOLD)
    started = time.perf_counter()
    _function(warm)()
    warm_s = time.perf_counter() - started
    job = _receive(jobs_fd)
    if job is None:  # the caller closed the pipe without a job
        return 0
    target, args = pickle.loads(job)
    value = _function(target)(*args)
    _send(results_fd, pickle.dumps((warm_s, value), protocol=pickle.HIGHEST_PROTOCOL))
    return 0


def _send(fd: int, data: bytes) -> None:
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int) -> bytes | None:
    """One message, or None at an end of file before a whole one (the other side ended)."""
    header = _read(fd, HEADER.size)
    if header is None:
        return None
    return _read(fd, HEADER.unpack(header)[0])


def _read(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
