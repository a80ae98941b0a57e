"""`--workers N`: N processes on one storage, each running its share of the trials (search/runner.py).

The objective is pure Python (the performance model), so threads would share one interpreter lock; each
worker is a forked process with its own sampler seed (seed + worker index), writing its trials to the
shared storage in batches and folding in the others' trials as it goes.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time

from autotune.specs import MiTuneError

POLL_S = 0.5


def shares(budget: int, workers: int) -> list[int]:
    """`budget` trials split as evenly as possible over `workers` (the first ones take the remainder)."""
    return [budget // workers + (i < budget % workers) for i in range(workers)]


def _child(req, choices, url: str, budget: int, tag: str, deadline: float | None) -> None:
    from autotune.search.runner import Session, Stop
    from autotune.search.storage import open_study

    stop = Stop(deadline)
    for signum in (signal.SIGINT, signal.SIGTERM):  # finish the trial, write, exit
        signal.signal(signum, lambda *_: stop.interrupted.set())
    try:
        Session(req, choices, open_study(req, url), stop, budget=budget, tag=tag, scorers=1).run()  # cores taken
    except MiTuneError as exc:
        print(f"mi-tune: error: worker {tag}: {exc}", file=sys.stderr)
        os._exit(2)
    except BaseException as exc:  # noqa: BLE001 - one line, the parent reports the failure
        print(f"mi-tune: worker {tag} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_workers(req, choices, url: str, budget: int, stop, progress=None, count=None) -> None:
    """Run `budget` trials over req.workers forked processes; returns when all have written their trials.
    `stop.interrupted` set (SIGINT in this process) is passed on to the workers; `progress(count())` is
    called while they run."""
    context = multiprocessing.get_context("fork")
    procs = []
    for index, share in enumerate(shares(budget, req.workers)):
        if share:
            worker_req = _with_worker(req, index)
            tag = f"{req.run_id}/{index}"
            procs.append(
                context.Process(target=_child, args=(worker_req, choices, url, share, tag, stop.deadline), daemon=True)
            )
    for proc in procs:
        proc.start()
    forwarded = False
    while any(p.is_alive() for p in procs):
        if stop.interrupted.is_set() and not forwarded:
            for p in procs:
                if p.is_alive() and p.pid:
                    os.kill(p.pid, signal.SIGINT)
            forwarded = True
        if progress is not None and count is not None:
            progress(count())
        for p in procs:
            p.join(timeout=POLL_S / max(1, len(procs)))
    failed = [(p.exitcode, i) for i, p in enumerate(procs) if p.exitcode]
    if failed:
        code, index = failed[0]
        if code == 2:
            raise MiTuneError(f"--workers: worker {index} stopped on bad input (see its message above)")
        raise RuntimeError(f"worker {index} of {len(procs)} exited with code {code}")
    time.sleep(0)  # the workers' last writes are on disk: the parent reads the storage next


def _with_worker(req, index: int):
    import dataclasses

    return dataclasses.replace(req, worker=index, progress=False, workers=1)
