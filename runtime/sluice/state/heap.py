"""Keyed state on the heap (`--state-backend heap`, the default): one dict per declared state, keyed by
the current record's key. This module provides the tables and their snapshots; the state handles are
those of `sluice.state.primitives`, over these tables.

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
from collections.abc import Callable
from typing import Any, TypeVar

from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.keyed import DELETED, FrozenTable, legacy_kind
from sluice.state.primitives import MISSING, TableListState, TableMapState, TableValueState

T = TypeVar("T")
# Values that cannot change in place: they are shared with a frozen snapshot as they are.
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), tuple, frozenset, complex})


class _Table:
    """One declared state's values in memory: `sluice.state.primitives.StateTable` on dicts."""

    __slots__ = (
        "base",
        "dirty",
        "front",
        "front_deletes",
        "get",
        "in_place",
        "kind",
        "lend",
        "name",
        "removed",
    )

    def __init__(self, name: str, kind: str) -> None:
        self.in_place = True  # an instance attribute: the handles read it on every change
        self.name = name
        self.kind = kind
        self.base: dict[Any, Any] = {}
        self.front: dict[Any, Any] | None = None
        self.dirty: dict[Any, Any] = {}
        self.removed: set[Any] = set()
        self.front_deletes = False
        """Whether `front` holds a DELETED mark: only then does folding it back look for them."""
        self.get: Callable[[Any, Any], Any]
        self.lend: Callable[[Any, Any], Any]
        self._read_base()

    def _read_base(self) -> None:
        # While no snapshot holds `base`, a read is `base.get` itself: the hot path makes no Python call.
        # `base` is never replaced, so the bound method stays its.
        self.get = self.lend = self.base.get

    def freeze(self) -> None:
        """A snapshot holds `base` from now on: writes go to a new `front` until `thaw`."""
        self.front = {}
        self.get, self.lend = self._get_layered, self._lend_layered

    def thaw(self) -> None:
        """The snapshot is written: fold `front` back into `base`."""
        front, self.front = self.front, None
        deletes, self.front_deletes = self.front_deletes, False
        self._read_base()
        if not front:
            return
        gone = [k for k, v in front.items() if v is DELETED] if deletes else []
        self.base.update(front)
        for key in gone:
            del self.base[key]

    def _get_layered(self, key: Any, default: Any) -> Any:
        front = self.front
        if front is not None:
            value = front.get(key, MISSING)
            if value is not MISSING:
                return default if value is DELETED else value
        return self.base.get(key, default)

    def _lend_layered(self, key: Any, default: Any) -> Any:
        # Written out again in _HeapValueState.value, as `put` is in its update.
        front = self.front
        if front is None:
            return self.base.get(key, default)
        value = front.get(key, MISSING)
        if value is MISSING:
            value = self.base.get(key, MISSING)
            if value is MISSING:
                return default
            if type(value) not in _IMMUTABLE:
                # The caller may change it in place: give it a copy the snapshot does not hold.
                value = front[key] = _copy_value(value)
        elif value is DELETED:
            return default
        return value

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

    def own(self, key: Any, copy: Callable[[Any], Any]) -> Any:
        # A missing container is not marked: the caller puts a new one.
        front = self.front
        if front is None:
            value = self.base.get(key, MISSING)
        else:
            value = front.get(key, MISSING)
            if value is DELETED:
                value = MISSING
            elif value is MISSING:
                old = self.base.get(key, MISSING)
                if old is not MISSING:
                    value = front[key] = copy(old)
        if value is not MISSING:
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
            table.freeze()
        return table

    def value_state(self, desc: ValueStateDescriptor[T]) -> TableValueState[T]:
        return _HeapValueState(self, self.table(desc.name, "value"), desc.default)

    def list_state(self, desc: ListStateDescriptor[T]) -> TableListState[T]:
        return TableListState(self, self.table(desc.name, "list"))

    def map_state(self, desc: MapStateDescriptor) -> TableMapState:
        return TableMapState(self, self.table(desc.name, "map"))

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
            t.freeze()
            frozen.append(FrozenTable(t.name, t.kind, t.base, t.dirty, t.removed))
            t.dirty, t.removed = {}, set()
        self._frozen = True
        return HeapSnapshot(self, frozen, owns_front=True)

    def end_snapshot(self) -> None:
        for t in self._tables.values():
            t.thaw()
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


class _HeapValueState(TableValueState[T]):
    """`TableValueState` with its table's read and write written out in it.

    A keyed job reads and updates a value for every record (W4: a count per key); a call into the
    table for each of the two made W4's records 4% slower on the heap, and 15-20% while a snapshot is
    held (`bench/state_primitives.py`). The code is that of `_Table._lend_layered` and `_Table.put`."""

    __slots__ = ()
    _table: _Table

    def value(self) -> T | None:
        table, key = self._table, self._backend.current_key
        front = table.front
        if front is None:
            value: Any = table.base.get(key, self._default)
            return value  # type: ignore[no-any-return]
        value = front.get(key, MISSING)
        if value is MISSING:
            value = table.base.get(key, MISSING)
            if value is MISSING:
                return self._default
            if type(value) not in _IMMUTABLE:
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
