"""Refinement's neighbour scoring on forked copies (search/pool.py): the search does not depend on the pool's
size, an error or a lost copy changes no answer, and no copy outlives the search (error, Ctrl-C, a killed parent)."""

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.cli import run
from autotune.search import pool as score_pool
from autotune.search.pool import ScorePool, processes_wanted
from autotune.specs import MiTuneError

ROOT = Path(__file__).resolve().parents[2]
V3 = ["search", "--model", "deepseek-v3", "--preset", "rtx-pro-6000-x8", "--isl", "4000", "--osl", "1000",
      "--ttft-ms", "2000", "--tpot-ms", "30"]  # fmt: skip


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie has exited; only its entry waits to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(c) for c in text.split()]
    return found


def _copies(pid: int) -> list[int]:
    """The search's forked copies among its children: they keep its command line (the report side, a child too,
    is a fresh interpreter with one of its own: report/worker.py)."""
    mine = _cmdline(pid)
    return [c for c in _children(pid) if _cmdline(c) == mine]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _square(params: dict) -> tuple[float, dict]:
    if params["x"] == 13:
        raise ValueError("thirteen")
    time.sleep(0.002)  # long enough for the copies to take items
    return float(params["x"] ** 2), {"x": params["x"], "pid": os.getpid()}


needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc").is_dir(), reason="fork and /proc")


@needs_fork
def test_map_keeps_the_order_and_every_process_scores():
    pool = ScorePool(_square, 3)
    try:
        items = [{"x": x} for x in range(20, 60)]
        out = pool.map(items, [x % 5 for x in range(40)])
        assert [value for value, _ in out] == [float(x * x) for x in range(20, 60)]
        assert sum(pool.answered) == 40 and pool.size == 3
        assert len({done["pid"] for _, done in out}) >= 2  # copies took items (pids differ from the parent's)
        again = pool.map(items[:3])  # fewer than MIN_JOB: the parent alone
        assert [v for v, _ in again] == [400.0, 441.0, 484.0] and {d["pid"] for _, d in again} == {os.getpid()}
    finally:
        pool.close()


@needs_fork
def test_an_error_in_a_copy_is_raised_in_the_parent_and_a_lost_copy_changes_no_answer():
    pool = ScorePool(_square, 2)
    copy = pool.pids[0]
    try:
        with pytest.raises(ValueError, match="thirteen"):  # whoever took item 13, the parent raises it
            pool.map([{"x": x} for x in range(10, 20)])
        os.kill(copy, signal.SIGKILL)
        os.waitpid(copy, 0)
        out = pool.map([{"x": x} for x in range(20, 30)])
        assert [v for v, _ in out] == [float(x * x) for x in range(20, 30)] and pool.broken
    finally:
        pool.close()
    assert not _alive(copy) and pool.pids == []


@needs_fork
def test_scoring_ahead_is_collected_and_a_job_in_between_is_still_answered_in_full():
    pool = ScorePool(_square, 2)
    try:
        pool.speculate([{"x": x} for x in range(100, 140)])  # 2 ms each: the job below arrives mid-way
        ahead, deadline = [], time.monotonic() + 10
        while not ahead and time.monotonic() < deadline:
            time.sleep(0.005)
            ahead += pool.drain()
        out = pool.map([{"x": x} for x in range(20, 30)])
        assert [v for v, _ in out] == [float(x * x) for x in range(20, 30)]
        ahead += pool.drain()
        assert ahead and len({item["x"] for item, _ in ahead}) == len(ahead)
        assert all(answer[0] == float(item["x"] ** 2) and 100 <= item["x"] < 140 for item, answer in ahead)
        pool.speculate([{"x": 7}, {"x": 13}, {"x": 8}])  # an error ahead skips the item
        later, deadline = [], time.monotonic() + 10
        while len(later) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
            later += pool.drain()
        assert sorted(item["x"] for item, _ in later) == [7, 8]
    finally:
        pool.close()


@needs_fork
def test_close_ends_every_copy():
    pool = ScorePool(_square, 3)
    pids = list(pool.pids)
    assert all(_alive(pid) for pid in pids)
    pool.close()
    pool.close()  # idempotent
    assert not any(_alive(pid) for pid in pids)


