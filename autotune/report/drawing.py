"""The report's figures drawn side by side: each figure is independent of the others (its data in, one PNG out),
so on a machine with more than one core they are split between this process and forked copies of it.

A forked child inherits the loaded libraries and the run's data (nothing is pickled), writes its PNGs and ends
with `os._exit` (no exit handlers, no flushing of the parent's buffers); it dies with this process (Linux
PR_SET_PDEATHSIG: an interrupted or killed report leaves no child drawing). The processes take the figures one
at a time from a shared queue (a pipe holding one byte per figure, the costliest first), so they finish
together whatever each figure costs. A figure a child took and did not write (its failure) is drawn again here,
so its error is raised in this process as it would be without the fork. Sequential where fork is not available
or unsafe (another thread runs: it could hold a lock the child would wait on forever)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

Draw = Callable[[Path], Path]


def can_fork() -> bool:
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


def draw_all(
    figures: dict[str, tuple[Path, Draw]], workers: int | None = None, beside: Callable[[], object] | None = None
) -> dict[str, Path]:
    """Draw each figure (`key: (path, draw)`, `draw(path)` writes it); returns `key: path` in the given order.
    `workers` processes (default: the cores, at most the figures) take the figures in the given order, so list
    the costly ones first; this process is one of them, the others are forked children. `beside()`, when given,
    runs here once the queue is empty, while the children draw their last figures (e.g. the report's text)."""
    workers_n = min(len(figures), workers or os.cpu_count() or 1)
    keys = list(figures)
    if workers_n < 2 or not can_fork():
        drawn = {key: draw(path) for key, (path, draw) in figures.items()}
        if beside is not None:
            beside()
        return drawn
    queue_r, queue_w = os.pipe()
    done_r, done_w = os.pipe()
    os.write(queue_w, bytes(range(len(keys))))  # < 256 figures: the whole queue fits the pipe's buffer
    os.close(queue_w)  # an empty queue reads as an end of file
    sys.stdout.flush()
    sys.stderr.flush()
    children, parent = [], os.getpid()
    try:
        for _ in range(workers_n - 1):
            pid = os.fork()
            if pid == 0:  # the child: draw from the queue, then end without the parent's exit machinery
                code = 1
                try:
                    die_with_parent(parent)
                    for k in _take(queue_r):
                        figures[keys[k]][1](figures[keys[k]][0])
                        os.write(done_w, bytes([k]))
                    code = 0
                finally:
                    os._exit(code)
            children.append(pid)
        os.close(done_w)
        done_w = -1
        drawn_here = set()
        for k in _take(queue_r):
            figures[keys[k]][1](figures[keys[k]][0])
            drawn_here.add(k)
        if beside is not None:
            beside()
    finally:
        if done_w >= 0:  # before reading: the queue's end of file comes once no process holds it
            os.close(done_w)
        for pid in children:
            os.waitpid(pid, 0)
        written_there = set(_read_to_end(done_r))
        os.close(queue_r)
        os.close(done_r)
    for k in sorted(set(range(len(keys))) - drawn_here - written_there):  # a child's failure: raised here
        figures[keys[k]][1](figures[keys[k]][0])
    return {key: path for key, (path, _) in figures.items()}


def _take(queue_fd: int):
    """The queue's figure indices, one read at a time (a one-byte read from a pipe is atomic: no figure is
    taken twice)."""
    while taken := os.read(queue_fd, 1):
        yield taken[0]


def _read_to_end(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def die_with_parent(parent: int) -> None:
    """In a forked child: be killed when `parent` (the process that forked it) ends (Linux PR_SET_PDEATHSIG, from
    linux/prctl.h; nothing elsewhere), and end now if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):  # a libc without prctl
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended between the fork and the call
        os._exit(1)


PR_SET_PDEATHSIG = 1  # linux/prctl.h
