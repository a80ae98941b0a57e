"""report/worker.py: the report side started before the trials writes the same outputs as this process would, a
child's failure falls back to this process, and an interrupted or killed search leaves no process behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune import api
from autotune.report import worker
from autotune.specs import Workload

forking = pytest.mark.skipif(
    not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="no fork or one core: the report is written here"
)
linux = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads processes from /proc")


def _gone(side) -> bool:
    return side.proc.returncode is not None  # reaped


@forking
def test_the_job_runs_in_the_child_and_the_child_is_reaped():
    side = worker.Worker.start("os:getpid")
    assert worker.run(side, "os:getpid") == side.pid != os.getpid()
    assert side.used and side.warm_s >= 0
    assert _gone(side)


@forking
def test_a_child_that_fails_leaves_the_job_to_this_process():
    side = worker.Worker.start("math:no_such_function")  # its warm-up raises: the child ends
    assert worker.run(side, "os.path:join", "a", "b") == os.path.join("a", "b")
    assert not side.used


@forking
def test_closed_before_any_job_kills_and_reaps_the_child():
    side = worker.Worker.start("os:getpid")
    side.close()
    side.close()  # idempotent
    assert _gone(side)


def _outputs(out: Path) -> dict:
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    files.pop("study.journal")  # trial timestamps
    files.pop("manifest.yaml")  # the run's elapsed time
    summary = json.loads(files.pop("summary.json"))
    summary.pop("timings_s"), summary.pop("elapsed_s")
    files["summary"] = summary
    for name in ("report.md", "report.html"):  # one line states the search's time
        files[name] = [line for line in files[name].decode().splitlines() if " trials in " not in line]
    return files


@forking
def test_the_same_outputs_with_and_without_the_report_side(tmp_path, monkeypatch):
    workload = Workload(isl=2048, osl=512)
    opts = dict(model="deepseek-v4.1-flash", preset="rtx-pro-6000-x8", workload=workload, trials=16, seed=3)
    forked = api.search(api.SearchOptions(**opts, out=str(tmp_path / "forked")))
    assert "report_warmup_s" in forked.timings_s  # the report side wrote this one
    monkeypatch.setattr(worker.Worker, "start", classmethod(lambda cls, *args: None))
    here = api.search(api.SearchOptions(**opts, out=str(tmp_path / "here")))
    assert "report_warmup_s" not in here.timings_s
    assert _outputs(tmp_path / "forked") == _outputs(tmp_path / "here")
    assert (forked.top, forked.missed, forked.scale) == (here.top, here.missed, here.scale)
    assert {k: p.name for k, p in forked.files.items()} == {k: p.name for k, p in here.files.items()}


def _session(sid: int) -> set[int]:
    """The processes of session `sid` (field 6 of /proc/PID/stat)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.add(int(entry.name))
    return pids


def _wait(condition, what: str, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds:g} s for {what}")
        time.sleep(0.05)


def _search_in_a_session(out: Path) -> subprocess.Popen:
    """A long search in its own session (a terminal's process group), once its report side is started and its
    trials run."""
    argv = ["search", "--model", "deepseek-v4.1-flash", "--preset", "rtx-pro-6000-x8", "--trials", "5000"]
    cmd = [sys.executable, "-c", "from autotune.cli import main; main()", *argv, "--out", str(out), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait(lambda: len(_session(proc.pid)) >= 2 or proc.poll() is not None, "the report side's start")
    journal = out / "study.journal"
    finished = '"state":1'  # a finished trial's record (the journal is written in batches)
    _wait(lambda: journal.is_file() and finished in journal.read_text() or proc.poll() is not None, "a trial", 300)
    assert proc.poll() is None, proc.communicate()[1]
    return proc


@linux
@forking
def test_ctrl_c_to_the_whole_group_writes_the_report_and_leaves_no_process(tmp_path):
    proc = _search_in_a_session(tmp_path / "run")
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does: every process of the group gets it
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "report_warmup_s" in json.loads(stdout)["timings_s"]  # the report side ignored the signal and wrote it
    assert (tmp_path / "run" / "report.html").is_file() and (tmp_path / "run" / "plots" / "pareto.png").is_file()
    _wait(lambda: not _session(proc.pid), "the session's processes to end", 10)


@linux
@forking
def test_a_killed_search_leaves_no_process(tmp_path):
    proc = _search_in_a_session(tmp_path / "run")
    proc.kill()  # SIGKILL: no handler runs in the search's process
    proc.communicate(timeout=60)
    _wait(lambda: not _session(proc.pid), "the report side to end with the search", 10)
