"""Value, list and map state handles (`sluice.state.primitives`) behave the same on both backends,
whether a snapshot is being written or not, and every change they make reaches the next snapshot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.heap import HeapKeyedStateBackend
from sluice.state.keyed import BackendSnapshot, KeyedStateBackend
from sluice.state.primitives import TableListState, TableMapState, TableValueState

from ._chains import new_backend

__all__ = ["new_backend"]  # the fixture (a backend of each kind), used by name

# When the handles are used: with nothing frozen, while a snapshot is being written (the heap's
# copy-on-write layer takes the writes), and after a snapshot was released (the layer folded back).
MOMENTS = ("idle", "snapshot in flight", "after a snapshot")


def at(moment: str, backend: KeyedStateBackend) -> Callable[[], None]:
    """Brings `backend` to `moment`; returns what releases a snapshot still in flight."""
    if moment == "idle":
        return lambda: None
    backend.current_key = "seed"
    backend.value_state(ValueStateDescriptor[int]("seed")).update(1)
    snapshot = backend.begin_snapshot()
    if moment == "after a snapshot":
        snapshot.release()
        return lambda: None
    return snapshot.release


def changes(snapshot: BackendSnapshot, name: str) -> tuple[dict[Any, Any], set[Any]]:
    """The values table `name` hands out as written since the previous snapshot, and its removed keys."""
    table = next(t for t in snapshot.tables if t.name == name)
    assert isinstance(table.changed, dict)
    decode = table.decode or (lambda value: value)
    return {key: decode(value) for key, value in table.changed.items()}, set(table.removed)


@pytest.mark.parametrize("moment", MOMENTS)
def test_value_state_reads_its_default_until_updated_and_after_clear(new_backend: Any, moment: str) -> None:
    backend = new_backend()
    state = backend.value_state(ValueStateDescriptor("v", default=-1))
    release = at(moment, backend)
    backend.current_key = "a"
    assert state.value() == -1
    state.update(3)
    backend.current_key = "b"
    assert state.value() == -1
    state.update(None)  # a stored None is a value, not an absence
    assert state.value() is None
    backend.current_key = "a"
    assert state.value() == 3
    state.clear()
    assert state.value() == -1
    release()
    assert state.value() == -1
    backend.current_key = "b"
    assert state.value() is None


@pytest.mark.parametrize("moment", MOMENTS)
def test_list_state_adds_updates_and_clears(new_backend: Any, moment: str) -> None:
    backend = new_backend()
    items = backend.list_state(ListStateDescriptor[int]("items"))
    backend.current_key = "a"
    items.add(1)
    release = at(moment, backend)
    backend.current_key = "a"
    items.add(2)
    items.add_all([3, 4])
    items.add_all([])
    assert items.get() == [1, 2, 3, 4]
    got = items.get()
    got.append(99)  # what get() returns is the caller's own list
    assert items.get() == [1, 2, 3, 4]
    backend.current_key = "b"
    assert items.get() == []
    items.add_all([7])
    items.update([8, 9])
    assert items.get() == [8, 9]
    items.update([])  # an empty list is no list
    assert items.get() == []
    assert "b" not in backend.keys("items")
    backend.current_key = "a"
    items.clear()
    assert items.get() == []
    release()
    assert backend.keys("items") == []


@pytest.mark.parametrize("moment", MOMENTS)
def test_map_state_puts_reads_and_removes_entries(new_backend: Any, moment: str) -> None:
    backend = new_backend()
    seen = backend.map_state(MapStateDescriptor("seen"))
    backend.current_key = "a"
    seen.put("x", 1)
    release = at(moment, backend)
    backend.current_key = "a"
    seen.put("y", 2)
    seen.put("x", 10)
    assert (seen.get("x"), seen.get("z"), seen.get("z", 0)) == (10, None, 0)
    assert (seen.contains("y"), seen.contains("z")) == (True, False)
    assert (seen.items(), seen.keys(), seen.values()) == ([("x", 10), ("y", 2)], ["x", "y"], [10, 2])
    seen.remove("z")  # an entry that is not there
    seen.remove("x")
    assert (seen.items(), seen.is_empty()) == ([("y", 2)], False)
    backend.current_key = "b"
    assert (seen.items(), seen.keys(), seen.values(), seen.is_empty()) == ([], [], [], True)
    seen.remove("x")
    assert "b" not in backend.keys("seen")
    backend.current_key = "a"
    seen.remove("y")  # the last entry: the key goes with it
    assert seen.is_empty()
    assert "a" not in backend.keys("seen")
    seen.put("w", 5)
    seen.clear()
    release()
    assert (seen.is_empty(), backend.keys("seen")) == (True, [])


def test_a_list_or_map_changed_after_it_was_stored_is_kept_and_reaches_the_next_snapshot(
    new_backend: Any,
) -> None:
    """On the heap the stored container is changed in place, on disk a copy is written back: either way
    the change is kept and the next snapshot has the key's whole new value among its changes."""
    backend = new_backend()
    items = backend.list_state(ListStateDescriptor[int]("items"))
    seen = backend.map_state(MapStateDescriptor("seen"))
    backend.current_key = "a"
    items.add(1)
    seen.put("x", 1)
    seen.put("y", 2)
    backend.current_key = "b"
    seen.put("x", 1)
    backend.begin_snapshot().release()
    backend.current_key = "a"
    items.add(2)
    items.add_all([3])
    seen.put("z", 3)
    seen.remove("x")
    backend.current_key = "b"
    seen.remove("x")
    snapshot = backend.begin_snapshot()
    assert changes(snapshot, "items") == ({"a": [1, 2, 3]}, set())
    assert changes(snapshot, "seen") == ({"a": {"y": 2, "z": 3}}, {"b"})
    snapshot.release()
    backend.current_key = "a"
    assert (items.get(), seen.items()) == ([1, 2, 3], [("y", 2), ("z", 3)])


