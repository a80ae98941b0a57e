"""report/drawing.py: figures taken from one queue by this process and forked children, each written once, a
child's failure redrawn (and raised) here."""

import os
import time

import pytest

from autotune.report.drawing import can_fork, draw_all


def _writer(path):
    path.write_text(str(os.getpid()))
    with open(path.parent / "log", "a") as log:  # one line per draw, whoever drew it
        log.write(path.name + "\n")
    return path


def _waiting_for(other):
    """A figure that is written only once `other` exists (drawn by another process meanwhile)."""

    def draw(path):
        deadline = time.monotonic() + 20
        while not other.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not other.exists():
            raise RuntimeError(f"{other.name} was not drawn while {path.name} waited")
        return _writer(path)

    return draw


def test_every_figure_written_once_and_returned_in_order(tmp_path):
    jobs = {f"fig{k}": (tmp_path / f"{k}.txt", _writer) for k in range(5)}
    drawn = draw_all(jobs, workers=3)
    assert list(drawn) == list(jobs)
    assert all(path.is_file() for path in drawn.values())
    assert sorted((tmp_path / "log").read_text().split()) == sorted(p.name for p in drawn.values())


@pytest.mark.skipif(not can_fork(), reason="no fork or one core: figures are drawn in this process")
def test_the_figures_are_taken_from_one_queue(tmp_path):
    """The first figure cannot finish until the last one is drawn: dealt round-robin to two processes, its own
    process would hold the last one behind it; from a queue, the other process (this one or the child, whichever
    took the first) takes the second and the last."""
    last = tmp_path / "c.txt"
    jobs = {"a": (tmp_path / "a.txt", _waiting_for(last)), "b": (tmp_path / "b.txt", _writer), "c": (last, _writer)}
    drawn = draw_all(jobs, workers=2)
    assert drawn["b"].read_text() == drawn["c"].read_text() != drawn["a"].read_text()
    assert sorted((tmp_path / "log").read_text().split()) == ["a.txt", "b.txt", "c.txt"]


def test_beside_runs_here_once(tmp_path):
    ran = []
    draw_all({k: (tmp_path / f"{k}.txt", _writer) for k in "ab"}, workers=2, beside=lambda: ran.append(os.getpid()))
    assert ran == [os.getpid()]


def test_one_worker_draws_here(tmp_path):
    drawn = draw_all({k: (tmp_path / f"{k}.txt", _writer) for k in "ab"}, workers=1)
    assert {p.read_text() for p in drawn.values()} == {str(os.getpid())}


@pytest.mark.skipif(not can_fork(), reason="no fork or one core: figures are drawn in this process")
def test_a_figure_a_child_failed_is_drawn_again_here(tmp_path):
    parent = os.getpid()

    def only_here(path):
        if os.getpid() != parent:
            raise RuntimeError("a child cannot draw this one")
        return _writer(path)

    drawn = draw_all({"a": (tmp_path / "a.txt", _writer), "b": (tmp_path / "b.txt", only_here)}, workers=2)
    assert drawn["b"].read_text() == str(parent)


def test_an_error_is_raised_in_this_process(tmp_path):
    def broken(path):
        raise ValueError("no data for this figure")

    with pytest.raises(ValueError, match="no data"):
        draw_all({"a": (tmp_path / "a.txt", _writer), "b": (tmp_path / "b.txt", broken)}, workers=2)
