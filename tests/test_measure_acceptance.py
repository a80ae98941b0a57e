"""measure reads the speculative acceptance the engine counted and predicts with it (issue 16: acceptance as an
input, fitted by measure from the engine's own metrics)."""

import dataclasses

import pytest

from autotune.catalog.presets import load_preset
from autotune.inputs import resolve_model
from autotune.measure import acceptance
from autotune.measure.judge import Judge, benched_of, measured_acceptance, with_measured
from autotune.perf.oplist import speculation
from autotune.search import baseline_plan
from autotune.specs import Workload
from autotune.specs.plan import Speculative

VLLM_TEXT = """# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 50.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 180.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 90.0
vllm:num_requests_running{model_name="m"} 3 1700000000000
not a metric line
broken{ x
"""


def test_prometheus_text_sums_label_sets_and_skips_the_rest():
    parsed = acceptance.parse_prometheus(VLLM_TEXT)
    assert parsed == {
        "vllm:spec_decode_num_drafts_total": 150.0,
        "vllm:spec_decode_num_accepted_tokens_total": 270.0,
        "vllm:num_requests_running": 3.0,
    }


def test_tokens_per_step_is_the_difference_between_scrapes():
    before = {acceptance.VLLM_DRAFTS: 100.0, acceptance.VLLM_ACCEPTED: 300.0}
    after = {acceptance.VLLM_DRAFTS: 300.0, acceptance.VLLM_ACCEPTED: 600.0}
    assert acceptance.tokens_per_step(before, after) == pytest.approx(1 + 300 / 200)  # vLLM's mean acceptance length
    sglang = {acceptance.SGLANG_GENERATED: 1010.0, acceptance.SGLANG_REQUESTS: 10.0, acceptance.SGLANG_VERIFY: 400.0}
    assert acceptance.tokens_per_step({}, sglang) == pytest.approx(1000 / 400)
    assert acceptance.tokens_per_step({}, {acceptance.SGLANG_ACCEPT_LENGTH: 2.7}) == pytest.approx(2.7)  # gauge only
    assert acceptance.tokens_per_step(after, after) is None  # no step during the bench


@pytest.mark.parametrize("a, k", [(0.3, 1), (0.6, 3), (0.85, 5), (0.05, 2)])
def test_draft_acceptance_inverts_the_models_speculation(a, k):
    model, _ = resolve_model("deepseek-v3")
    phase = dataclasses.replace(baseline_plan("vllm", load_preset("h200-x8"), 8).phases["both"],
                                speculative=Speculative("mtp", k))  # fmt: skip
    _, tokens = speculation(phase, model.family, a)
    assert acceptance.draft_acceptance(tokens, k) == pytest.approx(a, abs=1e-3)


def test_draft_acceptance_edges():
    assert acceptance.draft_acceptance(1.0, 3) == 0.0  # nothing accepted
    assert acceptance.draft_acceptance(4.0, 3) == acceptance.MAX_ACCEPTANCE  # every draft accepted
    assert acceptance.draft_acceptance(2.0, 0) == 0.0


def _spec_plan(method="mtp", k=3):
    plan = baseline_plan("vllm", load_preset("h200-x8"), 8)
    both = dataclasses.replace(plan.phases["both"], speculative=Speculative(method, k))
    return dataclasses.replace(plan, phases={"both": both})


def test_the_fit_and_the_reranking_predict_with_the_measured_acceptance():
    model, _ = resolve_model("deepseek-v3")
    hw = load_preset("h200-x8")
    searched = Workload(isl=1000, osl=500, concurrency=16)
    plan, plain = _spec_plan(), baseline_plan("vllm", hw, 8)
    rows = [{"measured_draft_acceptance": "0.4"}, {"measured_draft_acceptance": ""}]
    assert measured_acceptance(rows, [plan, plain]) == {"mtp": 0.4}
    benched = benched_of(searched, rows[0])
    assert benched.draft_acceptance == 0.4 and benched_of(searched, rows[1]) == searched
    assert with_measured(searched, plain, {"mtp": 0.4}) == searched  # a plan without speculation is unchanged
    judge = Judge(model, simulated=False, seed=0)
    low = judge(plan, hw, with_measured(searched, plan, {"mtp": 0.4}))
    default = judge(plan, hw, searched)
    assert low.output_tok_s < default.output_tok_s  # fewer accepted drafts: slower decode


def test_search_measure_reads_the_engines_acceptance_end_to_end(tmp_path, capsys):
    """`search --measure` on a plan with MTP, the stand-in counting 2.2 tokens per verify step: measured.csv
    records it, and best-measured.yaml predicts with the acceptance it implies."""
    import csv
    import json

    from autotune.cli import run
    from autotune.specs import load_best
    from tests.loadgen.conftest import free_port

    timing = tmp_path / "timing.json"
    timing.write_text(json.dumps({"ttft_ms": 5.0, "tpot_ms": 2.0, "tokens_per_step": 2.2}))
    out = tmp_path / "run"
    argv = ["search", "--model", "deepseek-v3", "--preset", "h200-x8", "--trials", "12", "--isl", "64", "--osl",
            "32", "--concurrency", "4", "--num-requests", "16", "--out", str(out), "--measure", "1",
            "--measure-port", str(free_port()), "--stand-in", str(timing)]  # fmt: skip
    assert run(argv) == 0
    best = load_best(out / "best.yaml")
    assert best.plan.decoding.speculative.method == "mtp"  # what this test is about: the search keeps MTP here
    k = best.plan.decoding.speculative.draft_tokens
    with (out / "measured.csv").open() as f:
        row = next(csv.DictReader(f))
    # 31 tokens after the first, 2.2 at a time: ceil(31 / 2.2) = 15 verify steps
    assert float(row["measured_tokens_per_step"]) == pytest.approx(1 + 16 / 15, abs=1e-3)
    accepted = float(row["measured_draft_acceptance"])
    assert accepted == pytest.approx(acceptance.draft_acceptance(1 + 16 / 15, k), abs=1e-3)
    measured = load_best(out / "best-measured.yaml")
    assert measured.workload.draft_acceptance == pytest.approx(accepted, abs=1e-4)
    assert best.workload.draft_acceptance == 0.0  # the search's answer keeps the model's default
    assert "speculative acceptance measured by the engine" in capsys.readouterr().out


def test_sglang_speculative_plans_serve_the_counters_measure_reads():
    from autotune.engines import build_launch

    model, _ = resolve_model("deepseek-v3")
    hw = load_preset("h200-x8")
    plain = baseline_plan("sglang", hw, 8)
    both = dataclasses.replace(plain.phases["both"], speculative=Speculative("mtp", 3))
    spec = dataclasses.replace(plain, phases={"both": both})
    assert "--enable-metrics" in build_launch(spec, model, hw).processes[0].argv
    assert "--enable-metrics" not in build_launch(plain, model, hw).processes[0].argv
