"""Probed collective curves in the model (perf/comm.py): every collective `probe --bench` measures, and a curve
taken under an NCCL setting answering for that setting."""

import dataclasses

import pytest

from autotune.catalog.presets import load_preset
from autotune.perf import comm, rates
from autotune.specs import Comm, Measured
from autotune.specs.hardware import CollectivePoint

SIZES = (1 << 20, 16 << 20)


def _curve(us_small, us_large, factor):
    return tuple(
        CollectivePoint(b, round(b / (us * 1e-6) / 1e9 * factor, 6), us)
        for b, us in zip(SIZES, (us_small, us_large), strict=True)
    )


@pytest.fixture
def hw():
    base = load_preset("rtx-4090-x8")
    curves = {
        "all_reduce/2": _curve(400.0, 2000.0, 1.0),
        "all_reduce/2 NCCL_PROTO=LL": _curve(300.0, 5000.0, 1.0),
        "all_gather/2": _curve(250.0, 1200.0, 0.5),
        "all_to_all/2": _curve(260.0, 1300.0, 0.5),
    }
    return dataclasses.replace(base, measured=Measured(collectives=curves))


def test_all_gather_and_all_to_all_read_their_probed_curves(hw):
    env = comm.nccl_env(None)
    assert comm.nccl_cost_fn(hw, "allgather", (0, 1), env)(16 << 20) == pytest.approx(1200e-6)
    assert comm.nccl_cost_fn(hw, "dcp_allgather", (0, 1), env)(1 << 20) == pytest.approx(250e-6)
    assert comm.nccl_cost_fn(hw, "all2all", (0, 1), env)(1 << 20) == pytest.approx(260e-6)
    # beyond the largest point: its bus bandwidth with the (p-1)/p factor of an all-gather
    last = hw.measured.collectives["all_gather/2"][-1]
    extra = 16 << 20
    expected = 1200e-6 + extra * 0.5 / (last.busbw_gbs * 1e9)
    assert comm.nccl_cost_fn(hw, "allgather", (0, 1), env)(32 << 20) == pytest.approx(expected)


def test_a_collective_without_a_curve_keeps_the_model(hw):
    env = comm.nccl_env(None)
    plain = dataclasses.replace(hw, measured=None)
    rs = comm.nccl_cost_fn(hw, "reducescatter", (0, 1), env)(1 << 20)
    assert rs == comm.nccl_cost_fn(plain, "reducescatter", (0, 1), env)(1 << 20)
    other_group = comm.nccl_cost_fn(hw, "allgather", (2, 3), env)(1 << 20)  # curves are for the first p GPUs
    assert other_group == comm.nccl_cost_fn(plain, "allgather", (2, 3), env)(1 << 20)


def test_a_curve_under_a_setting_answers_for_that_setting(hw):
    ll = Comm(allreduce="nccl", nccl={"NCCL_PROTO": "LL"})
    fn = comm.all_reduce_fn(hw, (0, 1), ll, 0.0)
    assert fn(16 << 20) == ("nccl", pytest.approx(5000e-6))
    assert comm.all_reduce(hw, (0, 1), 16 << 20, ll)[1] == pytest.approx(5000e-6)
    assert comm.all_reduce_fn(hw, (0, 1), "nccl", 0.0)(16 << 20)[1] == pytest.approx(2000e-6)  # defaults curve


def test_a_setting_without_its_curve_scales_the_defaults_curve(hw):
    simple = Comm(allreduce="nccl", nccl={"NCCL_PROTO": "Simple"})
    plain = dataclasses.replace(hw, measured=None)
    got = comm.all_reduce_fn(hw, (0, 1), simple, 0.0)(16 << 20)[1]
    model_ratio = (
        comm.all_reduce(plain, (0, 1), 16 << 20, simple)[1] / comm.all_reduce(plain, (0, 1), 16 << 20, "nccl")[1]
    )
    assert got == pytest.approx(2000e-6 * model_ratio)


def test_collective_provenance_names_probe_only_where_that_collective_was_measured(hw):
    assert rates.collective_provenance(hw, "allgather") == "probe"
    assert rates.collective_provenance(hw, "allreduce") == "probe"
    assert rates.collective_provenance(hw, "reducescatter") != "probe"
    assert rates.collective_provenance(hw, "pp_send") != "probe"


def test_pcie_ipc_harness_builds_tunes_and_times_the_workspace(monkeypatch):
    from pathlib import Path

    from autotune.probe import bench_comm

    # FlashInfer's PcieIpcAllReduceWorkspace stand-in (fixtures/fake_flashinfer); spawned processes get sys.path
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures/fake_flashinfer"))
    notes = []
    job = bench_comm.CommJob(2, "gloo", (), (bench_comm.PCIE_IPC,), (2,), (8192, 65536))
    curves = bench_comm.run(job, notes)
    (pt,) = curves["pcie_ipc_all_reduce/2"]  # 65536 B = 8 x 4096 elements: more than the stand-in takes
    assert pt.message_bytes == 8192 and pt.latency_us > 0
    assert pt.busbw_gbs == pytest.approx(8192 / (pt.latency_us * 1e-6) / 1e9, rel=2e-3)  # x 2(p-1)/p = 1 at p=2
    assert notes == ["PCIe-IPC all-reduce on 2 GPUs: its kernels do not take 65536 B (8x4096)"]


def test_pcie_ipc_jobs_only_where_the_library_is():
    from autotune.probe import bench_comm

    assert [j.collectives for j in bench_comm.jobs(8, quick=True)] == [bench_comm.COLLECTIVES]
    jobs = bench_comm.jobs(8, quick=True, pcie_ipc=True)
    assert jobs[1].collectives == (bench_comm.PCIE_IPC,) and jobs[1].groups == (2, 4, 8)
    assert jobs[1].sizes[0] == 8192 and jobs[1].sizes[-1] == 8 << 20


def test_a_probed_pcie_ipc_curve_replaces_the_link_model():
    base = load_preset("rtx-pro-6000-x8")  # P2P between all pairs: PCIe-IPC applies to (0, 1)
    hw = dataclasses.replace(base, measured=Measured(collectives={"pcie_ipc_all_reduce/2": _curve(9.0, 80.0, 1.0)}))
    ipc = Comm(allreduce="pcie_ipc")
    assert comm.all_reduce_fn(hw, (0, 1), ipc, 32 << 20)(16 << 20) == ("pcie_ipc", pytest.approx(80e-6))
    assert comm.all_reduce(hw, (0, 1), 1 << 20, ipc, 32 << 20) == ("pcie_ipc", pytest.approx(9e-6))
    plain = dataclasses.replace(base, measured=None)
    assert comm.all_reduce(plain, (0, 1), 1 << 20, ipc, 32 << 20)[1] != pytest.approx(9e-6)  # the model otherwise
    assert rates.collective_provenance(hw, "allreduce") == "probe"
