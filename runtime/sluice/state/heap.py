"""Keyed state on the heap (`--state-backend heap`, the default): one dict per declared state, keyed by
the current record's key.

Tables are plain dicts keyed by the user key, so the hot path never computes key groups; the split by
key group happens only when state is restored.

Snapshots are copy-on-write, so that record processing stops only for an O(number of states) step:
`begin_snapshot` freezes every table's dict (`_Table.base`) and opens an empty `front` dict that takes
all writes until the snapshot has been serialized (in another thread, see `sluice.state.snapshots`).
Reads look in `front` first. A list or map, or a mutable value, that is about to change is copied
into `front` first, so the frozen dict never changes under the serializer. When the snapshot is done,
`end_snapshot` folds `front` back into `base` (on the task's thread).

Every table also records the keys changed since the last snapshot, with their values (`dirty`, the
keys removed apart in `removed`): an incremental checkpoint writes only those, and needs no lookup in
the frozen dict to find their values. `dirty` holds the same objects as the table: a container that
changes in place is copied into `front` first while a snapshot is frozen, so what `dirty` holds for
that snapshot does not change under the serializer either.
"""

from __future__ import annotations

import pickle
from typing import Any, Generic, TypeVar

from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.keyed import DELETED, FrozenTable, legacy_kind

T = TypeVar("T")
_MISSING: Any = object()
# Values that cannot change in place: they are shared with a frozen snapshot as they are.
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), tuple, frozenset, complex})


class _Table:
    __slots__ = ("base", "dirty", "front", "front_deletes", "kind", "name", "removed")

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind
        self.base: dict[Any, Any] = {}
        self.front: dict[Any, Any] | None = None
        self.dirty: dict[Any, Any] = {}
        self.removed: set[Any] = set()
        self.front_deletes = False
        """Whether `front` holds a DELETED mark: only then does folding it back look for them."""

    def get(self, key: Any) -> Any:
        front = self.front
        if front is not None:
            value = front.get(key, _MISSING)
            if value is not _MISSING:
                return _MISSING if value is DELETED else value
        return self.base.get(key, _MISSING)

    def put(self, key: Any, value: Any) -> None:
        front = self.front
        (self.base if front is None else front)[key] = value
        self.dirty[key] = value
        if self.removed:
            self.removed.discard(key)

    def remove(self, key: Any) -> None:
        front = self.front
        if front is None:
            self.base.pop(key, None)
        elif key in self.base:
            front[key] = DELETED
            self.front_deletes = True
        else:
            front.pop(key, None)
        self.dirty.pop(key, None)
        self.removed.add(key)

    def own(self, key: Any, copy: Any) -> Any:
        """The current key's container, safe to change in place (copied out of a frozen snapshot)."""
        # A missing container is not marked: the caller puts a new one.
        front = self.front
        if front is None:
            value = self.base.get(key, _MISSING)
        else:
            value = front.get(key, _MISSING)
            if value is DELETED:
                value = _MISSING
            elif value is _MISSING:
                old = self.base.get(key, _MISSING)
                if old is not _MISSING:
                    value = front[key] = copy(old)
        if value is not _MISSING:
            self.dirty[key] = value
        return value


class HeapSnapshot:
    """The frozen tables of one snapshot; serialized off the task's thread, then released."""

    def __init__(self, backend: HeapKeyedStateBackend, tables: list[FrozenTable], owns_front: bool) -> None:
        self.backend = backend
        self.tables = tables
        self._owns_front = owns_front

    def open_view(self) -> None:
        """The frozen tables are readable from the start."""

    def release(self) -> None:
        """Back on the task's thread once serialized: fold the writes made meanwhile into the tables."""
        if self._owns_front:
            self._owns_front = False
            self.backend.end_snapshot()


