"""Bounded memos the performance model keeps across plans (perf/ops.py). A memo maps a key built from exactly what
the memoised function reads to its result; it is cleared when full, and by `cache_clear` (the name lru_cache
uses, so tests/bench/calibration_check.py clears it with the perf caches after patching a constant)."""

from __future__ import annotations


class BoundedMemo(dict):
    """A dict cleared whenever it reaches `max_entries` before an insert: results never change, only recompute."""

    def __init__(self, max_entries: int) -> None:
        super().__init__()
        self.max_entries = max_entries

    def put(self, key, value):
        if len(self) >= self.max_entries:
            self.clear()
        self[key] = value
        return value

    def cache_clear(self) -> None:
        self.clear()
