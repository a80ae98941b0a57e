"""What the search asks `probe --bench` to measure: the NCCL settings its space can choose on this box. The probe
is handed them by its caller (the CLI), so that the probe does not read the search's space itself."""

from __future__ import annotations

from autotune.search.space import load_space
from autotune.specs import HardwareProfile


def nccl_settings(hw: HardwareProfile) -> list[dict[str, str]]:
    """Each non-default NCCL_* choice of the default search space that applies to this box, one at a time."""
    out = []
    for dim in load_space().dimensions:
        if not dim.field.startswith("comm.nccl."):
            continue
        wanted = dim.requires.get("interconnect")
        if wanted and hw.interconnect not in wanted:
            continue
        out += [{dim.field.rsplit(".", 1)[1]: str(v)} for v in dim.choices if v is not None]
    return out
