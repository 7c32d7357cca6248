"""Value, list and map state, written once over the table a backend keeps per declared state.

A keyed state backend (`sluice.state.heap`, `sluice.state.disk`) provides only a `StateTable` per
declared state, and the snapshots of its tables; the handles user functions get (the `ValueState`,
`ListState` and `MapState` of `sluice.state.keyed`) are the classes below, the same on every backend;
only the heap's value state writes its table's read and write out in its two methods, the hottest path
of a keyed job (`sluice.state.heap._HeapValueState`). A handle reads the current record's key from its
backend at each call, so one handle serves all keys. Time-to-live (`sluice.state.ttl`) wraps these
handles, so it too is the same on every backend.

Lists and maps are stored whole per key. What a table hands out decides how a change is written:
- on the heap, `own` returns the stored container itself (copied first out of a snapshot in progress),
  so changing it in place is the write (`in_place`);
- on disk, every read decodes a new copy, so a changed container is written back with `put`.
Neither a list nor a map is ever stored empty: removing the last element removes the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
MISSING: Any = object()
"""What `StateTable.own` returns for a key without a value."""
_NO_ENTRIES: Mapping[Any, Any] = MappingProxyType({})


class StateTable(Protocol):
    """One declared state's values, by key of the record they belong to.

    `get` and `lend` are attributes holding a function, not methods: the heap swaps them as snapshots
    begin and end (outside one, they are its dict's own `get`), and the handles read them as attributes
    before calling them: calling one straight off the table is slower (bench/state_primitives.py)."""

    get: Callable[[Any, Any], Any]
    """`get(key, default)`: the key's value, or `default`, only to be read: the caller changes nothing
    in it."""

    lend: Callable[[Any, Any], Any]
    """`lend(key, default)`: the key's value, or `default`, to hand to user code, which may change it in
    place: such a change never reaches a snapshot in progress."""

    @property
    def in_place(self) -> bool:
        """Whether `own` hands out the stored container, so that changing it is the write; otherwise it
        is a copy, kept only once `put` back."""
        ...

    def own(self, key: Any, copy: Callable[[Any], Any], /) -> Any:
        """The key's container, to change and keep (recorded as written for the next snapshot, if
        `in_place`); `copy` makes it from one a snapshot in progress holds. `MISSING` when the key has
        none: the caller puts a new one."""
        ...

    def put(self, key: Any, value: Any, /) -> None:
        """Sets the key's value, recorded as written for the next snapshot."""
        ...

    def remove(self, key: Any, /) -> None:
        """Removes the key's value, recorded as removed for the next snapshot."""
        ...


class HasCurrentKey(Protocol):
    """The backend, as the handles see it: the key of the record being processed."""

    current_key: Any


class TableValueState(Generic[T]):
    __slots__ = ("_backend", "_default", "_table")

    def __init__(self, backend: HasCurrentKey, table: StateTable, default: T | None) -> None:
        self._backend, self._table, self._default = backend, table, default

    def value(self) -> T | None:
        lend = self._table.lend  # an attribute (see StateTable)
        return lend(self._backend.current_key, self._default)  # type: ignore[no-any-return]

    def update(self, value: T) -> None:
        self._table.put(self._backend.current_key, value)

    def clear(self) -> None:
        self._table.remove(self._backend.current_key)


class TableListState(Generic[T]):
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: HasCurrentKey, table: StateTable) -> None:
        self._backend, self._table = backend, table

    def get(self) -> list[T]:
        read = self._table.get  # an attribute (see StateTable)
        return list(read(self._backend.current_key, ()))

    def add(self, value: T) -> None:
        key, table = self._backend.current_key, self._table
        items = table.own(key, list)
        if items is MISSING:
            table.put(key, [value])
        else:
            items.append(value)
            if not table.in_place:
                table.put(key, items)

    def add_all(self, values: list[T]) -> None:
        if not values:
            return
        key, table = self._backend.current_key, self._table
        items = table.own(key, list)
        if items is MISSING:
            table.put(key, list(values))
        else:
            items.extend(values)
            if not table.in_place:
                table.put(key, items)

    def update(self, values: list[T]) -> None:
        if values:
            self._table.put(self._backend.current_key, list(values))
        else:
            self.clear()

    def clear(self) -> None:
        self._table.remove(self._backend.current_key)


class TableMapState:
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: HasCurrentKey, table: StateTable) -> None:
        self._backend, self._table = backend, table

    def _entries(self) -> Mapping[Any, Any]:
        read = self._table.get  # an attribute (see StateTable)
        return read(self._backend.current_key, _NO_ENTRIES)  # type: ignore[no-any-return]

    def get(self, key: Any, default: Any = None) -> Any:
        return self._entries().get(key, default)

    def put(self, key: Any, value: Any) -> None:
        current, table = self._backend.current_key, self._table
        entries = table.own(current, dict)
        if entries is MISSING:
            table.put(current, {key: value})
        else:
            entries[key] = value
            if not table.in_place:
                table.put(current, entries)

    def contains(self, key: Any) -> bool:
        return key in self._entries()

    def remove(self, key: Any) -> None:
        current, table = self._backend.current_key, self._table
        entries = table.own(current, dict)
        if entries is MISSING or key not in entries:
            return
        del entries[key]
        if not entries:
            table.remove(current)
        elif not table.in_place:
            table.put(current, entries)

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
