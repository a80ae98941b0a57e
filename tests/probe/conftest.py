"""Probe fixtures: recorded boxes as sysfs/procfs trees and a fake `pynvml` (see fixtures/)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"probe_fixture_{name}", FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def box_tree(tmp_path):
    """box_tree("esc8000a_rtx_pro_6000") -> (sysfs_root, proc_root) built from fixtures/<name>.yaml."""
    tree = _load("sysfs_tree")
    return lambda name: tree.build(name, tmp_path / name)


@pytest.fixture
def layout():
    return _load("sysfs_tree").load_layout


@pytest.fixture
def fake_nvml(monkeypatch):
    """fake_nvml("esc8000a") installs a fresh fake `pynvml` configured with that box."""

    def install(box: str):
        module = _load("fake_pynvml")
        module.configure(module.BOXES[box])
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install
