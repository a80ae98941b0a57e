"""Refinement's neighbour scoring on every core: forked copies of the search process score parameter sets.

A steepest-ascent move (search/refine.py) scores every untried neighbour of the incumbent, and each score is a
pure function of the parameters (plan completion, admission, the performance model; the memos it reads are
caches). The process forks once per search, after the trials before refinement warmed its memos, so each copy
holds the model, the rules and the memos already; a job sends parameter sets (small dicts) to every copy, each
process (the parent too) takes the next unscored set from a shared counter until none is left, and the copies
send back (index, (value, completed parameters)) pairs. Which process scored a set changes nothing: the parent
puts the answers back in neighbour order and chooses the move itself, so the study, trials.csv and best.yaml
do not depend on the pool's size (tests/search/test_score_pool.py).

Serial (no pool) with one core, without fork, in a --workers process, while another thread runs (a fork copies
one thread), or when `MI_TUNE_SCORERS=1`. A copy ignores SIGINT (the parent stops the search between moves)
and exits when its pipe closes: at the search's end, on an error, or when the parent dies.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from autotune.specs import MiTuneError

ENV = "MI_TUNE_SCORERS"  # processes that score refinement neighbours, the parent included (1: serial)
MAX_PROCESSES = 4  # a prior: a move has ~50 new neighbours of ~1 ms each, so more copies mostly wait
CLOSE_S = 2.0  # a closing copy finishes its job (milliseconds); past this it is killed
MIN_JOB = 4  # fewer new neighbours than this are scored in the parent (a job's round trip is ~0.1 ms)

Score = Callable[[dict[str, Any]], tuple[float, dict[str, Any]]]


def processes_wanted() -> int:
    """Scoring processes for this search, the parent included: MI_TUNE_SCORERS when set, else the cores this
    process may run on (at most MAX_PROCESSES); 1 where fork is missing or another thread runs."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            wanted = int(raw)
        except ValueError:
            wanted = 0
        if wanted < 1:
            raise MiTuneError(f"{ENV}: expected a whole number of processes >= 1, got '{raw}'")
    else:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        wanted = min(cores, MAX_PROCESSES)
    if wanted > 1 and ("fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1):
        return 1
    return wanted


class ScorePool:
    """`processes - 1` forked copies scoring with `score`, and the parent (process 0). `map` keeps the order of
    its input."""

    def __init__(self, score: Score, processes: int) -> None:
        self.score = score
        self.conns: list[Connection] = []
        self.pids: list[int] = []
        self.broken = False
        self.owner: dict[Any, int] = {}  # an item's group -> the process that scores that group first
        self.load = [0] * processes  # items owned per process, over the search
        self.answered = [0] * processes  # items each process scored, over the search
        # per process: the front and back of its queue in the current map, shared with the copies
        self.bounds = multiprocessing.get_context("fork").Array("l", 2 * processes)
        gc.collect()
        gc.freeze()  # the copies' collector leaves the inherited objects alone (no copy-on-write of every page)
        try:
            for index in range(1, processes):
                self._fork(index)
        finally:
            gc.unfreeze()

    def _fork(self, index: int) -> None:
        mine, theirs = multiprocessing.Pipe()
        pid = os.fork()
        if pid == 0:  # the copy: close every parent end it inherited, so the parent's exit closes its pipe
            code = 1
            try:
                for conn in (*self.conns, mine):
                    conn.close()
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _serve(theirs, self.score, lambda queues: self._take(index, queues))
                code = 0
            finally:
                os._exit(code)
        theirs.close()
        self.conns.append(mine)
        self.pids.append(pid)

    @property
    def size(self) -> int:
        return len(self.conns) + 1

    def _take(self, me: int, queues: list[list[int]]) -> int:
        """The next item for process `me`: the front of its own queue, else the back of the longest other queue
        (the item its owner would score last); -1 when none is left."""
        bounds = self.bounds
        with bounds.get_lock():
            front, back = bounds[2 * me], bounds[2 * me + 1]
            if front < back:
                bounds[2 * me] = front + 1
                return queues[me][front]
            left, other = max((bounds[2 * q + 1] - bounds[2 * q], q) for q in range(len(queues)))
            if left <= 0:
                return -1
            bounds[2 * other + 1] -= 1
            return queues[other][bounds[2 * other + 1]]

    def _queues(self, groups: Sequence[Any]) -> list[list[int]]:
        """Item indices per process: each group (a refinement move's changed dimension) stays with the process
        that scored it first, so the next move's neighbours that change the same dimension find that process's
        memos warm; a new group goes to the process owning the fewest items so far."""
        queues: list[list[int]] = [[] for _ in self.load]
        for i, group in enumerate(groups):
            if group not in self.owner:
                self.owner[group] = min(range(len(self.load)), key=lambda p: (self.load[p], p))
            self.load[self.owner[group]] += 1
            queues[self.owner[group]].append(i)
        return queues

    def map(self, items: Sequence[dict[str, Any]], groups: Sequence[Any] | None = None) -> list[tuple[float, dict]]:
        """score(item) for each item, in order. `groups` (one hashable per item, default: all one group) says
        which items share memo entries (search/runner.py passes each neighbour's changed dimension)."""
        if self.broken or len(items) < MIN_JOB or not self.conns:
            return [self.score(p) for p in items]
        queues = self._queues(groups if groups is not None else range(len(items)))
        for p, queue in enumerate(queues):  # the copies are waiting for a job: none reads the bounds now
            self.bounds[2 * p], self.bounds[2 * p + 1] = 0, len(queue)
        results: list[Any] = [None] * len(items)
        done = [False] * len(items)
        asked = []
        for index, conn in enumerate(self.conns, start=1):
            try:
                conn.send((items, queues))
                asked.append((index, conn))
            except OSError:  # a copy is gone: the others and the parent take its share
                self.broken = True
        while (i := self._take(0, queues)) >= 0:
            results[i], done[i] = self.score(items[i]), True
            self.answered[0] += 1
        for index, conn in asked:
            try:
                _, answers = conn.recv()  # an error stops a copy early: what it did not answer is scored below
            except (EOFError, OSError):
                answers = ()
                self.broken = True
            for i, result in answers:
                results[i], done[i] = result, True
            self.answered[index] += len(answers)
        for i in (i for i, d in enumerate(done) if not d):  # a copy's error is raised here, with its traceback
            results[i] = self.score(items[i])
            self.answered[0] += 1
        return results

    def close(self) -> None:
        """End the copies (closing their pipes: each finishes its job and exits) and reap them; a copy still
        running after CLOSE_S is killed. Idempotent."""
        for conn in self.conns:
            conn.close()
        deadline = time.monotonic() + CLOSE_S
        for pid in self.pids:
            try:
                while not os.waitpid(pid, os.WNOHANG)[0]:
                    if time.monotonic() > deadline:
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                        break
                    time.sleep(0.001)
            except ChildProcessError:  # reaped already
                pass
        self.conns, self.pids = [], []


def _serve(conn: Connection, score: Score, take: Callable[[list[list[int]]], int]) -> None:
    """A copy's loop: for each job (one `map`'s items and queues), score the items it takes until none is left,
    then send back (index, answer) pairs; stop taking at an error (the parent scores what is missing)."""
    while True:
        try:
            items, queues = conn.recv()
        except (EOFError, OSError):
            return
        answers = []
        try:
            while (i := take(queues)) >= 0:
                answers.append((i, score(items[i])))
        except Exception:  # noqa: BLE001 - the parent scores what is missing again and raises the error there
            pass
        try:
            conn.send(("ok", answers))
        except OSError:
            return
