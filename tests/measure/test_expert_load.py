"""measure reads the experts' popularity CV from the engine's own expert-load reports (measure/expert_load.py):
SGLang's `sglang:eplb_balancedness` summary and vLLM's EPLB balancedness log lines, in the formats their sources
write (samples written here from those formats, not recorded runs), inverted through perf/ep_balance.py."""

from __future__ import annotations

import json
import math

import pytest

from autotune.catalog import load_model, load_preset
from autotune.engines import ENGINE_VERSIONS, build_launch, validate_argv
from autotune.measure import expert_load
from autotune.perf import ep_balance
from autotune.specs import PhasePlan, Plan

DSV3 = load_model("deepseek-v3")
H200 = load_preset("h200-x8")
EIGHT = tuple(range(8))
LABELS = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'


def _sglang_metrics(decode_sum: float, decode_count: float, extend_sum: float, extend_count: float) -> str:
    """/metrics text with prometheus_client's rendering of a labelled Summary (observability/metrics_collector.py
    :1026-1030): _count, _sum and _created per label set."""
    lines = ["# HELP sglang:eplb_balancedness Balancedness of MoE in expert parallelism.",
             "# TYPE sglang:eplb_balancedness summary"]  # fmt: skip
    for mode, s, c in (("decode", decode_sum, decode_count), ("extend", extend_sum, extend_count)):
        lines += [
            f'sglang:eplb_balancedness_count{{{LABELS},forward_mode="{mode}"}} {c}',
            f'sglang:eplb_balancedness_sum{{{LABELS},forward_mode="{mode}"}} {s}',
            f'sglang:eplb_balancedness_created{{{LABELS},forward_mode="{mode}"}} 1.7e9',
        ]
    lines.append('sglang:num_running_reqs{model_name="m"} 64.0')
    return "\n".join(lines) + "\n"


def _vllm_line(step: int, avg: float, top: int, left: int) -> str:
    """One line as eplb_state.py:726-736 logs it (logger.info with its format string)."""
    b = avg / top if top > 0 else 0.0
    return (
        f"(EngineCore_DP0 pid=123) INFO 12-05 15:00:00 [eplb_state.py:726] EPLB step: {step} for model "
        f"DeepseekV3ForCausalLM: avg_tokens={avg:.2f}, max_tokens={top}, balancedness={b:.4f}, "
        f"steps until the next rearrangement: {left}"
    )


def test_sglang_decode_passes_between_two_reads_give_the_max_over_mean():
    before = _sglang_metrics(10.0, 12.0, 5.0, 6.0)
    after = _sglang_metrics(10.0 + 0.8 * 100, 112.0, 50.0, 60.0)  # 100 decode passes at balancedness 0.8
    assert expert_load.balancedness_summary(after) == (90.0, 112.0)
    assert expert_load.sglang_max_over_mean(before, after) == pytest.approx(1.25)
    assert expert_load.sglang_max_over_mean(before, before) is None
    assert expert_load.sglang_max_over_mean("", "") is None


def test_sglang_cv_inverts_the_models_busiest_rank():
    """A balancedness the model would predict at CV 1.3 (EP8, 256 experts, top-8, 64 tokens a pass) reads 1.3."""
    ratio = ep_balance.busiest_rank_load(8, 256, 8, 64, False, 1.3)
    before, after = _sglang_metrics(0, 0, 0, 0), _sglang_metrics(100 / ratio, 100, 0, 0)
    assert expert_load.sglang_cv(before, after, DSV3, 8, 64) == pytest.approx(1.3, rel=1e-3)
    # the sampling spread of a small pass is taken off: the same ratio at fewer tokens is a smaller CV
    assert expert_load.sglang_cv(before, after, DSV3, 8, 8) < 1.2


def test_vllm_lines_before_the_first_rearrangement_only():
    layers = sum(layer.ffn.kind == "moe" for layer in DSV3.layers)
    rows = 512.0  # routed rows per rank and layer
    ratio = ep_balance.busiest_rank_load(8, 256, 8, rows * 8 / 8, False, 0.9)
    avg = rows * layers
    log = "\n".join(
        [
            "INFO some other line avg_tokens=1",
            _vllm_line(0, 0.0, 0, 3000),  # a dummy step: no load
            _vllm_line(1, avg, int(round(avg * ratio)), 2999),
            _vllm_line(2, avg, int(round(avg * ratio)), 2998),
            _vllm_line(0, avg, int(round(avg * 1.01)), 3000),  # after the rearrangement: EPLB's residual
        ]
    )
    steps = expert_load.vllm_steps(log)
    assert len(steps) == 2
    assert expert_load.vllm_cv(log, DSV3, 8) == pytest.approx(0.9, rel=0.01)
    assert expert_load.vllm_cv("no eplb lines", DSV3, 8) is None


def test_an_even_load_reads_the_smallest_cv_not_the_default():
    assert ep_balance.expert_cv_from_load(8, 256, 1.0, 100) == 0.0
    before, after = _sglang_metrics(0, 0, 0, 0), _sglang_metrics(100, 100, 0, 0)
    assert expert_load.sglang_cv(before, after, DSV3, 8, 64) == expert_load.MIN_MEASURED_CV


