"""The bit-identical speed-ups of the evaluation round spd24 (tests/bench/bench_predict.py): each keeps the exact
floats (and memo keys) of the form it replaced, checked here against that form written out, or the sharing it
adds (which the form before did not have)."""

from __future__ import annotations

import dataclasses
import random

from autotune.catalog import load_preset
from autotune.catalog.models import load_model
from autotune.perf import comm, costing, halves, opcore
from autotune.perf.opcore import StepInput
from autotune.perf.oplist import attention_ops
from autotune.specs import Measured, PhasePlan
from autotune.specs.hardware import CollectivePoint
from autotune.specs.plan import Comm

RTX = load_preset("rtx-pro-6000-x8")
V41 = load_model("deepseek-v4.1-flash")


def _ctx(tp: int = 4):
    phase = PhasePlan(tp=tp, gpus=tuple(range(tp)))
    return opcore.context(V41, phase, "vllm", RTX, phase.gpus)


def test_op_terms_of_a_context_share_one_key_object_per_rates_key():
    """The op terms' keys are the Context's one object per rates-table key (costing._rate_terms), not a fresh slice
    of each op: fewer objects in the memos for the garbage collector (before, every term held its own tuple)."""
    c = _ctx()
    x = StepInput(decode_seqs=32.0, decode_ctx=3000.0, prefill_tokens=512.0, prefill_ctx=1500.0)
    ops = attention_ops(c, V41.layers[0].attention, x) + attention_ops(c, V41.layers[-1].attention, x)
    ops.append(opcore._collective("allreduce", c.stage, 4096.0, "tp"))
    ops.append(opcore._collective("allreduce", c.stage, 8192.0, "tp"))
    terms = costing._op_terms(c, ops)
    by_key: dict = {}
    for op, term in zip(ops, terms, strict=True):
        assert term[0] == op[:3]
        assert by_key.setdefault(op[:3], term[0]) is term[0]
    assert len(by_key) < len(ops)  # some key repeats, and its terms share the object
    head = costing.collective_term(c, opcore._collective("allreduce", c.stage, 4096.0, "tp"))
    assert head[0] is by_key[("collective", "", "allreduce")]


def _time_s_before(p: comm._NcclProfile, bytes_per_edge: float) -> float:
    """_NcclProfile.time_s as it was written before its protocols were zipped once."""
    for below, k in p.tuner_picks:
        if bytes_per_edge < below:
            return p.latency_s[k] + bytes_per_edge * p.s_per_edge_byte[k]
    best = None
    for lat, spb in zip(p.latency_s, p.s_per_edge_byte, strict=True):
        t = lat + bytes_per_edge * spb
        if best is None or t < best:
            best = t
    return best


def test_nccl_profile_time_is_the_form_before_bit_for_bit():
    rng = random.Random(24)
    picks = ((1e5, 0), (1e7, 2))
    for _ in range(500):
        lat = tuple(rng.uniform(1e-6, 4e-5) for _ in range(3))
        spb = tuple(rng.uniform(1e-12, 1e-9) for _ in range(3))
        for p in (comm._NcclProfile(lat, spb), comm._NcclProfile(lat, spb, picks)):
            nbytes = rng.choice((rng.uniform(0.0, 2e5), rng.uniform(2e5, 5e8)))
            assert p.time_s(nbytes) == _time_s_before(p, nbytes)
    assert comm._NcclProfile((1.0,), (2.0,)) == comm._NcclProfile((1.0,), (2.0,))  # protocols: not compared


def test_all_reduce_fn_shares_its_setup_across_ipc_limits_and_costs_as_before():
    """all_reduce_fn's setup (paths, curves, ring profiles) is resolved once for plans that differ only in the
    PCIe-IPC size limit; each function still applies its own limit."""
    comm._all_reduce_setup.cache_clear()
    group = (0, 1, 2, 3)
    for algorithm in ("custom", "pcie_ipc", "nccl"):
        setting = Comm(allreduce=algorithm)
        small, large = comm.all_reduce_fn(RTX, group, setting, 1e5), comm.all_reduce_fn(RTX, group, setting, 1e8)
        for nbytes in (1e3, 5e4, 4e5, 3e6, 5e7):
            assert small(nbytes) == comm.all_reduce(RTX, group, nbytes, setting, 1e5)
            assert large(nbytes) == comm.all_reduce(RTX, group, nbytes, setting, 1e8)
    info = comm._all_reduce_setup.cache_info()
    assert info.misses == 3 and info.hits == 3


def _plain_before(value, leave_out=()):
    """halves.plain as it was written before plain fields were appended without a call."""
    if type(value) in (int, float, str, bool, type(None), tuple):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)]
        return (type(value).__name__, *[_plain_before(getattr(value, n)) for n in names if n not in leave_out])
    if isinstance(value, dict):
        return tuple(sorted((k, _plain_before(v)) for k, v in value.items()))
    return value


def test_plain_is_the_recursive_form_before():
    phase = PhasePlan(
        tp=2, dp=2, ep=4, dp_attention=True, gpus=(0, 1, 2, 3), fusion={"allreduce_rmsnorm": True}, platform={"a": "1"}
    )
    for leave_out in ((), ("gpus", "replicas", "batching")):
        assert halves.plain(phase, leave_out) == _plain_before(phase, leave_out)
    assert halves.step_input(StepInput(1.0, 2.0)) == (1.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0)  # rank tokens, prompts
    assert type(halves.step_input(StepInput(1.0, 2.0))) is tuple


def test_probed_curves_are_remembered_sorted_and_still_each_box_s_own():
    points = (CollectivePoint(16 << 20, 20.0, 1200.0), CollectivePoint(1 << 20, 5.0, 250.0))
    hw = dataclasses.replace(load_preset("rtx-4090-x8"), measured=Measured(collectives={"all_gather/2": points}))
    env = comm.nccl_env(None)
    first = comm.probed_curve(hw, "all_gather", (0, 1), env)
    assert comm.probed_curve(hw, "all_gather", (0, 1), env) is first  # remembered, not sorted again
    assert first == (tuple(sorted(points, key=lambda pt: pt.message_bytes)), (1 << 20, 16 << 20), True)
    other = dataclasses.replace(hw, measured=Measured(collectives={"all_gather/2": points[:1]}))
    assert comm.probed_curve(other, "all_gather", (0, 1), env)[1] == (16 << 20,)
    assert comm.probed_curve(hw, "all_gather", (1, 2), env) == ((), (), False)  # measured on the first GPUs only
