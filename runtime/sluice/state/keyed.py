"""Keyed state as user functions and operators see it, whichever backend keeps it.

Two backends (`sluice run --state-backend`): `heap` (`sluice.state.heap`, dicts in memory, the default)
and `disk` (`sluice.state.disk`, LMDB files on the TaskManager's local disk, for state larger than
memory). Both snapshot the same way: `begin_snapshot` is the short synchronous part (a frozen view and
the keys changed since the last snapshot); `sluice.state.snapshots` writes the view from another thread
and the snapshot is released afterwards. Their checkpoint files are the same, so a job can be restored
with the other backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

T = TypeVar("T")
BACKENDS = ("heap", "disk")


class _Deleted:
    """Marks a key removed after a snapshot began while the snapshot still holds its old value."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "DELETED"


DELETED: Any = _Deleted()


class ValueState(Protocol[T]):
    def value(self) -> T | None: ...
    def update(self, value: T) -> None: ...
    def clear(self) -> None: ...


class ListState(Protocol[T]):
    def get(self) -> list[T]: ...
    def add(self, value: T) -> None: ...
    def add_all(self, values: list[T]) -> None: ...
    def update(self, values: list[T]) -> None: ...
    def clear(self) -> None: ...


class MapState(Protocol):
    def get(self, key: Any, default: Any = None) -> Any: ...
    def put(self, key: Any, value: Any) -> None: ...
    def contains(self, key: Any) -> bool: ...
    def remove(self, key: Any) -> None: ...
    def items(self) -> list[tuple[Any, Any]]: ...
    def keys(self) -> list[Any]: ...
    def values(self) -> list[Any]: ...
    def is_empty(self) -> bool: ...
    def clear(self) -> None: ...


class Entries(Protocol):
    """A frozen table: read from the serializing thread while the task goes on writing."""

    def get(self, key: Any, default: Any = None) -> Any: ...
    def items(self) -> Iterable[tuple[Any, Any]]: ...


class FrozenTable:
    """One table as a snapshot sees it, and its keys changed since the previous snapshot: `changed`
    and `removed`.

    A backend that knows the changed keys' values as of the snapshot gives `changed` as a dict of them,
    so a delta is written without looking each key up in `entries` again (at millions of keys those
    lookups were most of the asynchronous part); `removed` then holds the keys removed. The disk
    backend's values are its encoded ones, which `decode` turns back into values. Otherwise `changed`
    is a set of every changed key, removed ones included.
    """

    __slots__ = ("changed", "decode", "entries", "kind", "name", "removed")

    def __init__(
        self,
        name: str,
        kind: str,
        entries: Entries,
        changed: set[Any] | dict[Any, Any],
        removed: frozenset[Any] | set[Any] = frozenset(),
        decode: Callable[[Any], Any] | None = None,
    ) -> None:
        self.name, self.kind, self.entries = name, kind, entries
        self.changed, self.removed, self.decode = changed, removed, decode


class BackendSnapshot(Protocol):
    tables: list[FrozenTable]

    def open_view(self) -> None:
        """Makes every table's `entries` readable (a full snapshot, or a delta of keys without their
        values): on the task's thread, before it writes to the backend again. A snapshot whose entries
        are always readable does nothing."""

    def release(self) -> None:
        """On the task's thread, once written (or when writing failed)."""


class KeyedStateBackend(Protocol):
    kind: str
    current_key: Any

    def value_state(self, desc: ValueStateDescriptor[T]) -> ValueState[T]: ...
    def list_state(self, desc: ListStateDescriptor[T]) -> ListState[T]: ...
    def map_state(self, desc: MapStateDescriptor) -> MapState: ...
    def has_state(self) -> bool: ...
    def keys(self, name: str) -> list[Any]:
        """Every key that has state `name` (for TTL cleanup after a restore)."""
        ...

    def begin_snapshot(self, view: bool = True) -> BackendSnapshot:
        """The synchronous part of a snapshot. `view=False`: `entries` are read only after
        `BackendSnapshot.open_view`, which a delta of changes that carry their values never needs."""
        ...

    def restore_frame(self, name: str, kind: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        """Applies one frame of a checkpoint's keyed state file (see `sluice.state.snapshots`)."""

    def restore(self, groups: dict[int, dict[str, dict[Any, Any]]]) -> None:
        """The by-key-group form of checkpoints written before incremental snapshots."""

    def close(self) -> None:
        """Releases what the backend holds (files of the disk backend); the state is gone after it."""


def legacy_kind(entries: dict[Any, Any]) -> str:
    sample = next(iter(entries.values()), None)
    return "list" if isinstance(sample, list) else "map" if isinstance(sample, dict) else "value"
