"""Workload.expert_load_cv arrives from the flag and from the workload file as the other workload inputs do."""

from __future__ import annotations

import pytest

from autotune.cli.options import sim_flags, workload_from_flags
from autotune.sim.workloads import load_workload_file
from autotune.specs import Workload


def _flags(cv: float, file: str | None = None) -> Workload:
    extra = sim_flags(0, "fixed", 0.0, 0.0, "", 0.0, 1000, 95.0, 0.0, cv)
    return workload_from_flags(4096, 1024, 0, 0.0, 0.0, 0.0, "throughput", file, None, **extra)


def test_the_flag_sets_the_field_and_zero_leaves_the_default():
    assert _flags(1.3).expert_load_cv == 1.3
    assert _flags(0.0).expert_load_cv == 0.0 == Workload().expert_load_cv


def test_the_file_key_is_read_and_a_flag_overrides_it(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("schema: mi-tune/workload/v1\nisl: 1024\nosl: 256\nexpert_load_cv: 0.9\n")
    assert load_workload_file(str(path)).expert_load_cv == 0.9
    assert _flags(0.0, str(path)).expert_load_cv == 0.9
    assert _flags(2.0, str(path)).expert_load_cv == 2.0


@pytest.mark.parametrize("bad", [-0.1, 32.5, float("nan"), float("inf")])
def test_out_of_range_is_one_line(bad):
    with pytest.raises(ValueError) as err:
        Workload(expert_load_cv=bad)
    assert str(err.value).startswith("expert_load_cv: expected a coefficient of variation in [0, 32]")
    assert "\n" not in str(err.value)
