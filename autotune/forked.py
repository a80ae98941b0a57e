"""A function run in a forked copy of this process, beside this one, its value sent back pickled.

The copy inherits everything this process holds (nothing is pickled on the way in: closures, open studies, warm
memos), computes, writes its value to a pipe and ends with `os._exit` (no exit handlers, no flushing of this
process's buffers). It dies with this process (Linux PR_SET_PDEATHSIG: an interrupted or killed command leaves no
copy running). `Beside.start` returns None where fork is not available or unsafe (one core, another thread
running: it could hold a lock the copy would wait on forever), and `value()` says when the copy did not deliver
(its error, a signal): the caller then computes in its own process, where an error is raised as it would be
without the fork. Stdlib only: every layer may use it."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

HEADER = struct.Struct("<Q")  # every message: its length, then that many bytes
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def can_fork() -> bool:
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


def die_with_parent(parent: int) -> None:
    """In a forked child: be killed when `parent` (the process that forked it) ends (Linux PR_SET_PDEATHSIG;
    nothing elsewhere), and end now if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):  # a libc without prctl
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended between the fork and the call
        os._exit(1)


class Beside:
    """A forked copy computing fn(*args): its id and the read end of its value's pipe."""

    def __init__(self, pid: int, value_fd: int):
        self.pid, self.value_fd = pid, value_fd

    @classmethod
    def start(cls, fn: Callable[..., Any], *args: Any) -> Beside | None:
        if not can_fork():
            return None
        value_r, value_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the copy: never returns into the caller's code
            code = 1
            try:
                os.close(value_r)
                die_with_parent(parent)
                send(value_w, pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL))
                code = 0
            finally:
                os._exit(code)
        os.close(value_w)
        return cls(pid, value_r)

    def value(self) -> tuple[bool, Any]:
        """(True, the copy's value), or (False, None) when it did not deliver one; the copy is reaped."""
        try:
            data = receive(self.value_fd)
        finally:
            self.close()
        return (False, None) if data is None else (True, pickle.loads(data))

    def close(self) -> None:
        """Kill and reap the copy if it still runs; idempotent."""
        if self.value_fd >= 0:
            os.close(self.value_fd)
            self.value_fd = -1
        if self.pid > 0:
            pid, self.pid = self.pid, 0
            reap(pid)


def reap(pid: int) -> None:
    """Wait for a child that has sent what it will send; kill it first if it still runs."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler)
        pass


def send(fd: int, data: bytes) -> None:
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def receive(fd: int) -> bytes | None:
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
