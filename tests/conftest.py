"""Tests import this checkout's code, never an installed copy of another one.

pyproject's `pythonpath = ["."]` puts the checkout first on sys.path, so `autotune` is this checkout's package;
autotune/__init__.py then maps autotune.kernels / autotune.search_spaces to this checkout's top-level folders ahead
of any editable-install finder. Here the session stops at once, naming both paths, if that did not hold (for
instance a pytest run that bypasses the ini file); tests/test_layout.py checks the same per module.
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    import autotune
    import autotune.kernels
    import autotune.search_spaces

    for module in (autotune, autotune.kernels, autotune.search_spaces):
        where = Path(module.__file__).resolve()
        if not where.is_relative_to(ROOT):
            raise pytest.UsageError(f"{module.__name__} imports from {where}, not from this checkout {ROOT}")
