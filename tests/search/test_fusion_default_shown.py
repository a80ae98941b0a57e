"""best.yaml shows the fusion the engine runs by default (capability.with_engine_defaults in api.best_config): the
engine-default baseline on an H200 box leaves fusion.allreduce_rmsnorm unset, and vLLM 0.34 runs it there
(vllm/config/vllm.py:208-231, :325-345), so the written baseline plan says on."""

from __future__ import annotations

from autotune import api
from autotune.specs import Workload


def test_the_written_baseline_shows_the_engines_default_fusion(tmp_path):
    opts = api.SearchOptions(
        model="qwen3-235b-a22b",
        preset="h200-x8",
        engine="vllm",
        mode="aggregated",
        workload=Workload(isl=1024, osl=256),
        trials=4,
        seed=0,
        out=str(tmp_path / "run"),
    )
    best = api.search(opts).best
    assert best.baseline.plan.phases["both"].fusion == {"allreduce_rmsnorm": True}
    assert "allreduce_rmsnorm: true" in (tmp_path / "run" / "best.yaml").read_text()
