"""tests/bench/calibration_check.py loaded as a module for the tests that check its rows (it is a script under
tests/bench, not a package module)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "calibration_check", Path(__file__).parents[1] / "bench" / "calibration_check.py"
)
cc = sys.modules.get(SPEC.name)
if cc is None:
    cc = importlib.util.module_from_spec(SPEC)
    sys.modules[SPEC.name] = cc  # dataclasses look their module up there
    SPEC.loader.exec_module(cc)
