"""Choosing a keyed state backend by name (`sluice run --state-backend`), and the layout of window
contents that goes with it.

Apart from `sluice.state.keyed`, which the backends implement: the interface must not import them.
"""

from __future__ import annotations

from sluice.state.keyed import BACKENDS, KeyedStateBackend
from sluice.state.keyed_windows import KeyedWindowLayout, KeyedWindows
from sluice.state.windows import AccumulatorLayout, WindowAccumulators


def create_backend(kind: str, max_parallelism: int, owner: str) -> KeyedStateBackend:
    """A new, empty backend of `kind` for one keyed operator subtask; `owner` names it in its files."""
    if kind == "heap":
        from sluice.state.heap import HeapKeyedStateBackend

        return HeapKeyedStateBackend(max_parallelism)
    if kind == "disk":
        # Imported only when chosen: it needs lmdb.
        from sluice.state.disk import DiskKeyedStateBackend

        return DiskKeyedStateBackend(max_parallelism, owner)
    raise ValueError(f"unknown state backend {kind!r}: use one of {', '.join(BACKENDS)}")


def create_window_accumulators(kind: str, owner: str) -> AccumulatorLayout:
    """The accumulators of a tumbling or sliding window operator on backend `kind`."""
    if kind == "disk":
        from sluice.state.disk_windows import DiskWindowAccumulators

        return DiskWindowAccumulators(owner)
    return WindowAccumulators()


def create_keyed_windows(kind: str, owner: str) -> KeyedWindowLayout:
    """The windows of a session, late-firing or process window operator on backend `kind`."""
    if kind == "disk":
        from sluice.state.disk_windows import DiskKeyedWindows

        return DiskKeyedWindows(owner)
    return KeyedWindows()
