"""The windows of each key, for windows that merge (sessions), fire more than once (allowed lateness)
or keep their elements (a ProcessWindowFunction).

`sluice.state.windows` keeps one accumulator per (window end, key) and forgets a window when it fires:
the fast layout for tumbling and sliding windows that fire once. Here each key owns the list of its
open windows, `[start, end, contents, fired]`, so that windows of one key can merge and a fired window
can stay until the watermark passes its end plus the allowed lateness. `fired` is state, not derived
from the watermark, so a window restored after it fired does not fire a second time for nothing.

Snapshots work as in `sluice.state.windows`: `begin_snapshot` freezes the dict of keys (one table,
`keyed-windows`, whose keys are the record keys, so a restore at another parallelism takes them by key
group) and lists the keys written since the previous snapshot; while a snapshot is written, the first
write to the dict copies it, and the first write to a key copies that key's windows. This is the heap
layout; `sluice.state.disk_windows` keeps the same table in the disk backend's store.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any, Protocol

from sluice.state.keyed import BackendSnapshot, FrozenTable

TABLE = "keyed-windows"

Window = list[Any]
"""`[start, end, contents, fired]`."""
START, END, CONTENTS, FIRED = 0, 1, 2, 3


class KeyedWindowLayout(Protocol):
    """What the keyed window operator needs of its windows, on the heap (`KeyedWindows`) or on disk
    (`sluice.state.disk_windows.DiskKeyedWindows`)."""

    def get(self, key: Any) -> list[Window] | None: ...
    def writable(self, key: Any) -> list[Window]: ...
    def drop_if_empty(self, key: Any) -> None: ...
    def flush(self) -> None: ...
    def items(self) -> Iterator[tuple[Any, list[Window]]]: ...
    def restore_frame(self, name: str, upserts: dict[Any, Any], removed: list[Any]) -> None: ...
    def has_state(self) -> bool: ...
    def begin_snapshot(self) -> BackendSnapshot: ...
    def close(self) -> None: ...


class KeyedWindows:
    def __init__(self) -> None:
        self.by_key: dict[Any, list[Window]] = {}
        self._dirty: set[Any] = set()
        """Keys written since the previous snapshot (removed ones included)."""
        self._frozen = False
        """An unreleased snapshot holds `by_key`: copy it before the next write."""
        self._copied: set[Any] = set()
        """Keys whose windows were copied since the dict was frozen (writable without a copy)."""
        self._open_snapshots = 0

    def get(self, key: Any) -> list[Window] | None:
        """The windows of `key`, to read only."""
        return self.by_key.get(key)

    def writable(self, key: Any) -> list[Window]:
        """The windows of `key` (an empty list if none) for the task to change in place."""
        if self._frozen:
            if not self._copied:
                self.by_key = dict(self.by_key)
            if key not in self._copied:
                self._copied.add(key)
                held = self.by_key.get(key)
                if held is not None:
                    self.by_key[key] = pickle.loads(pickle.dumps(held, protocol=5))
        self._dirty.add(key)
        windows = self.by_key.get(key)
        if windows is None:
            windows = self.by_key[key] = []
        return windows

    def drop_if_empty(self, key: Any) -> None:
        if not self.by_key.get(key, True):
            del self.by_key[key]

    def flush(self) -> None:
        """Nothing to write back: the task changed the windows themselves."""

    def items(self) -> Iterator[tuple[Any, list[Window]]]:
        return iter(self.by_key.items())

    def close(self) -> None:
        """Nothing to release: the windows go with the operator."""

    def restore_frame(self, name: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        if name != TABLE:
            raise ValueError(f"table {name!r} of a window's checkpoint is not keyed window state")
        for key, windows in upserts.items():
            self.writable(key)[:] = windows
        for key in removed:
            self.by_key.pop(key, None)

    def has_state(self) -> bool:
        return bool(self.by_key or self._dirty)

    def begin_snapshot(self) -> KeyedWindowsSnapshot:
        table = FrozenTable(TABLE, "value", self.by_key, self._dirty)
        self._dirty = set()
        self._frozen = True
        self._copied = set()
        self._open_snapshots += 1
        return KeyedWindowsSnapshot(self, [table])

    def _release(self) -> None:
        self._open_snapshots -= 1
        if self._open_snapshots == 0:
            self._frozen = False
            self._copied = set()


class KeyedWindowsSnapshot:
    """The frozen windows of one snapshot (a `sluice.state.keyed.BackendSnapshot`)."""

    def __init__(self, owner: KeyedWindows, tables: list[FrozenTable]) -> None:
        self.tables = tables
        self._owner: KeyedWindows | None = owner

    def open_view(self) -> None:
        """The frozen windows are readable from the start."""

    def release(self) -> None:
        """On the task's thread, once written (or when writing failed); only the first call counts."""
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._release()
