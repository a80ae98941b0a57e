"""tests/bench/op_check.py prints apart the Triton fused-MoE rows of a vLLM that predates vllm-project/vllm#34846
(the A100 table, vLLM 0.14.0): those ran the old default config, not the batch-aware one vLLM 0.34 runs on a shape
without a tuned config file (op_check APART 'moe old-defaults')."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from autotune.catalog.models import load_model

SPEC = importlib.util.spec_from_file_location("op_check", Path(__file__).parents[1] / "bench" / "op_check.py")
oc = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault(SPEC.name, oc)
SPEC.loader.exec_module(oc)


@pytest.mark.parametrize(
    ("system", "version", "kernel_source", "apart"),
    [
        ("a100_sxm", "0.14.0", "vllm_fused_moe", True),
        ("h100_sxm", "0.24.0", "vllm_fused_moe", False),  # a vLLM with #34846's defaults: counted
        ("a100_sxm", "0.14.0", "vllm_marlin_moe", False),  # not the Triton kernel whose defaults changed
    ],
)
def test_triton_moe_rows_of_a_vllm_before_the_new_defaults_are_printed_apart(
    tmp_path, monkeypatch, system, version, kernel_source, apart
):
    pd = pytest.importorskip("pandas")
    table = tmp_path / system / "moe" / "vllm" / version / "moe_perf.parquet"
    table.parent.mkdir(parents=True)
    table.touch()
    frame = pd.DataFrame(
        {"distribution": ["power_law_1.01"] * 2, "moe_tp_size": [1, 1], "moe_ep_size": [1, 1],
         "moe_dtype": ["bfloat16"] * 2, "kernel_source": [kernel_source] * 2, "num_tokens": [16, 4096],
         "hidden_size": [2048, 2048], "inter_size": [768, 768], "num_experts": [128, 128], "topk": [8, 8],
         "latency": [0.5, 3.0]}
    )  # fmt: skip
    monkeypatch.setattr(pd, "read_parquet", lambda path: frame)
    assert "moe old-defaults" in oc.APART
    rows = list(oc.moe_points(str(tmp_path), system, oc.box(system), load_model("deepseek-v3")))
    assert len(rows) == 2
    assert all(("moe old-defaults" in row[3:]) == apart for row in rows)
