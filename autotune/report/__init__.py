"""Report: tables (pandas), plots (matplotlib Agg), markdown and a self-contained HTML page.

The search writes its data files (rundata.py lists them) and the report is then built from those files alone,
the same way `mi-tune report RUN_DIR` rebuilds it: a moved or copied run directory gives the same report.

The package itself imports nothing: its names load on first use (PEP 562 `__getattr__`), so the modules that do
not need pandas or matplotlib (`console`, what the CLI prints; `worker`, the process that writes a search's
report) import without them."""

from __future__ import annotations

import importlib

_HOMES = {
    "build_report": "autotune.report.writer",
    "summary": "autotune.report.writer",
    "write_report": "autotune.report.writer",
    "write_search_report": "autotune.report.writer",
    "load_run": "autotune.report.rundata",
    "top_plans": "autotune.report.tables",
    "trials_frame": "autotune.report.tables",
}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'autotune.report' has no attribute '{name}'")
    return getattr(importlib.import_module(home), name)


__all__ = sorted(_HOMES)
