"""The report's figures drawn side by side: each figure is independent of the others (its data in, one PNG out),
so on a machine with more than one core they are split between this process and forked copies of it.

A forked child inherits the loaded libraries and the run's data (nothing is pickled), writes its PNGs and ends
with `os._exit` (no exit handlers, no flushing of the parent's buffers). A figure whose child failed is drawn again
here, so its error is raised in this process as it would be without the fork. Sequential where fork is not
available or unsafe (another thread runs: it could hold a lock the child would wait on forever)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

Draw = Callable[[Path], Path]


def can_fork() -> bool:
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


def draw_all(figures: dict[str, tuple[Path, Draw]], workers: int | None = None) -> dict[str, Path]:
    """Draw each figure (`key: (path, draw)`, `draw(path)` writes it); returns `key: path` in the given order.
    Figures are dealt round-robin to `workers` groups (default: the cores, at most the figures), so list the
    costly ones first; group 0 is drawn here, the others in forked children."""
    groups_n = min(len(figures), workers or os.cpu_count() or 1)
    if groups_n < 2 or not can_fork():
        return {key: draw(path) for key, (path, draw) in figures.items()}
    keys = list(figures)
    groups = [keys[k::groups_n] for k in range(groups_n)]
    sys.stdout.flush()
    sys.stderr.flush()
    children = {}
    for group in groups[1:]:
        pid = os.fork()
        if pid == 0:  # the child: draw its group, then end without the parent's exit machinery
            code = 0
            try:
                for key in group:
                    figures[key][1](figures[key][0])
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        children[pid] = group
    try:
        for key in groups[0]:
            figures[key][1](figures[key][0])
    finally:
        failed = [key for pid, group in children.items() if _exit_code(pid) != 0 for key in group]
    for key in failed:  # drawn again here: its error (if it has one) is raised in this process
        figures[key][1](figures[key][0])
    return {key: path for key, (path, _) in figures.items()}


def _exit_code(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
