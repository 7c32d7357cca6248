"""The accumulators of event-time windows, snapshotted copy-on-write and incrementally.

A window operator keeps one dict per window, `key -> accumulator`, under the window's end. Pickling all
of it on the task's thread at every checkpoint stopped records for as long as that took (a tenth of a
Kafka job's time when a fast partition runs far ahead of a slow one and many windows are open), and
wrote windows that had not changed since the previous checkpoint. Instead the windows are snapshotted as
keyed state is (`sluice.state.snapshots`):

1. `begin_snapshot` (task thread, O(open windows)) freezes every window's dict and hands them out as
   the tables of one snapshot, a table per window named `window:<end>`. A window written since the
   previous snapshot lists all its keys as changed, one that was not lists none, so an incremental
   checkpoint writes only the windows that changed. A fired window that an earlier snapshot held lists
   its keys as changed with no entries: the delta removes it.
2. The snapshot is written from another thread. Meanwhile a write to a frozen window first replaces its
   dict by a copy (and copies accumulators that could change in place), so the writing thread reads
   dicts the task never changes again.
3. `release`, once the snapshot is written, thaws the windows when no other snapshot still holds them.

The files are keyed state files, so restoring at another parallelism takes each window's keys by key
group like any keyed state. This is the heap layout; `sluice.state.disk_windows` keeps the same tables
in the disk backend's store, and writes the same files.
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Iterator
from typing import Any, Protocol

from sluice.state.keyed import BackendSnapshot, FrozenTable

TABLE_PREFIX = "window:"
# Accumulators of these types cannot change in place: a copied window shares them with its snapshot.
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), tuple, frozenset, complex})


class WindowEntries(Protocol):
    """One window's accumulators by key, as the operator folds a batch into them."""

    def get(self, key: Any, default: Any = None, /) -> Any: ...
    def __setitem__(self, key: Any, value: Any, /) -> None: ...


class AccumulatorLayout(Protocol):
    """What the window operator needs of its accumulators, on the heap (`WindowAccumulators`) or on
    disk (`sluice.state.disk_windows.DiskWindowAccumulators`)."""

    def writable(self, end: int) -> WindowEntries: ...
    def flush(self) -> None: ...
    def fire_until(self, watermark: int) -> Iterator[tuple[int, dict[Any, Any]]]: ...
    def restore_frame(self, name: str, upserts: dict[Any, Any], removed: list[Any]) -> None: ...
    def restore_entries(self, end: int, entries: dict[Any, Any]) -> None: ...
    def finish_restore(self) -> None: ...
    def has_state(self) -> bool: ...
    def begin_snapshot(self) -> BackendSnapshot: ...
    def close(self) -> None: ...


class WindowAccumulators:
    """`windows[end][key] -> accumulator`, the heap of window ends, and their snapshots."""

    def __init__(self) -> None:
        self.windows: dict[int, dict[Any, Any]] = {}
        self._ends: list[int] = []
        self._frozen: set[int] = set()
        """Windows whose dict an unreleased snapshot holds: copied before the next write."""
        self._open_snapshots = 0
        self._dirty: set[int] = set()
        """Windows written since the previous snapshot."""
        self._held: set[int] = set()
        """Windows some snapshot has held: firing one must be written as its removal."""
        self._fired: dict[int, set[Any]] = {}
        """Held windows fired since the previous snapshot, with their keys."""

    def writable(self, end: int) -> dict[Any, Any]:
        """The dict of window `end` (created if new) for the task to change."""
        entries = self.windows.get(end)
        if entries is None:
            entries = self.windows[end] = {}
            heapq.heappush(self._ends, end)
        elif end in self._frozen:
            entries = self.windows[end] = _thawed(entries)
            self._frozen.discard(end)
        self._dirty.add(end)
        return entries

    def flush(self) -> None:
        """Nothing to write back: the task changed the windows themselves."""

    def close(self) -> None:
        """Nothing to release: the windows go with the operator."""

    def fire_until(self, watermark: int) -> Iterator[tuple[int, dict[Any, Any]]]:
        """Removes and yields the non-empty windows that `watermark` completes, earliest first."""
        ends, windows = self._ends, self.windows
        while ends and ends[0] - 1 <= watermark:
            end = heapq.heappop(ends)
            entries = windows.pop(end, None)
            if not entries:
                continue
            if end in self._frozen:
                # Its accumulators go downstream, where user code may change them in place.
                entries = _thawed(entries)
                self._frozen.discard(end)
            self._dirty.discard(end)
            if end in self._held:
                self._held.discard(end)
                self._fired[end] = set(entries)
            yield end, entries

    def restore_frame(self, name: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        """Applies one frame of a checkpoint's window files (see `sluice.state.snapshots`)."""
        end = window_end(name)
        entries = self.writable(end)
        entries.update(upserts)
        for key in removed:
            entries.pop(key, None)

    def restore_entries(self, end: int, entries: dict[Any, Any]) -> None:
        """Restores a window from checkpoints written before windows were snapshotted incrementally."""
        self.writable(end).update(entries)

    def finish_restore(self) -> None:
        """Drops windows the restored files emptied; everything restored counts as changed."""
        for end in [end for end, entries in self.windows.items() if not entries]:
            del self.windows[end]
            self._dirty.discard(end)

    def has_state(self) -> bool:
        return bool(self.windows or self._fired)

    def begin_snapshot(self) -> WindowSnapshot:
        tables = [
            FrozenTable(
                f"{TABLE_PREFIX}{end}", "value", entries, set(entries) if end in self._dirty else set()
            )
            for end, entries in self.windows.items()
        ]
        tables.extend(
            FrozenTable(f"{TABLE_PREFIX}{end}", "value", {}, keys) for end, keys in self._fired.items()
        )
        self._held.update(self.windows)
        self._frozen.update(self.windows)
        self._open_snapshots += 1
        self._dirty = set()
        self._fired = {}
        return WindowSnapshot(self, tables)

    def _release(self) -> None:
        self._open_snapshots -= 1
        if self._open_snapshots == 0:
            self._frozen.clear()


class WindowSnapshot:
    """The frozen windows of one snapshot (a `sluice.state.keyed.BackendSnapshot`)."""

    def __init__(self, owner: WindowAccumulators, tables: list[FrozenTable]) -> None:
        self.tables = tables
        self._owner: WindowAccumulators | None = owner

    def open_view(self) -> None:
        """The frozen windows are readable from the start."""

    def release(self) -> None:
        """On the task's thread, once written (or when writing failed); only the first call counts."""
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._release()


def window_end(table: str) -> int:
    """The end of the window a table of window state holds; refuses any other table."""
    if not table.startswith(TABLE_PREFIX):
        raise ValueError(f"table {table!r} of a window's checkpoint is not window state")
    try:
        return int(table[len(TABLE_PREFIX) :])
    except ValueError:
        raise ValueError(f"table {table!r} of a window's checkpoint names no window end") from None


def _thawed(entries: dict[Any, Any]) -> dict[Any, Any]:
    """A copy of a frozen window that the task may change without touching what a snapshot holds."""
    if _IMMUTABLE.issuperset(map(type, entries.values())):
        return dict(entries)
    return {k: v if type(v) in _IMMUTABLE else pickle.loads(pickle.dumps(v, 5)) for k, v in entries.items()}
