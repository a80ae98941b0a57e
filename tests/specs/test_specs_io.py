import pytest
import yaml

from autotune.specs import (
    Accelerator,
    Batching,
    Features,
    HardwareProfile,
    HostInfo,
    PhasePlan,
    Plan,
    SpecError,
    Workload,
    dump_yaml,
    from_dict,
    load_plan,
    to_dict,
)


def _hw(n=2, links=None, p2p=True):
    features = Features(bf16=True, fp8=True, fp4=False, int8=True, collective_library="nccl")
    accs = tuple(
        Accelerator(i, "nvidia", "L40S", f"0000:{i + 1:02x}:00.0", 48, 864, {"bf16": 362}, "sm_89", 0, 4, 16, features)
        for i in range(n)
    )
    links = links or tuple(tuple("X" if i == j else "PIX" for j in range(n)) for i in range(n))
    return HardwareProfile(
        "t", "file", HostInfo("cpu", 1, 32, 1, 256), accs, links, tuple(tuple(p2p for _ in range(n)) for _ in range(n))
    )


def test_hardware_round_trip_is_identical_and_derives_interconnect():
    hw = _hw()
    text = dump_yaml(hw)
    again = from_dict(HardwareProfile, yaml.safe_load(text), "hw.yaml")
    assert dump_yaml(again) == text
    assert again.interconnect == "pcie"
    assert again.fingerprint == hw.fingerprint
    assert text.startswith("schema: mi-tune/hardware/v1")


def test_fingerprint_changes_with_topology_but_not_name():
    a = _hw()
    b = _hw(links=(("X", "SYS"), ("SYS", "X")))
    assert a.fingerprint != b.fingerprint
    renamed = from_dict(HardwareProfile, {**to_dict(a), "name": "other"}, "x")
    assert renamed.fingerprint == a.fingerprint


def test_nvlink_labels_make_nvlink_interconnect():
    assert _hw(links=(("X", "NV18"), ("NV18", "X"))).interconnect == "nvlink"


def test_bad_link_label_is_rejected_naming_the_file():
    with pytest.raises(SpecError, match=r"hw.yaml: .*unknown label 'PCIE'"):
        from_dict(HardwareProfile, {**to_dict(_hw()), "links": [["X", "PCIE"], ["PCIE", "X"]]}, "hw.yaml")


def test_plan_validation_names_the_field():
    with pytest.raises(SpecError, match=r"plan.yaml: phases.both.tp: expected an integer"):
        from_dict(
            Plan, {"engine": "vllm", "mode": "aggregated", "phases": {"both": {"gpus": [0], "tp": "x"}}}, "plan.yaml"
        )
    with pytest.raises(SpecError, match=r"replicas\*tp\*dp\*pp"):
        from_dict(
            Plan, {"engine": "vllm", "mode": "aggregated", "phases": {"both": {"gpus": [0, 1], "tp": 4}}}, "plan.yaml"
        )
    with pytest.raises(SpecError, match="unknown field 'tensor_parallel'"):
        from_dict(PhasePlan, {"gpus": [0], "tensor_parallel": 2}, "plan.yaml")


def test_plan_rejects_shared_gpus_and_wrong_phase_names():
    phase = PhasePlan(gpus=(0, 1), tp=2)
    with pytest.raises(ValueError, match="more than one phase"):
        Plan("sglang", "disaggregated", {"prefill": phase, "decode": phase})
    with pytest.raises(ValueError, match="phases prefill, decode"):
        Plan("sglang", "disaggregated", {"both": phase})


def test_load_plan_reports_malformed_yaml(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("engine: [vllm\n")
    with pytest.raises(SpecError, match=r"plan.yaml: malformed YAML"):
        load_plan(path)
    path.write_text("schema: mi-tune/hardware/v1\n")
    with pytest.raises(SpecError, match="schema: expected 'mi-tune/plan/v1'"):
        load_plan(path)


def test_workload_checks():
    with pytest.raises(ValueError, match="not both"):
        Workload(concurrency=4, rate_rps=1.0)
    assert Workload(ttft_ms=500).has_slo


def test_non_positive_batching_is_refused_naming_the_field(tmp_path):
    from autotune.specs import load_plan

    path = tmp_path / "plan.yaml"
    path.write_text(
        "schema: mi-tune/plan/v1\nengine: vllm\nmode: aggregated\nphases:\n"
        "  both: {gpus: [0], batching: {max_running: -16, chunked_prefill_tokens: 8192}}\n"
    )
    with pytest.raises(
        SpecError, match=r"phases\.both\.batching\.max_running: expected 1\.\.1,048,576 requests, got -16"
    ):
        load_plan(path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0", r"phases\.both\.batching\.cuda_graph_max_bs: expected 1\.\.1,048,576 requests \(null = the engine's"),
        ("many", r"phases\.both\.batching\.cuda_graph_max_bs: expected an integer, got .many."),
        ("true", r"phases\.both\.batching\.cuda_graph_max_bs"),
    ],
)
def test_a_bad_cuda_graph_max_bs_is_a_one_line_error(tmp_path, text, match):
    path = tmp_path / "plan.yaml"
    path.write_text(
        "schema: mi-tune/plan/v1\nengine: sglang\nmode: aggregated\nphases:\n"
        f"  both: {{gpus: [0], batching: {{max_running: 64, cuda_graph_max_bs: {text}}}}}\n"
    )
    with pytest.raises(SpecError, match=match) as err:
        load_plan(path)
    assert "\n" not in str(err.value)


def test_cuda_graph_max_bs_round_trips_and_defaults_to_null():
    plan = Plan(
        engine="vllm",
        mode="aggregated",
        phases={"both": PhasePlan(gpus=(0,), batching=Batching(max_running=64, cuda_graph_max_bs=48))},
    )
    data = to_dict(plan)
    assert data["phases"]["both"]["batching"]["cuda_graph_max_bs"] == 48
    assert from_dict(Plan, yaml.safe_load(dump_yaml(plan)), "best.yaml") == plan
    assert "graph-bs48" in plan.describe()
    del data["phases"]["both"]["batching"]["cuda_graph_max_bs"]  # a plan file from before the field
    assert from_dict(Plan, data, "plan.yaml").phases["both"].batching.cuda_graph_max_bs is None