def test_processes_wanted_reads_the_environment(monkeypatch):
    monkeypatch.setenv(score_pool.ENV, "1")
    assert processes_wanted() == 1
    monkeypatch.setenv(score_pool.ENV, "3")
    assert processes_wanted() == (3 if "fork" in score_pool.multiprocessing.get_all_start_methods() else 1)
    for bad in ("0", "two"):
        monkeypatch.setenv(score_pool.ENV, bad)
        with pytest.raises(MiTuneError, match=f"{score_pool.ENV}: expected a whole number of processes >= 1"):
            processes_wanted()
    monkeypatch.delenv(score_pool.ENV)
    assert 1 <= processes_wanted() <= score_pool.MAX_PROCESSES
    monkeypatch.setattr(score_pool.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    for others, idle in ((0.0, 2), (1.0, 1), (3.0, 1)):  # runnable tasks now, this process left out
        monkeypatch.setattr(score_pool, "_runnable_others", lambda others=others: others)
        monkeypatch.setattr(score_pool.os, "getloadavg", lambda: (3.5, 3.5, 3.5))  # not read where /proc is
        assert score_pool.idle_cores() == idle
    monkeypatch.setattr(score_pool, "_runnable_others", lambda: None)  # no /proc: the 1-minute load average
    for load, idle in ((0.9, 2), (1.4, 2), (2.0, 1), (3.5, 1)):  # the search itself counts about 1
        monkeypatch.setattr(score_pool.os, "getloadavg", lambda load=load: (load, load, load))
        assert score_pool.idle_cores() == idle


def test_runnable_others_reads_proc_loadavg(monkeypatch):
    readings = iter(["0.50 0.40 0.30 3/120 999\n", "0.50 0.40 0.30 2/120 999\n", "0.50 0.40 0.30 4/120 999\n"])
    monkeypatch.setattr("builtins.open", lambda *a, **k: io.StringIO(next(readings)))
    assert score_pool._runnable_others(apart_s=0.0) == 1.0  # the least of three readings, this process left out

    def missing(*a, **k):
        raise FileNotFoundError("/proc/loadavg")

    monkeypatch.setattr("builtins.open", missing)
    assert score_pool._runnable_others(apart_s=0.0) is None


def test_scoring_asks_again_while_tpe_runs_and_for_refinement(monkeypatch):
    """The core busy early in the search (the report side's start) may be idle later: a search told 1 process
    asks again while TPE runs (at most every ASK_AGAIN_S) and once more when refinement needs its pool; one told
    a count keeps it."""
    asked = []
    monkeypatch.setattr(score_pool, "processes_wanted", lambda: asked.append(1) or 1)
    monkeypatch.setattr(score_pool, "ASK_AGAIN_S", 3600.0)
    scoring = score_pool.NeighbourScoring(session=None)
    assert scoring._pool(refining=False) is None and len(asked) == 1
    assert scoring._pool(refining=False) is None and len(asked) == 1  # not again within ASK_AGAIN_S
    scoring.next_ask_s = 0.0  # ASK_AGAIN_S later
    assert scoring._pool(refining=False) is None and len(asked) == 2
    assert scoring._pool(refining=True) is None and len(asked) == 3  # refinement asks again
    assert scoring._pool(refining=True) is None and len(asked) == 3
    scoring.next_ask_s = 0.0
    assert scoring._pool(refining=False) is None and len(asked) == 3  # refinement's answer stands
    fixed = score_pool.NeighbourScoring(session=None, scorers=1)
    monkeypatch.setattr(score_pool, "processes_wanted", lambda: pytest.fail("asked with a count given"))
    assert fixed._pool(refining=False) is None and fixed._pool(refining=True) is None


@needs_fork
def test_the_search_does_not_depend_on_the_pool_size(tmp_path, monkeypatch, capsys):
    """The V3 question, a short budget (30 TPE trials, then refinement): serial and two processes write the same
    trials.csv and best.yaml, and the copies scored neighbours ahead (during TPE) and in refinement's moves."""
    pools: list[ScorePool] = []
    start = ScorePool.__init__

    def spy(self, score, processes):
        start(self, score, processes)
        pools.append(self)

    monkeypatch.setattr(ScorePool, "__init__", spy)
    written = {}
    for size in (1, 2):
        monkeypatch.setenv(score_pool.ENV, str(size))
        out = tmp_path / f"pool{size}"
        assert run([*V3, "--trials", "40", "--out", str(out)]) == 0
        written[size] = ((out / "trials.csv").read_bytes(), (out / "best.yaml").read_bytes())
    capsys.readouterr()
    assert written[1] == written[2]
    # a copy scored ahead during TPE, then the copy forked for refinement scored neighbours; both closed
    assert len(pools) == 2 and pools[0].answered_ahead > 0 and pools[1].answered[1] > 0
    assert pools[0].pids == pools[1].pids == []


@needs_fork
def test_ctrl_c_ends_the_copies(tmp_path):
    """Ctrl-C (SIGINT to the search's process group, as a terminal sends it) stops the search after the move
    under way, writes its outputs and ends the copies."""
    cmd = [sys.executable, "-c", "from autotune.cli import main; main()", *V3, "--trials", "400",
           "--out", str(tmp_path / "run")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), score_pool.ENV: "2"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (copies := _copies(proc.pid)) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the copies are forked when refinement starts
    assert copies, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # the whole group, copies included
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and b"Traceback" not in err, err  # as test_lifecycle: interrupted, outputs written
    assert b"(interrupted)" in out and (tmp_path / "run" / "best.yaml").is_file()
    assert not any(_alive(pid) for pid in copies)


KILLED = """
import sys, time
from autotune.search.pool import ScorePool
pool = ScorePool(lambda p: (0.0, p), 2)
print(pool.pids[0], flush=True)
time.sleep(60)
"""


@needs_fork
def test_a_killed_parents_copies_exit():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED], env=env, stdout=subprocess.PIPE, text=True)
    copy = int(proc.stdout.readline())
    assert _alive(copy)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(copy) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(copy)  # its pipe closed with the parent: it exited on its own