@pytest.mark.parametrize("cv", [0.2, 0.65, 2.2])
@pytest.mark.parametrize(("ep", "experts", "rows", "eplb"), [(8, 256, 64, False), (32, 256, 1024, False),
                                                           (16, 384, math.inf, True)])  # fmt: skip
def test_the_inverse_round_trips(cv, ep, experts, rows, eplb):
    ratio = ep_balance.busiest_rank_load(ep, experts, 8, rows * ep / 8, eplb, cv)
    assert ep_balance.expert_cv_from_load(ep, experts, ratio, rows, eplb) == pytest.approx(cv, rel=1e-6)


def _plan(engine: str, eplb: bool, ep: int = 8) -> Plan:
    return Plan(engine, "aggregated", {"both": PhasePlan(gpus=EIGHT, tp=8, ep=ep, eplb=eplb)})


@pytest.mark.parametrize(("engine", "eplb", "added"), [
    ("sglang", False, ("--expert-distribution-recorder-mode", "--expert-balancedness-report-mode")),
    ("sglang", True, ("--expert-distribution-recorder-mode", "--expert-balancedness-report-mode")),
    ("vllm", True, ("--eplb-config",)),
])  # fmt: skip
def test_the_recorder_flags_pass_the_engines_parser(engine, eplb, added):
    plan = _plan(engine, eplb)
    launch = build_launch(plan, DSV3, H200)
    measured = expert_load.with_recorder(launch, plan)
    for before, after in zip(launch.processes, measured.processes, strict=True):
        validate_argv(engine, ENGINE_VERSIONS[engine], after.argv)
        assert after.argv[: len(before.argv)] == before.argv
        assert all(flag in after.argv for flag in added), after.argv
        assert after.argv.count("--enable-metrics") == 1 or engine == "vllm"
    if engine == "vllm":
        config = json.loads(measured.processes[0].argv[measured.processes[0].argv.index("--eplb-config") + 1])
        assert config == {"log_balancedness": True}


@pytest.mark.parametrize(("engine", "ep"), [("vllm", 8), ("sglang", 1), ("vllm", 1)])
def test_nothing_is_added_where_nothing_can_be_read(engine, ep):
    """vLLM without EPLB (switching it on would change what is benched) and any EP = 1 plan launch as they are."""
    plan = _plan(engine, False, ep)
    launch = build_launch(plan, DSV3, H200)
    assert expert_load.with_recorder(launch, plan) == launch


def test_a_rows_measured_cv_is_the_benched_workloads():
    """The fit corrects op times at the expert skew the engine reported, as it does at the measured acceptance."""
    from autotune.measure.judge import benched_of
    from autotune.specs import Workload

    searched = Workload(isl=1024, osl=256, concurrency=32)
    assert benched_of(searched, {"measured_expert_load_cv": "1.4"}).expert_load_cv == 1.4
    assert benched_of(searched, {"measured_expert_load_cv": ""}).expert_load_cv == 0.0


def test_the_rows_mean_cv_is_what_the_reranking_predicts_at():
    from autotune.measure.judge import measured_expert_cv, with_measured
    from autotune.specs import Workload

    rows = [{"measured_expert_load_cv": "1.0"}, {"measured_expert_load_cv": ""}, {"measured_expert_load_cv": "2.0"}]
    assert measured_expert_cv(rows) == 1.5
    assert measured_expert_cv([{}]) == 0.0
    plan, w = _plan("sglang", False), Workload(isl=1024, osl=256)
    assert with_measured(w, plan, {}, 1.5).expert_load_cv == 1.5
    assert with_measured(w, plan, {}) == w


@pytest.mark.parametrize(("engine", "eplb"), [("sglang", False), ("vllm", True), ("vllm", False)])
def test_the_measured_row_carries_the_engines_cv(engine, eplb, tmp_path):
    """measure_plan's step after the bench (run._expert_load): SGLang from the /metrics texts read around the
    bench, vLLM from the engine log; a vLLM plan without EPLB records none and says why."""
    from autotune.measure import run
    from autotune.measure.records import Candidate

    cand = Candidate("p", _plan(engine, eplb), 0)
    ratio = ep_balance.busiest_rank_load(8, 256, 8, 64, False, 1.1)
    texts = (_sglang_metrics(0, 0, 0, 0), _sglang_metrics(100 / ratio, 100, 0, 0))
    layers = sum(layer.ffn.kind == "moe" for layer in DSV3.layers)
    log_file = tmp_path / "engine.log"
    log_file.write_text(_vllm_line(1, 64 * layers, int(round(64 * layers * ratio)), 2999) + "\n")
    said: list[str] = []
    row = run._expert_load(cand, DSV3, texts, log_file, 64.0, "[1] p", said.append)
    if engine == "vllm" and not eplb:
        assert row == {} and "not measured" in said[0]
        return
    assert row["measured_expert_load_cv"] == pytest.approx(1.1, rel=0.02)
    assert "expert popularity CV" in said[0]
