"""A forked process that gets the report's libraries ready while a search runs, then writes the search's report.

A search spends its time in its trials; the report needs pandas, matplotlib and its own modules (0.6-1.0 s of
imports on the DeepSeek-V3 question) only after them. `Worker.start`, called when the search starts, forks a
child that imports and warms the report side on another core, then blocks on a pipe until `run` sends it the job
(a function's "module:name" and its arguments, pickled: 0.5 MB, 13 ms each way for the DeepSeek-V3 question's
result) and sends back the job's return value, pickled. The search's process never imports pandas or matplotlib.

Failures and interrupts: the child ignores SIGINT (Ctrl-C reaches the whole process group; the search decides
what an interrupt means) and dies with the process that forked it (Linux PR_SET_PDEATHSIG; elsewhere an end of
file on its job pipe). Any failure of the child (an import, the job, a signal) makes `run` call the job in the
caller's own process, so an error is raised there exactly as without the fork. `close` kills and reaps a child
still running (one never given a job: an error or an interrupt before the report). In-process where fork is not
available or unsafe (one core, another thread running: `drawing.can_fork`)."""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from autotune.report.drawing import can_fork, die_with_parent

HEADER = struct.Struct("<Q")  # every message: its length, then that many bytes of pickle


class Worker:
    """The forked child's id and this process's ends of its two pipes (jobs out, results in)."""

    def __init__(self, pid: int, jobs_fd: int, results_fd: int):
        self.pid, self.jobs_fd, self.results_fd = pid, jobs_fd, results_fd
        self.used = False  # the last `run` got its value from the child
        self.warm_s: float | None = None  # the child's imports and warm-up, seconds (beside the search)

    @classmethod
    def start(cls, warm: str, *args: Any) -> Worker | None:
        """Fork the child; it imports `warm` ("module:function") and calls the function on `args` (this process's
        objects, inherited: nothing pickled). None (and no child) where fork is not available or unsafe."""
        if not can_fork():
            return None
        jobs_r, jobs_w = os.pipe()
        results_r, results_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            code = 1
            try:
                os.close(jobs_w)
                os.close(results_r)
                code = _serve(parent, jobs_r, results_w, warm, args)
            finally:
                os._exit(code)
        os.close(jobs_r)
        os.close(results_w)
        return cls(pid, jobs_w, results_r)

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
        if self.pid > 0:
            pid, self.pid = self.pid, 0
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == 0:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler)
                pass


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


def _serve(parent: int, jobs_fd: int, results_fd: int, warm: str, args: tuple) -> int:
    """The child: warm up, take one job, send its value back; the exit code (0: the value was sent)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    started = time.perf_counter()
    _function(warm)(*args)
    warm_s = time.perf_counter() - started
    job = _receive(jobs_fd)
    if job is None:  # the caller closed the pipe without a job
        return 0
    target, args = pickle.loads(job)
    value = _function(target)(*args)
    sys.stdout.flush()
    sys.stderr.flush()
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
