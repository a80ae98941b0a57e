"""report/drawing.py: figures split between this process and forked children, each written once, a child's
failure redrawn (and raised) here."""

import os

import pytest

from autotune.report.drawing import can_fork, draw_all


def _writer(path):
    path.write_text(str(os.getpid()))
    return path


def test_every_figure_written_and_returned_in_order(tmp_path):
    jobs = {f"fig{k}": (tmp_path / f"{k}.txt", _writer) for k in range(5)}
    drawn = draw_all(jobs, workers=3)
    assert list(drawn) == list(jobs)
    assert all(path.is_file() for path in drawn.values())
    writers = {path.read_text() for path in drawn.values()}
    if can_fork():  # 3 groups: this process draws one, two children the others
        assert str(os.getpid()) in writers and len(writers) == 3
    else:
        assert writers == {str(os.getpid())}


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
