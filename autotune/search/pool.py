"""Refinement's neighbour scoring on every core: forked copies of the search process score parameter sets.

A steepest-ascent move (search/refine.py) scores every untried neighbour of the incumbent, and each score is a
pure function of the parameters (plan completion, admission, the performance model; the memos it reads are
caches). The process forks when refinement starts, after the trials before it warmed its memos, so each copy
holds the model, the rules and the memos already; a job sends parameter sets (small dicts) to every copy, each
process (the parent too) scores its own queue (the sets that change a dimension it scored before, whose memo
entries it holds), then takes from the back of the others' (shared counters), and the copies send back
(index, (value, completed parameters)) pairs. Which process scored a set changes nothing: the parent
puts the answers back in neighbour order and chooses the move itself, so the study, trials.csv and best.yaml
do not depend on the pool's size (tests/search/test_score_pool.py). Before refinement, while TPE's trials keep
the parent busy, copies score the neighbours of the incumbents refinement will start from (`speculate`), and
the parent folds their answers into the same memo (NeighbourScoring).

Serial (no pool) with one core or when the other cores are busy (idle_cores), without fork, in a --workers
process, while another thread runs (a fork copies one thread), or when `MI_TUNE_SCORERS=1`. A copy ignores
SIGINT (the parent stops the search between moves) and exits when its pipe closes: at the search's end, on an
error, or when the parent dies.
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

from autotune.search.refine import _key, neighbours
from autotune.specs import MiTuneError

ENV = "MI_TUNE_SCORERS"  # processes that score refinement neighbours, the parent included (1: serial)
MAX_PROCESSES = 4  # a prior: a move has ~50 new neighbours of ~1 ms each, so more copies mostly wait
CLOSE_S = 2.0  # a closing copy finishes its job (milliseconds); past this it is killed
AHEAD_BASINS = 3  # incumbents whose neighbours are scored ahead: refinement's largest moves are the best basins'
ASK_AGAIN_S = 0.25  # while TPE runs, how often a search told one process asks again (an ask takes ~2 ms)
MIN_JOB = 4  # fewer new neighbours than this are scored in the parent (a job's round trip is ~0.1 ms)

Score = Callable[[dict[str, Any]], tuple[float, dict[str, Any]]]


def processes_wanted() -> int:
    """Scoring processes for this search, the parent included: MI_TUNE_SCORERS when set, else the cores this
    process may run on that other processes leave idle (at most MAX_PROCESSES); 1 where fork is missing or
    another thread runs. The answer changes only the speed: the search is the same for any count."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            wanted = int(raw)
        except ValueError:
            wanted = 0
        if wanted < 1:
            raise MiTuneError(f"{ENV}: expected a whole number of processes >= 1, got '{raw}'")
    else:
        wanted = min(idle_cores(), MAX_PROCESSES)
    if wanted > 1 and ("fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1):
        return 1
    return wanted


def idle_cores() -> int:
    """The cores this process may run on, less what other processes keep busy now. On Linux that is the
    number of runnable tasks (`/proc/loadavg`'s fourth field, this process included), the least of a few
    readings: a process that computes is runnable at each, one that waits on a pipe (the report side once
    warm) at none. The 1-minute load average, elsewhere, still counts for a minute a run that has ended (the
    search before this one, a benchmark's other tool), which made the search serial on an idle machine. On a
    busy machine a copy only takes time from the others (and they from it), so it is not worth its fork."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    others = _runnable_others()
    if others is None:
        try:
            others = max(0.0, os.getloadavg()[0] - 1.0)  # counts this process too (about 1 while it searches)
        except (AttributeError, OSError):  # no load average on this platform
            others = 0.0
    return max(1, min(cores, round(cores - others)))


def _runnable_others(readings: int = 3, apart_s: float = 0.001) -> float | None:
    """Runnable tasks other than this one, the least of `readings` (proc(5): /proc/loadavg, the fourth field
    is runnable/total scheduling entities); None without /proc."""
    least = None
    for reading in range(readings):
        if reading:
            time.sleep(apart_s)
        try:
            with open("/proc/loadavg", encoding="ascii") as f:
                runnable = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        least = runnable if least is None else min(least, runnable)
    return float(max(0, least - 1))


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
        self.ahead: list[tuple[dict[str, Any], Any]] = []  # (item, answer) scored ahead, not drained yet
        self.answered_ahead = 0  # items the copies scored ahead, over the search
        # per process: the front and back of its queue in the current map, shared with the copies
        self.bounds = multiprocessing.get_context("fork").Array("l", 2 * processes)
        gc.freeze()  # the copies' collector leaves the inherited objects alone (no copy-on-write of every page);
        # no collection first: it took 0.17 s of the V3 search, the fork itself 0.01-0.02 s
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
        """score(item) for each item, in order. `groups` (one hashable per item, default: each item its own) says
        which items share memo entries (search/runner.py passes each neighbour's changed dimension)."""
        if self.broken or len(items) < MIN_JOB or not self.conns:
            return [self.score(p) for p in items]
        queues = self._queues(groups if groups is not None else range(len(items)))
        for p, queue in enumerate(queues):  # the copies are waiting for a job: none reads the bounds now
            self.bounds[2 * p], self.bounds[2 * p + 1] = 0, len(queue)
        results: list[Any] = [None] * len(items)
        done = [False] * len(items)
        asked = []
        self.drain()  # what the copies scored ahead, so nothing of theirs waits in a pipe while the job goes out
        for index, conn in enumerate(self.conns, start=1):
            try:
                conn.send(("job", items, queues))
                asked.append((index, conn))
            except OSError:  # a copy is gone: the others and the parent take its share
                self.broken = True
        while (i := self._take(0, queues)) >= 0:
            results[i], done[i] = self.score(items[i]), True
            self.answered[0] += 1
        for index, conn in asked:
            try:
                while (reply := conn.recv())[0] == "ahead":  # answered ahead before the copy read the job
                    self.ahead.append(reply[1:])
                answers = reply[1]  # an error stops a copy early: what it did not answer is scored below
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

    def speculate(self, items: Sequence[dict[str, Any]]) -> None:
        """Have the copies score `items` while the parent runs trials (no answer awaited): the copies' cores are
        idle before refinement starts. A later call replaces the items not yet scored; `drain` collects."""
        self.drain()
        for index, conn in enumerate(self.conns):
            share = list(items[index :: len(self.conns)])
            try:
                conn.send(("ahead", share))
            except OSError:
                self.broken = True

    def drain(self) -> list[tuple[dict[str, Any], tuple[float, dict[str, Any]]]]:
        """(item, answer) pairs the copies scored ahead (`speculate`) since the last drain; never waits."""
        for conn in self.conns:
            try:
                while conn.poll():
                    reply = conn.recv()
                    if reply[0] == "ahead":
                        self.ahead.append(reply[1:])
            except (EOFError, OSError):
                self.broken = True
        out, self.ahead = self.ahead, []
        self.answered_ahead += len(out)
        return out

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


class NeighbourScoring:
    """A search session's scoring processes (search/runner.py Session: its `scored` memo, `seen` sets,
    `incumbents()` and `_best_completion`): copies forked during TPE score the incumbents' neighbours ahead
    (`score_ahead`), and are forked again when refinement starts, so that they hold the memos TPE filled since
    (a fork costs ~0.01-0.02 s); refinement's moves then score their neighbours on every process (`prefetch`)."""

    def __init__(self, session, scorers: int = 0) -> None:
        self.session = session
        # 0: processes_wanted(), asked when a pool is needed: while TPE runs at most every ASK_AGAIN_S until it
        # says 2 or more, and once more when refinement starts (a core busy early in the search, the report
        # side's start, is idle later)
        self.scorers, self.auto = scorers, scorers == 0
        self.asked_refining, self.next_ask_s = False, 0.0
        self.pool: ScorePool | None = None
        self.refines = False  # the pool was forked for refinement (else for scoring ahead)
        self.ahead_of: tuple = ()  # the incumbents whose neighbours the copies were last asked to score ahead
        self.start_s = 0.0  # forking, over the search (timings_s score_pool_s)

    def _pool(self, refining: bool) -> ScorePool | None:
        if self.pool is not None and refining and not self.refines:
            self._fold_ahead()
            self.close()
        if self.pool is None:
            if self.auto and not self.asked_refining and (refining or time.monotonic() >= self.next_ask_s):
                self.scorers, self.asked_refining = processes_wanted(), refining
                self.next_ask_s = time.monotonic() + ASK_AGAIN_S
            if self.scorers < 2:
                return None
            started = time.perf_counter()
            self.pool, self.refines = ScorePool(self.session._best_completion, self.scorers), refining
            self.start_s += time.perf_counter() - started
        return self.pool

    def _fold_ahead(self) -> None:
        if self.pool is not None:
            for params, answer in self.pool.drain():
                self.session.scored.setdefault(_key(params), answer)

    def prefetch(self, candidates: list[dict[str, Any]], incumbent: dict[str, Any]) -> None:
        """Score the candidates (neighbours of `incumbent`) not scored yet on every process; nothing when
        there are few (MIN_JOB) or the search runs on one process."""
        pool = self._pool(refining=True)
        if pool is None:
            return
        self._fold_ahead()
        scored = self.session.scored
        fresh = list({k: p for p in candidates if (k := _key(p)) not in scored}.items())
        if len(fresh) < MIN_JOB:
            return
        changed = [next((k for k, v in p.items() if incumbent.get(k, v) != v), "") for _, p in fresh]
        for (key, _), answer in zip(fresh, pool.map([p for _, p in fresh], changed), strict=True):
            scored[key] = answer

    def score_ahead(self) -> None:
        """Before refinement: once the best basins' incumbents change, hand their untried neighbours to the copies
        to score while this process runs TPE's trials (refinement starts from those incumbents)."""
        top = self.session.incumbents()[:AHEAD_BASINS]
        signature = tuple(t.number for t in top)
        if not top or signature == self.ahead_of:
            return
        self.ahead_of = signature
        pool = self._pool(refining=False)
        if pool is None:
            return
        self._fold_ahead()
        seen, scored = self.session.seen, self.session.scored
        wanted: dict[tuple, dict[str, Any]] = {}
        for incumbent in top:
            for p in neighbours(incumbent):
                if (key := _key(p)) not in seen and key not in scored:
                    wanted.setdefault(key, p)
        pool.speculate(list(wanted.values()))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def _serve(conn: Connection, score: Score, take: Callable[[list[list[int]]], int]) -> None:
    """A copy's loop until its pipe closes. A job (one `map`'s items and queues): score the items it takes until
    none is left, then send back (index, answer) pairs, stopping at an error (the parent scores what is
    missing). Items to score ahead (`speculate`): one at a time while no message waits, each answer sent as it
    is found; a new message replaces them (an error skips the item: the parent meets it if it asks)."""
    ahead: list[dict[str, Any]] = []
    while True:
        try:
            while ahead and not conn.poll():
                item = ahead.pop(0)
                try:
                    answer = score(item)
                except Exception:  # noqa: BLE001
                    continue
                conn.send(("ahead", item, answer))
            message = conn.recv()
        except (EOFError, OSError):
            return
        ahead = []
        if message[0] == "ahead":
            ahead = list(message[1])
            continue
        _, items, queues = message
        answers = []
        try:
            while (i := take(queues)) >= 0:
                answers.append((i, score(items[i])))
        except Exception:  # noqa: BLE001 - the parent scores what is missing again and raises the error there
            pass
        try:
            conn.send(("job", answers))
        except OSError:
            return
