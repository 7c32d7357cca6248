"""Window contents on the disk state backend: the two window layouts with their entries in LMDB.

`DiskWindowAccumulators` is `sluice.state.windows.WindowAccumulators` (an accumulator per window end and
key, for tumbling and sliding windows that fire once) and `DiskKeyedWindows` is
`sluice.state.keyed_windows.KeyedWindows` (each key's open windows: sessions, allowed lateness,
ProcessWindowFunction, the window join), with the same methods, so the window operators run on either.
Their tables and frames are the heap layouts' (`sluice.state.disk_tables`), so a checkpoint restores
into either backend.

The operators change what `writable` returns in place, as on the heap; here that is a copy read from
the store, kept until `flush` writes it back. The operators flush after each batch and each watermark,
so memory holds the windows one batch touched, not all of them. What stays in memory: the ends of open
windows (a heap of ints) and, for keyed windows, each key's next due time (as the disk backend keeps
timers in memory).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from sluice.state.disk import DiskSnapshot
from sluice.state.disk_tables import MISSING, DiskTables
from sluice.state.keyed_windows import TABLE, Window
from sluice.state.windows import TABLE_PREFIX, window_end


class StoredWindow:
    """The accumulators of one window end as a batch sees them: read through to the store, written
    back by `flush`."""

    __slots__ = ("_cache", "_name", "_tables")

    def __init__(self, tables: DiskTables, name: str) -> None:
        self._tables, self._name = tables, name
        self._cache: dict[Any, Any] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._cache.get(key, MISSING)
        if value is MISSING:
            value = self._tables.get(self._name, key, MISSING)
            if value is MISSING:
                return default
            # The operator folds into it and writes it back: keep the object it will change.
            self._cache[key] = value
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self._cache[key] = value

    def flush(self) -> None:
        put, name = self._tables.put, self._name
        for key, value in self._cache.items():
            put(name, key, value)
        self._cache.clear()


class DiskWindowAccumulators:
    """`sluice.state.windows.WindowAccumulators` with the accumulators in the disk backend's store."""

    def __init__(self, owner: str) -> None:
        self._tables = DiskTables(owner)
        self._ends: list[int] = []
        self._open: set[int] = set()
        self._touched: dict[int, StoredWindow] = {}

    def writable(self, end: int) -> StoredWindow:
        window = self._touched.get(end)
        if window is None:
            if end not in self._open:
                self._open.add(end)
                heapq.heappush(self._ends, end)
            window = self._touched[end] = StoredWindow(self._tables, f"{TABLE_PREFIX}{end}")
        return window

    def flush(self) -> None:
        for window in self._touched.values():
            window.flush()
        self._touched.clear()

    def fire_until(self, watermark: int) -> Iterator[tuple[int, dict[Any, Any]]]:
        """Removes and yields the non-empty windows that `watermark` completes, earliest first."""
        self.flush()
        ends = self._ends
        while ends and ends[0] - 1 <= watermark:
            end = heapq.heappop(ends)
            self._open.discard(end)
            entries = self._tables.drop(f"{TABLE_PREFIX}{end}")
            if entries:
                yield end, entries

    def restore_frame(self, name: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        self._restored(window_end(name), upserts, removed)

    def restore_entries(self, end: int, entries: dict[Any, Any]) -> None:
        self._restored(end, entries, [])

    def _restored(self, end: int, upserts: dict[Any, Any], removed: list[Any]) -> None:
        if end not in self._open:
            self._open.add(end)
            heapq.heappush(self._ends, end)
        self._tables.restore(f"{TABLE_PREFIX}{end}", upserts, removed)

    def finish_restore(self) -> None:
        """Forgets windows the restored files emptied."""
        emptied = {end for end in self._open if self._tables.is_empty(f"{TABLE_PREFIX}{end}")}
        for end in emptied:
            self._tables.drop(f"{TABLE_PREFIX}{end}")
        self._open -= emptied
        self._ends = sorted(self._open)

    def has_state(self) -> bool:
        return bool(self._open or self._touched) or self._tables.has_changes()

    def begin_snapshot(self) -> DiskSnapshot:
        self.flush()
        return self._tables.begin_snapshot()

    def close(self) -> None:
        self._touched.clear()
        self._tables.close()


class DiskKeyedWindows:
    """`sluice.state.keyed_windows.KeyedWindows` with each key's windows in the disk backend's store."""

    def __init__(self, owner: str) -> None:
        self._tables = DiskTables(owner)
        self._read: dict[Any, list[Window]] = {}
        """Windows read since the last flush, not (yet) written."""
        self._touched: dict[Any, list[Window]] = {}
        """Windows handed out to be changed since the last flush."""

    def get(self, key: Any) -> list[Window] | None:
        """The windows of `key`, to read only."""
        windows = self._touched.get(key)
        if windows is None:
            windows = self._read.get(key)
            if windows is None:
                windows = self._tables.get(TABLE, key)
                if windows is None:
                    return None
                self._read[key] = windows
        return windows

    def writable(self, key: Any) -> list[Window]:
        """The windows of `key` (an empty list if none) for the task to change in place until `flush`."""
        windows = self._touched.get(key)
        if windows is None:
            windows = self._read.pop(key, None)
            if windows is None:
                windows = self._tables.get(TABLE, key) or []
            self._touched[key] = windows
        return windows

    def drop_if_empty(self, key: Any) -> None:
        """`flush` removes a key left without windows."""

    def flush(self) -> None:
        tables = self._tables
        for key, windows in self._touched.items():
            if windows:
                tables.put(TABLE, key, windows)
            else:
                tables.remove(TABLE, key)
        self._touched.clear()
        self._read.clear()

    def items(self) -> Iterator[tuple[Any, list[Window]]]:
        self.flush()
        return self._tables.items(TABLE)

    def restore_frame(self, name: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        if name != TABLE:
            raise ValueError(f"table {name!r} of a window's checkpoint is not keyed window state")
        self._tables.restore(TABLE, upserts, removed)

    def has_state(self) -> bool:
        return bool(self._touched) or not self._tables.is_empty() or self._tables.has_changes()

    def begin_snapshot(self) -> DiskSnapshot:
        self.flush()
        return self._tables.begin_snapshot()

    def close(self) -> None:
        self._touched.clear()
        self._read.clear()
        self._tables.close()
