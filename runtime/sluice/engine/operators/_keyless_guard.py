"""Keyed state handles of a `KeyedBroadcastProcessFunction` that refuse use where no key is current.

`process_broadcast_element` runs for a broadcast record, which has no key: the backend's current key
is whatever was set last (or none), so a read there would return some other key's value and a write
would put it there. Flink gives no per-key state in that method either. The function gets these
handles from `open(ctx)`; each call checks the operator's context, so the cost stays on this one
operator, not on every keyed function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sluice.engine.context import OperatorContext
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.keyed import ListState, MapState, ValueState

T = TypeVar("T")


class KeylessCheck:
    """Raises when keyed state `name` is used while `in_broadcast()` says a broadcast record is current."""

    __slots__ = ("_in_broadcast", "_name")

    def __init__(self, name: str, in_broadcast: Callable[[], bool]) -> None:
        self._name = name
        self._in_broadcast = in_broadcast

    def __call__(self) -> None:
        if self._in_broadcast():
            raise TypeError(
                f"keyed state {self._name!r} used in process_broadcast_element: a broadcast record has "
                "no key, so no key's state is current there. Keep what broadcast records carry in "
                "ctx.broadcast_state(name), and read or change keyed state in process_element or on_timer"
            )


class GuardedValueState(Generic[T]):
    __slots__ = ("_check", "_inner")

    def __init__(self, inner: ValueState[T], check: KeylessCheck) -> None:
        self._inner, self._check = inner, check

    def value(self) -> T | None:
        self._check()
        return self._inner.value()

    def update(self, value: T) -> None:
        self._check()
        self._inner.update(value)

    def clear(self) -> None:
        self._check()
        self._inner.clear()


class GuardedListState(Generic[T]):
    __slots__ = ("_check", "_inner")

    def __init__(self, inner: ListState[T], check: KeylessCheck) -> None:
        self._inner, self._check = inner, check

    def get(self) -> list[T]:
        self._check()
        return self._inner.get()

    def add(self, value: T) -> None:
        self._check()
        self._inner.add(value)

    def add_all(self, values: list[T]) -> None:
        self._check()
        self._inner.add_all(values)

    def update(self, values: list[T]) -> None:
        self._check()
        self._inner.update(values)

    def clear(self) -> None:
        self._check()
        self._inner.clear()


class GuardedMapState:
    __slots__ = ("_check", "_inner")

    def __init__(self, inner: MapState, check: KeylessCheck) -> None:
        self._inner, self._check = inner, check

    def get(self, key: Any, default: Any = None) -> Any:
        self._check()
        return self._inner.get(key, default)

    def put(self, key: Any, value: Any) -> None:
        self._check()
        self._inner.put(key, value)

    def contains(self, key: Any) -> bool:
        self._check()
        return self._inner.contains(key)

    def remove(self, key: Any) -> None:
        self._check()
        self._inner.remove(key)

    def items(self) -> list[tuple[Any, Any]]:
        self._check()
        return self._inner.items()

    def keys(self) -> list[Any]:
        self._check()
        return self._inner.keys()

    def values(self) -> list[Any]:
        self._check()
        return self._inner.values()

    def is_empty(self) -> bool:
        self._check()
        return self._inner.is_empty()

    def clear(self) -> None:
        self._check()
        self._inner.clear()


class BroadcastFunctionContext:
    """The `RuntimeContext` a `KeyedBroadcastProcessFunction.open` gets: the operator's, with keyed
    state handles that refuse use in `process_broadcast_element`."""

    __slots__ = ("_ctx", "_in_broadcast")

    def __init__(self, ctx: OperatorContext, in_broadcast: Callable[[], bool]) -> None:
        self._ctx = ctx
        self._in_broadcast = in_broadcast

    @property
    def subtask_index(self) -> int:
        return self._ctx.subtask_index

    @property
    def parallelism(self) -> int:
        return self._ctx.parallelism

    @property
    def max_parallelism(self) -> int:
        return self._ctx.max_parallelism

    @property
    def operator_uid(self) -> str:
        return self._ctx.operator_uid

    @property
    def attempt(self) -> int:
        return self._ctx.attempt

    def get_state(self, descriptor: ValueStateDescriptor[Any]) -> ValueState[Any]:
        inner = self._ctx.get_state(descriptor)
        return GuardedValueState(inner, KeylessCheck(descriptor.name, self._in_broadcast))

    def get_list_state(self, descriptor: ListStateDescriptor[Any]) -> ListState[Any]:
        inner = self._ctx.get_list_state(descriptor)
        return GuardedListState(inner, KeylessCheck(descriptor.name, self._in_broadcast))

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        inner = self._ctx.get_map_state(descriptor)
        return GuardedMapState(inner, KeylessCheck(descriptor.name, self._in_broadcast))

    def get_operator_list_state(self, name: str) -> list[Any]:
        return self._ctx.get_operator_list_state(name)

    def get_union_list_state(self, name: str) -> list[Any]:
        return self._ctx.get_union_list_state(name)

    def get_broadcast_state(self, name: str) -> dict[Any, Any]:
        return self._ctx.get_broadcast_state(name)

    def current_processing_time(self) -> int:
        return self._ctx.current_processing_time()
