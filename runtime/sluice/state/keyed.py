"""Keyed state on the heap: one table per declared state, keyed by the current record's key.

Tables are plain dicts keyed by the user key, so the hot path never computes key groups; the split by
key group happens only when a snapshot is taken and when state is restored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.keygroups import key_group_for

T = TypeVar("T")
_MISSING = object()


class KeyedStateBackend:
    def __init__(self, max_parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self.current_key: Any = None
        self._tables: dict[str, dict[Any, Any]] = {}
        self._kinds: dict[str, str] = {}

    def table(self, name: str, kind: str) -> dict[Any, Any]:
        known = self._kinds.get(name)
        if known is not None and known != kind:
            raise ValueError(f"state {name!r} is declared both as {known} and as {kind} state")
        self._kinds[name] = kind
        return self._tables.setdefault(name, {})

    def value_state(self, desc: ValueStateDescriptor[T]) -> ValueState[T]:
        return ValueState(self, self.table(desc.name, "value"), desc.default)

    def list_state(self, desc: ListStateDescriptor[T]) -> ListState[T]:
        return ListState(self, self.table(desc.name, "list"))

    def map_state(self, desc: MapStateDescriptor) -> MapState:
        return MapState(self, self.table(desc.name, "map"))

    def snapshot(self) -> dict[int, dict[str, dict[Any, Any]]]:
        """Key group -> state name -> key -> value, for the non-empty key groups."""
        groups: dict[int, dict[str, dict[Any, Any]]] = {}
        mp = self.max_parallelism
        for name, table in self._tables.items():
            for key, value in table.items():
                groups.setdefault(key_group_for(key, mp), {}).setdefault(name, {})[key] = value
        return groups

    def restore(self, groups: dict[int, dict[str, dict[Any, Any]]]) -> None:
        for by_name in groups.values():
            for name, entries in by_name.items():
                self._tables.setdefault(name, {}).update(entries)

    def keys(self) -> Iterator[Any]:
        seen: set[Any] = set()
        for table in self._tables.values():
            for key in table:
                if key not in seen:
                    seen.add(key)
                    yield key


class ValueState(Generic[T]):
    __slots__ = ("_backend", "_default", "_table")

    def __init__(self, backend: KeyedStateBackend, table: dict[Any, Any], default: T | None) -> None:
        self._backend, self._table, self._default = backend, table, default

    def value(self) -> T | None:
        value: T | None = self._table.get(self._backend.current_key, self._default)
        return value

    def update(self, value: T) -> None:
        self._table[self._backend.current_key] = value

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class ListState(Generic[T]):
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: KeyedStateBackend, table: dict[Any, Any]) -> None:
        self._backend, self._table = backend, table

    def get(self) -> list[T]:
        return list(self._table.get(self._backend.current_key, ()))

    def add(self, value: T) -> None:
        self._table.setdefault(self._backend.current_key, []).append(value)

    def add_all(self, values: list[T]) -> None:
        self._table.setdefault(self._backend.current_key, []).extend(values)

    def update(self, values: list[T]) -> None:
        if values:
            self._table[self._backend.current_key] = list(values)
        else:
            self.clear()

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class MapState:
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: KeyedStateBackend, table: dict[Any, Any]) -> None:
        self._backend, self._table = backend, table

    def _entries(self, create: bool = False) -> dict[Any, Any]:
        key = self._backend.current_key
        entries = self._table.get(key, _MISSING)
        if entries is _MISSING:
            entries = {}
            if create:
                self._table[key] = entries
        return entries  # type: ignore[no-any-return]

    def get(self, key: Any, default: Any = None) -> Any:
        return self._entries().get(key, default)

    def put(self, key: Any, value: Any) -> None:
        self._entries(create=True)[key] = value

    def contains(self, key: Any) -> bool:
        return key in self._entries()

    def remove(self, key: Any) -> None:
        entries = self._entries()
        entries.pop(key, None)
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
        self._table.pop(self._backend.current_key, None)
