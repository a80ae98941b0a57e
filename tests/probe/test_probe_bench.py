"""`probe --bench`: the measuring harness run for real on CPU tensors (tiny shapes; collectives over 2 gloo
processes), its figures in `Measured`, in the rates table and in `estimate`'s provenance."""

import dataclasses
import json
import os

import pytest

from autotune.catalog.presets import load_preset
from autotune.cli import run
from autotune.perf import rates
from autotune.probe import bench, bench_comm, bench_ops, probe
from autotune.search.bench_settings import nccl_settings
from autotune.specs import Measured, load, save
from autotune.specs.hardware import CollectivePoint, HardwareProfile, OpPoint

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cpu_measured(tmp_path_factory):
    """One run of the CPU plan on the ESC8000A recorded tree (module-scoped: it spawns 2 processes)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("sysfs_tree_b", Path(__file__).parent / "fixtures/sysfs_tree.py")
    tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tree)
    sys_root, proc_root = tree.build("esc8000a_rtx_pro_6000", tmp_path_factory.mktemp("box"))
    result = probe(str(sys_root), str(proc_root), use_nvml=False)
    return bench.calibrate(result, device="cpu")


def test_cpu_harness_fills_every_part_of_measured(cpu_measured):
    m = cpu_measured.profile.measured
    buckets = {(p.op_class, p.bucket) for p in m.ops}
    for bucket in bench.FULL_BUCKETS:
        assert ("gemm", bucket) in buckets and ("grouped_moe", bucket) in buckets
    assert {("attention", "decode"), ("attention", "prefill"), ("gemm", "launch")} <= buckets
    assert all(p.time_us > 0 and p.tflops > 0 and p.gbs > 0 for p in m.ops)
    assert m.gemm_tflops["bf16"] > 0 and m.mem_bw_gbs > 0
    assert set(m.collectives) == {f"{name}/2" for name in bench_comm.COLLECTIVES}
    for curve in m.collectives.values():
        assert [pt.message_bytes for pt in curve] == [1024, 65536]
        assert all(pt.latency_us > 0 and pt.busbw_gbs > 0 for pt in curve)
    assert m.versions["torch"] == torch.__version__ and set(m.versions) == {"torch", "cuda", "nccl", "driver"}
    assert any("PCIe-IPC all-reduce" in note for note in m.notes)
    assert "on the CPU" in cpu_measured.profile.sources[-1]


def test_points_are_flops_and_bytes_over_the_time(cpu_measured):
    gemm = next(p for p in cpu_measured.profile.measured.ops if p.op_class == "gemm" and p.bucket == "m<=128")
    m, n, k = 128, 96, 64  # bench.cpu_plan's shape at the top of the m<=128 bucket
    assert gemm.shape.startswith(f"m={m} n={n} k={k}")
    assert gemm.tflops == pytest.approx(2 * m * n * k / (gemm.time_us * 1e-6) / 1e12, rel=2e-3)
    assert gemm.gbs == pytest.approx(((m * k + n * k) * 2 + m * n * 2) / (gemm.time_us * 1e-6) / 1e9, rel=2e-3)


def test_measured_survives_the_profile_file(cpu_measured, tmp_path):
    path = save(cpu_measured.profile, tmp_path / "hw.yaml")
    back = load(HardwareProfile, path, "hardware")
    assert back.measured == cpu_measured.profile.measured and back.fingerprint == cpu_measured.profile.fingerprint


def test_probed_figures_land_in_the_rates_table(cpu_measured):
    hw = cpu_measured.profile
    table = rates.build(hw)
    probed = rates.probed_points(hw)
    for bucket in bench.FULL_BUCKETS:
        entry = table.get("gemm", "bf16", bucket)
        assert entry.tflops == probed[("gemm", "bf16", bucket)][0] and entry.provenance.startswith("probe")
        assert table.get("grouped_moe", "bf16", bucket).provenance == "probe"
    floor = next(p.time_us for p in hw.measured.ops if p.bucket == "launch")
    assert table.get("gemm", "bf16", "m<=16").min_us == floor
    assert table.get("attention", "bf16", "decode").gbs == probed[("attention", "bf16", "decode")][1]
    assert rates.collective_provenance(hw) == "probe"


def _profile_with(points, **measured):
    hw = load_preset("rtx-pro-6000-x8")
    return dataclasses.replace(hw, measured=Measured(ops=tuple(points), **measured))


def _pt(op_class, dtype, bucket, tflops, gbs=100.0, us=50.0):
    return OpPoint(op_class, dtype, bucket, "test", us, tflops, gbs)


def test_a_probed_bucket_replaces_only_its_prior():
    prior = rates.build(load_preset("rtx-pro-6000-x8"))
    hw = _profile_with([_pt("gemm", "bf16", "m<=128", 100.0), _pt("gemm", "bf16", "m<=128", 140.0, gbs=1500.0)])
    table = rates.build(hw)
    probed = table.get("gemm", "bf16", "m<=128")
    assert probed.tflops == 120.0 and probed.provenance.startswith("probe")  # the median of the bucket's points
    assert probed.gbs == 1500.0  # the class's bandwidth ceiling: its best streaming point
    assert table.get("gemm", "bf16", "m>1024") == prior.get("gemm", "bf16", "m>1024")  # not probed: the prior
    assert "probe" not in table.get("gemm", "bf16", "m>1024").provenance


def test_fp8_grouped_moe_scales_the_probed_fp8_gemm_by_the_probed_bf16_grouped_ratio():
    hw = _profile_with(
        [
            _pt("gemm", "bf16", "m>1024", 200.0),
            _pt("grouped_moe", "bf16", "m>1024", 150.0),
            _pt("gemm", "fp8", "m>1024", 400.0),
        ]
    )
    entry = rates.build(hw).get("grouped_moe", "fp8", "m>1024")
    assert entry.tflops == pytest.approx(300.0) and entry.provenance == "probe"


def test_points_with_zero_rates_are_ignored():
    hw = _profile_with([_pt("gemm", "bf16", "m<=16", 0.0)])
    assert "probe" not in rates.build(hw).get("gemm", "bf16", "m<=16").provenance


def test_cli_bench_on_cpu_then_estimate_shows_probe_provenance(box_tree, tmp_path, capsys):
    sys_root, proc_root = box_tree("esc8000a_rtx_pro_6000")
    hw_path = tmp_path / "hw.yaml"
    argv = ["probe", "--sysfs-root", str(sys_root), "--proc-root", str(proc_root), "--bench", "--bench-device", "cpu"]
    assert run([*argv, "--out", str(hw_path)]) == 0
    out = capsys.readouterr().out
    assert "measured (probe --bench): torch " in out and "all_reduce/2:" in out and "gemm bf16: m<=16" in out
    plan = tmp_path / "tp2.yaml"
    plan.write_text(
        "schema: mi-tune/plan/v1\nengine: sglang\nmode: aggregated\nphases:\n  both: {gpus: [0, 1], tp: 2}\n"
    )
    est = ["estimate", str(plan), "--model", "llama-3.1-70b", "--hardware", str(hw_path), "--json"]
    assert run([*est, "--isl", "512", "--osl", "64", "--concurrency", "4"]) == 0
    prediction = json.loads(capsys.readouterr().out)
    gemm = {k: v for k, v in prediction["rates"].items() if k.startswith("gemm/bf16/")}
    assert gemm and all(v.startswith("probe") for v in gemm.values())


def test_bench_without_a_cuda_device_is_one_line_exit_2(box_tree, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")  # the user's choice stays (else PCI_BUS_ID, as NVML)
    sys_root, proc_root = box_tree("genoa_rtx4090_direct")
    assert run(["probe", "--sysfs-root", str(sys_root), "--proc-root", str(proc_root), "--bench", "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "mi-tune: error: probe --bench needs a CUDA device; none found"
    assert os.environ["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"


def test_quick_without_bench_is_bad_input(capsys):
    assert run(["probe", "--quick"]) == 2
    assert capsys.readouterr().err.strip() == "mi-tune: error: --quick: applies to --bench only"


def test_comm_jobs_cover_sizes_groups_and_the_search_spaces_nccl_settings():
    hw = load_preset("rtx-pro-6000-x8")
    settings = nccl_settings(hw)
    assert {"NCCL_MIN_NCHANNELS": "8"} in settings and {"NCCL_P2P_LEVEL": "SYS"} in settings
    assert {"NCCL_PROTO": "LL"} in settings and {"NCCL_PROTO": "Simple"} in settings
    full = bench_comm.jobs(8, quick=False, settings=settings)
    assert full[0].env == () and full[0].collectives == bench_comm.COLLECTIVES and full[0].groups == (2, 4, 8)
    assert full[0].sizes[0] == 1024 and full[0].sizes[-1] == 256 << 20 and len(full[0].sizes) == 10
    assert [dict(j.env) for j in full[1:]] == settings and all(j.collectives == ("all_reduce",) for j in full[1:])
    quick = bench_comm.jobs(4, quick=True, settings=settings)
    assert len(quick) == 1 and quick[0].groups == (2, 4) and quick[0].sizes[-1] == 256 << 20
    assert bench_comm.jobs(1, quick=True) == []


def test_an_nccl_setting_runs_in_its_own_group_under_its_own_key(monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "Simple")  # the box's own setting must not leak into the children
    job = bench_comm.CommJob(2, "gloo", (("NCCL_MIN_NCHANNELS", "8"),), ("all_reduce",), (2,), (4096,))
    curves = bench_comm.run(job)
    assert list(curves) == ["all_reduce/2 NCCL_MIN_NCHANNELS=8"]
    (pt,) = curves["all_reduce/2 NCCL_MIN_NCHANNELS=8"]
    assert pt.message_bytes == 4096 and pt.busbw_gbs == pytest.approx(4096 / (pt.latency_us * 1e-6) / 1e9, rel=2e-3)


def test_serving_shapes_come_from_the_catalog():
    dense, experts = bench.serving_shapes(8, quick=False)
    shapes = {(s.n, s.k) for s in dense}
    assert (2 * 28672 // 8, 8192) in shapes and (8192, 28672 // 8) in shapes  # Llama-3.1-70B gate_up / down, TP 8
    assert (32, 2 * 2048, 7168) in {(e, s.n, s.k) for e, s in experts}  # DeepSeek-V3: 256 experts over EP 8
    quick_dense, quick_experts = bench.serving_shapes(8, quick=True)
    assert len(quick_dense) == 2 and len(quick_experts) == 1


def test_numa_cpus_reads_cpulists(tmp_path):
    for node, text in (("node0", "0-3,8-9\n"), ("node1", "4-7\n")):
        (tmp_path / "devices/system/node" / node).mkdir(parents=True)
        (tmp_path / "devices/system/node" / node / "cpulist").write_text(text)
    assert bench.numa_cpus(tmp_path) == {0: {0, 1, 2, 3, 8, 9}, 1: {4, 5, 6, 7}}


def test_a_dtype_the_device_cannot_run_is_skipped_with_a_note():
    notes = []
    timer = bench_ops.Timer(torch, "cpu", 2)
    shape = bench_ops.GemmShape(32, 32, "t")
    points = bench_ops.gemm_points(torch, timer, ("bf16", "nope"), (shape,), ("m<=16",), notes)
    assert {p.dtype for p in points} == {"bf16"} and notes == [
        "gemm nope skipped: ValueError: unknown GEMM dtype 'nope'"
    ]


def test_collective_point_contract_unchanged():
    assert [f.name for f in dataclasses.fields(CollectivePoint)] == ["message_bytes", "busbw_gbs", "latency_us"]


def test_int8_runs_the_rows_its_kernel_needs_and_counts_them():
    notes = []
    timer = bench_ops.Timer(torch, "cpu", 2)
    shape = bench_ops.GemmShape(32, 64, "t")
    (point,) = [
        p for p in bench_ops.gemm_points(torch, timer, ("int8",), (shape,), ("m<=16",), notes) if p.bucket != "launch"
    ]
    assert notes == [] and point.shape.startswith("m=17 n=32 k=64")  # torch._int_mm needs more than 16 rows
    assert point.tflops == pytest.approx(2 * 17 * 32 * 64 / (point.time_us * 1e-6) / 1e12, rel=2e-3)


def test_decode_attention_counts_the_stored_kv_once():
    notes = []
    timer = bench_ops.Timer(torch, "cpu", 2)
    spec = bench_ops.AttentionPoint("decode", "gqa", 2, 8, 2, 16, 16, 128)
    (point,) = bench_ops.attention_points(torch, timer, (spec,), notes)
    kv = 2 * 2 * 128 * (16 + 16) * 2  # batch x kv heads x ctx x (k + v width) x bf16
    io = 2 * 2 * 8 * 1 * (16 + 16)  # queries in and outputs out, one token per query head
    assert notes == [] and point.gbs == pytest.approx((kv + io) / (point.time_us * 1e-6) / 1e9, rel=2e-3)
    assert point.tflops == pytest.approx(2 * 2 * 8 * 32 * 128 / (point.time_us * 1e-6) / 1e12, rel=2e-3)


def test_a_pair_far_below_the_median_copy_is_flagged():
    p2p = ((0.0, 50.0, 48.0), (51.0, 0.0, 9.0), (49.0, 50.0, 0.0))
    assert bench.p2p_notes(p2p) == [
        "P2P copies far below the median pair (49.5 GB/s): GPU1->GPU2 9 GB/s; check ACS/IOMMU"
    ]
    assert bench.p2p_notes(((0.0, 50.0), (45.0, 0.0))) == [] and bench.p2p_notes(()) == []


class _FakeCuda:
    def __init__(self, cc):
        self.cc = cc

    def get_device_capability(self, index):
        return self.cc


@pytest.mark.parametrize(
    ("preset", "cc", "quick", "dtypes"),
    [
        ("h200-x8", (9, 0), False, ("bf16", "fp8", "int8")),
        ("h200-x8", (9, 0), True, ("bf16", "fp8")),  # --quick leaves int8 out
        ("rtx-pro-6000-x8", (12, 0), True, ("bf16", "fp8", "fp4")),
        ("rtx-4090-x8", (8, 9), True, ("bf16", "fp8")),
        ("rtx-4090-x8", (8, 6), True, ("bf16",)),  # an sm_86 card under a 4090 profile: no FP8 kernels
    ],
)
def test_plan_times_the_dtypes_the_gpu_supports(preset, cc, quick, dtypes):
    import types

    fake = types.SimpleNamespace(cuda=_FakeCuda(cc), _scaled_mm=object(), _int_mm=object(), float4_e2m1fn_x2=object())
    hw = load_preset(preset)
    plan = bench.bench_plan(hw, fake, 8, quick, nccl_settings(hw))
    assert plan.dtypes == dtypes and plan.label == ("quick" if quick else "full")
    assert plan.repeats == (5 if quick else 20) and len(plan.comm_jobs) == 1 + (0 if quick else len(nccl_settings(hw)))


def test_nvlink_boxes_get_only_the_settings_the_space_offers_them():
    assert nccl_settings(load_preset("h200-x8")) == [{"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "Simple"}]