def test_value_list_and_map_writes_each_reach_the_next_snapshot_once(new_backend: Any) -> None:
    backend = new_backend()
    count = backend.value_state(ValueStateDescriptor("count", default=0))
    items = backend.list_state(ListStateDescriptor[int]("items"))
    seen = backend.map_state(MapStateDescriptor("seen"))
    for key in ("a", "b"):
        backend.current_key = key
        count.update(1)
        items.add(1)
        seen.put("x", 1)
    backend.begin_snapshot().release()
    backend.current_key = "a"
    count.update(2)
    items.update([5])
    seen.put("x", 2)
    backend.current_key = "b"
    count.clear()
    items.clear()
    seen.clear()
    snapshot = backend.begin_snapshot()
    assert changes(snapshot, "count") == ({"a": 2}, {"b"})
    assert changes(snapshot, "items") == ({"a": [5]}, {"b"})
    assert changes(snapshot, "seen") == ({"a": {"x": 2}}, {"b"})
    snapshot.release()
    nothing = backend.begin_snapshot()
    assert [changes(nothing, name) for name in ("count", "items", "seen")] == [({}, set())] * 3
    nothing.release()


def test_both_backends_hand_out_the_shared_handles(new_backend: Any) -> None:
    backend = new_backend()
    # The heap's value state writes its table's two hot methods out in it (see sluice.state.heap).
    assert isinstance(backend.value_state(ValueStateDescriptor("v")), TableValueState)
    assert type(backend.list_state(ListStateDescriptor[int]("l"))) is TableListState
    assert type(backend.map_state(MapStateDescriptor("m"))) is TableMapState


def test_the_shared_value_handle_over_a_heap_table_reads_and_writes_as_the_heaps_own() -> None:
    """The heap's value state writes its table's read and write out; the table's own `lend` and `put`,
    which the shared handle calls, must do the same, a snapshot held or not."""
    backend = HeapKeyedStateBackend(128)
    own = backend.value_state(ValueStateDescriptor[list[int]]("own", default=[]))
    shared: TableValueState[list[int]] = TableValueState(backend, backend.table("shared", "value"), [])
    backend.current_key = "a"
    for state in (own, shared):
        state.update([1])
    held = backend.begin_snapshot()
    for state in (own, shared):
        backend.current_key = "a"
        value = state.value()
        assert value == [1]
        value.append(2)  # changed in place while the snapshot is held: the snapshot keeps [1]
        backend.current_key = "b"
        assert state.value() == []
        state.update([9])
        state.clear()
        assert state.value() == []
    assert {t.name: dict(t.entries.items()) for t in held.tables} == {"own": {"a": [1]}, "shared": {"a": [1]}}
    held.release()
    backend.current_key = "a"
    assert own.value() == shared.value()
    shared.update([3])
    own.update([3])
    following = backend.begin_snapshot()
    assert changes(following, "own") == changes(following, "shared") == ({"a": [3]}, {"b"})
    following.release()
