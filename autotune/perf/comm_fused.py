"""The fused all-reduce + residual add + RMSNorm as the engines run it (fusion.allreduce_rmsnorm): not the engine's
standalone all-reduce with the norm gone, but FlashInfer's fused kernel, a P2P all-reduce of its own (the engine
profile's `fused_allreduce_path`, capability/flashinfer_comm.py): the engines' P2P fixed time per exchange (one
one-shot, two two-shot), one- or two-shot wire by the kernel's own split, and the norm's work in its epilogue
(comm_rates.FUSED_NORM_EPILOGUE_BYTES_PER_BYTE). Where the kernel's two-shot runs the norm as a kernel of its own
(mnnvl), or the engine calls no fused kernel on the group, the cost function says so: the caller then prices the
norm kernel (perf/costing.py collective_s)."""

from __future__ import annotations

from collections.abc import Callable

from autotune.capability.profiles import profile
from autotune.perf import comm
from autotune.perf import comm_rates as cr
from autotune.perf.p2p_allreduce import path_terms, terms_s
from autotune.perf.topology import GB, _Holder, topology, transport
from autotune.specs import HardwareProfile

FusedCost = Callable[[float], tuple[str, float, bool]]


def fused_allreduce_norm_fn(hw: HardwareProfile, group: tuple[int, ...], comm_setting, ipc_max_bytes: float,
                            engine: str) -> FusedCost:  # fmt: skip
    """The fused all-reduce + RMSNorm on `group` as a function of the message bytes per rank: (the name it is
    reported under, seconds, whether the norm still runs as a kernel of its own). Resolved once per box, group and
    engine (the caller remembers it across Contexts: perf/costing.py _comm_fn)."""
    group = tuple(group)
    dispatch = profile(engine).fused_allreduce_path
    path = dispatch(hw.gpu.arch, len(group), transport(topology(hw), group)) if dispatch and len(group) > 1 else None
    if path is None:  # the engine's own all-reduce, the norm as its own kernel
        standalone = comm.all_reduce_fn(hw, group, comm_setting, ipc_max_bytes, engine)

        def unfused(nbytes: float) -> tuple[str, float, bool]:
            algo, seconds = standalone(nbytes)
            return algo, seconds, True

        return unfused
    terms = path_terms(_Holder(hw), group, path)
    one_shot_max, norm_kernel = terms.one_shot_max_bytes, path.two_shot_norm_kernel

    def fused(nbytes: float) -> tuple[str, float, bool]:
        if nbytes <= 0:
            return "none", 0.0, False
        seconds = terms_s(terms, nbytes)
        if nbytes > one_shot_max and norm_kernel:
            return terms.name, seconds, True
        return terms.name, _with_epilogue(hw, seconds, nbytes), False

    return fused


def _with_epilogue(hw: HardwareProfile, seconds: float, nbytes: float) -> float:
    """`seconds` of the all-reduce plus the norm's work inside the fused kernel for a message of `nbytes`: its fixed
    time and its memory traffic."""
    traffic_s = nbytes * (cr.FUSED_NORM_EPILOGUE_BYTES_PER_BYTE / (hw.gpu.mem_bw_gbs * GB))
    return seconds + cr.FUSED_NORM_EPILOGUE_US * 1e-6 + traffic_s


def fused_path_s(hw: HardwareProfile, group: tuple[int, ...], path, nbytes: float) -> float:
    """Seconds of one fused kernel `path` (an AllReducePath of capability/flashinfer_comm.py) on `group` for a
    message of `nbytes`, whatever the engine's dispatch would pick, its norm inside (a kernel benchmarked on its own:
    tests/bench/calibration_check.py)."""
    return _with_epilogue(hw, terms_s(path_terms(_Holder(hw), tuple(group), path), nbytes), nbytes)
