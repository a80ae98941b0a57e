"""One small search shared by the report tests (tests copy it before changing anything)."""

import pytest

from autotune.cli import run

SEARCH = ["search", "--model", "deepseek-v4.1-flash", "--preset", "rtx-pro-6000-x8", "--trials", "40", "--seed", "2"]
SEARCH += ["--isl", "2048", "--osl", "512"]


@pytest.fixture(scope="session")
def searched(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    assert run([*SEARCH, "--out", str(out)]) == 0
    return out
