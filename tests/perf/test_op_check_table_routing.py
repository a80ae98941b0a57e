"""tests/bench/op_check.py prices AIConfigurator's MoE rows at the routing their generator draws (a power law of
per-expert token counts, rounded: many experts get none), not at the model's routing prior: the op list is built
under the rank-popularity skew whose distinct-expert count equals the generator's expected hit count."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from autotune.catalog.models import load_model
from autotune.perf import efficiency as eff
from autotune.perf import routing

SPEC = importlib.util.spec_from_file_location("op_check", Path(__file__).parents[1] / "bench" / "op_check.py")
oc = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault(SPEC.name, oc)
SPEC.loader.exec_module(oc)


def test_one_token_hits_exactly_its_top_k():
    assert oc.table_experts_hit(1, 256, 8) == pytest.approx(8.0)


@pytest.mark.parametrize("tokens", [128, 256, 512])
def test_the_generator_hits_fewer_experts_than_the_prior_and_the_skew_reproduces_it(tokens):
    hit = oc.table_experts_hit(tokens, 384, 8)
    assert 8 < hit < 0.9 * routing.distinct_experts(384, 8, tokens)  # the prior: eff.ROUTING_SKEW
    skew = oc.table_routing_skew(tokens, 384, 8)
    assert skew > eff.ROUTING_SKEW
    assert routing.distinct_experts(384, 8, tokens, skew) == pytest.approx(hit, rel=0.005)


def test_moe_rows_are_priced_at_the_tables_routing(tmp_path, monkeypatch):
    """A weight-bound row (E=384, top-8, 256 tokens: every expert's weights streamed once) costs less at the table's
    routing than at the prior's, and the prior is restored afterwards."""
    pd = pytest.importorskip("pandas")
    table = tmp_path / "h200_sxm" / "moe" / "vllm" / "0.24.0" / "moe_perf.parquet"
    table.parent.mkdir(parents=True)
    table.touch()
    frame = pd.DataFrame(
        {"distribution": ["power_law_1.01"], "moe_tp_size": [1], "moe_ep_size": [1], "moe_dtype": ["bfloat16"],
         "kernel_source": ["vllm_fused_moe"], "num_tokens": [256], "hidden_size": [7168], "inter_size": [2048],
         "num_experts": [384], "topk": [8], "latency": [1.0]}
    )  # fmt: skip
    monkeypatch.setattr(pd, "read_parquet", lambda path: frame)
    hw, model, prior_skew = oc.box("h200_sxm"), load_model("deepseek-v3"), eff.ROUTING_SKEW
    (row,) = oc.moe_points(str(tmp_path), "h200_sxm", hw, model)
    assert prior_skew == eff.ROUTING_SKEW
    with oc.routing_skew(eff.ROUTING_SKEW):  # the same row at the prior's routing
        monkeypatch.setattr(oc, "table_routing_skew", lambda *args: eff.ROUTING_SKEW)
        (prior,) = oc.moe_points(str(tmp_path), "h200_sxm", hw, model)
    hit_ratio = oc.table_experts_hit(256, 384, 8) / routing.distinct_experts(384, 8, 256)
    assert row[1] < prior[1]
    assert row[1] / prior[1] == pytest.approx(hit_ratio, rel=0.1)  # the weight stream scales with the experts hit