class HeapKeyedStateBackend:
    kind = "heap"

    def __init__(self, max_parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self.current_key: Any = None
        self._tables: dict[str, _Table] = {}
        self._frozen = False

    def table(self, name: str, kind: str) -> _Table:
        known = self._tables.get(name)
        if known is not None:
            if known.kind != kind:
                raise ValueError(f"state {name!r} is declared both as {known.kind} and as {kind} state")
            return known
        table = self._tables[name] = _Table(name, kind)
        if self._frozen:
            table.front = {}
        return table

    def value_state(self, desc: ValueStateDescriptor[T]) -> HeapValueState[T]:
        return HeapValueState(self, self.table(desc.name, "value"), desc.default)

    def list_state(self, desc: ListStateDescriptor[T]) -> HeapListState[T]:
        return HeapListState(self, self.table(desc.name, "list"))

    def map_state(self, desc: MapStateDescriptor) -> HeapMapState:
        return HeapMapState(self, self.table(desc.name, "map"))

    # -- snapshots ----------------------------------------------------------------------------------

    def has_state(self) -> bool:
        return bool(self._tables)

    def keys(self, name: str) -> list[Any]:
        table = self._tables.get(name)
        if table is None:
            return []
        keys = set(table.base)
        for key, value in (table.front or {}).items():
            if value is DELETED:
                keys.discard(key)
            else:
                keys.add(key)
        return list(keys)

    def close(self) -> None:
        """Nothing to release: the tables go with the operator."""

    def begin_snapshot(self, view: bool = True) -> HeapSnapshot:
        """The synchronous part: freeze every table and hand out its keys changed since the last one."""
        frozen = []
        if self._frozen:
            # A snapshot is still being serialized (an overlapping savepoint): this one copies its view,
            # O(state) on the task's thread. Values that may change in place are copied too: `front`'s
            # now, `base`'s once the first snapshot's release makes it writable again.
            for t in self._tables.values():
                entries = {k: v if type(v) in _IMMUTABLE else _copy_value(v) for k, v in t.base.items()}
                for key, value in (t.front or {}).items():
                    if value is DELETED:
                        entries.pop(key, None)
                    else:
                        entries[key] = _copy_value(value) if type(value) not in _IMMUTABLE else value
                # Keys only: the containers `dirty` holds may change in place once the first snapshot is
                # released, so this one's values are looked up in its copy.
                frozen.append(FrozenTable(t.name, t.kind, entries, {*t.dirty, *t.removed}))
                t.dirty, t.removed = {}, set()
            return HeapSnapshot(self, frozen, owns_front=False)
        for t in self._tables.values():
            t.front = {}
            frozen.append(FrozenTable(t.name, t.kind, t.base, t.dirty, t.removed))
            t.dirty, t.removed = {}, set()
        self._frozen = True
        return HeapSnapshot(self, frozen, owns_front=True)

    def end_snapshot(self) -> None:
        for t in self._tables.values():
            front, t.front = t.front, None
            deletes, t.front_deletes = t.front_deletes, False
            if not front:
                continue
            gone = [k for k, v in front.items() if v is DELETED] if deletes else []
            t.base.update(front)
            for key in gone:
                del t.base[key]
        self._frozen = False

    def restore_frame(self, name: str, kind: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        base = self.table(name, kind).base
        base.update(upserts)
        for key in removed:
            base.pop(key, None)

    def restore(self, groups: dict[int, dict[str, dict[Any, Any]]]) -> None:
        """Restores the by-key-group form of checkpoints written before incremental snapshots."""
        for by_name in groups.values():
            for name, entries in by_name.items():
                known = self._tables.get(name)
                self.restore_frame(name, known.kind if known else legacy_kind(entries), entries, [])


def _copy_value(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value, protocol=5))


class HeapValueState(Generic[T]):
    __slots__ = ("_backend", "_default", "_table")

    def __init__(self, backend: HeapKeyedStateBackend, table: _Table, default: T | None) -> None:
        self._backend, self._table, self._default = backend, table, default

    def value(self) -> T | None:
        table, key = self._table, self._backend.current_key
        front = table.front
        if front is None:
            value: Any = table.base.get(key, self._default)
            return value  # type: ignore[no-any-return]
        value = front.get(key, _MISSING)
        if value is _MISSING:
            value = table.base.get(key, _MISSING)
            if value is _MISSING:
                return self._default
            if type(value) not in _IMMUTABLE:
                # The caller may change it in place: give it a copy the snapshot does not hold.
                value = front[key] = _copy_value(value)
        elif value is DELETED:
            return self._default
        return value  # type: ignore[no-any-return]

    def update(self, value: T) -> None:
        table, key = self._table, self._backend.current_key
        front = table.front
        (table.base if front is None else front)[key] = value
        table.dirty[key] = value
        if table.removed:
            table.removed.discard(key)

    def clear(self) -> None:
        self._table.remove(self._backend.current_key)


class HeapListState(Generic[T]):
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: HeapKeyedStateBackend, table: _Table) -> None:
        self._backend, self._table = backend, table

    def get(self) -> list[T]:
        value = self._table.get(self._backend.current_key)
        return [] if value is _MISSING else list(value)

    def add(self, value: T) -> None:
        key = self._backend.current_key
        items = self._table.own(key, list)
        if items is _MISSING:
            self._table.put(key, [value])
        else:
            items.append(value)

    def add_all(self, values: list[T]) -> None:
        if not values:
            return
        key = self._backend.current_key
        items = self._table.own(key, list)
        if items is _MISSING:
            self._table.put(key, list(values))
        else:
            items.extend(values)

    def update(self, values: list[T]) -> None:
        if values:
            self._table.put(self._backend.current_key, list(values))
        else:
            self.clear()

    def clear(self) -> None:
        self._table.remove(self._backend.current_key)


class HeapMapState:
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: HeapKeyedStateBackend, table: _Table) -> None:
        self._backend, self._table = backend, table

    def _entries(self) -> dict[Any, Any]:
        entries = self._table.get(self._backend.current_key)
        return {} if entries is _MISSING else entries

    def get(self, key: Any, default: Any = None) -> Any:
        return self._entries().get(key, default)

    def put(self, key: Any, value: Any) -> None:
        current = self._backend.current_key
        entries = self._table.own(current, dict)
        if entries is _MISSING:
            self._table.put(current, {key: value})
        else:
            entries[key] = value

    def contains(self, key: Any) -> bool:
        return key in self._entries()

    def remove(self, key: Any) -> None:
        current = self._backend.current_key
        entries = self._table.own(current, dict)
        if entries is _MISSING or key not in entries:
            return
        del entries[key]
        if not entries:
            self.clear()

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._entries().items())

    def keys(self) -> list[Any]:
        return list(self._entries())

    def values(self) -> list[Any]:
        return list(self._entries().values())

    def is_empty(self) -> bool:
        return not self._entries()

    def clear(self) -> None:
        self._table.remove(self._backend.current_key)
