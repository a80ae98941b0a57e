"""Where a launch recorded in a file differs from the one rebuilt from its plan (serve runs only the rebuilt one)."""

from __future__ import annotations

import dataclasses

from autotune.specs.best import Launch

# ProcessSpec fields in the order they are checked: what runs first, then where it runs
PROCESS_FIELDS = ("argv", "env", "role", "gpus", "host", "port", "numa_node")


def first_difference(recorded: Launch, rebuilt: Launch) -> str | None:
    """The first field of `recorded` that differs from `rebuilt`, as a best.yaml path
    (`launch.processes[server-0].argv`), or None when they are equal."""
    if recorded == rebuilt:
        return None
    old = {p.name: p for p in recorded.processes}
    new = {p.name: p for p in rebuilt.processes}
    for name, proc in new.items():
        if name not in old:
            return f"launch.processes[{name}] (missing)"
        for field in PROCESS_FIELDS:
            if getattr(old[name], field) != getattr(proc, field):
                return f"launch.processes[{name}].{field}"
    for name in old:
        if name not in new:
            return f"launch.processes[{name}] (not in the rebuilt launch)"
    if [p.name for p in recorded.processes] != [p.name for p in rebuilt.processes]:
        return "launch.processes (order)"
    for field in dataclasses.fields(Launch):
        if getattr(recorded, field.name) != getattr(rebuilt, field.name):
            return f"launch.{field.name}"
    return "launch"
