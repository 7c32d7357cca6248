"""State TTL on both backends, with a clock the test moves: expired values are never returned, expired
entries leave the backend (lazily and by incremental cleanup), and expiry survives a snapshot."""

from __future__ import annotations

from typing import Any

import pytest

import sluice
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, StateTtl, ValueStateDescriptor
from sluice.state.keyed import KeyedStateBackend
from sluice.state.ttl import CLEANUP_PER_ACCESS, TtlListState, TtlMapState, TtlStates, TtlValueState

from ._chains import new_backend

__all__ = ["new_backend"]  # the fixture (a backend of each kind), used by name


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def value_state(
    backend: KeyedStateBackend,
    clock: Clock,
    ttl: StateTtl,
    states: TtlStates | None = None,
    default: Any = None,
) -> tuple[TtlValueState[Any], TtlStates]:
    states = states or TtlStates(clock)
    inner: Any = backend.value_state(ValueStateDescriptor("v"))
    return TtlValueState(inner, default, states.expiry(backend, "v", ttl)), states


def test_an_expired_value_is_never_returned_and_leaves_the_backend(new_backend: Any) -> None:
    backend, clock = new_backend(), Clock()
    state, _ = value_state(backend, clock, StateTtl(1000), default=-1)
    backend.current_key = "a"
    state.update(5)
    clock.now += 999
    assert state.value() == 5
    clock.now += 1
    assert state.value() == -1, "expired at exactly write time + ttl"
    assert backend.keys("v") == []


def test_on_read_and_write_restarts_the_time_to_live_on_read(new_backend: Any) -> None:
    backend, clock = new_backend(), Clock()
    on_write, states = value_state(backend, clock, StateTtl(1000))
    backend.current_key = "a"
    on_write.update(1)
    inner = backend.value_state(ValueStateDescriptor("r"))
    on_read: TtlValueState[Any] = TtlValueState(
        inner, None, states.expiry(backend, "r", StateTtl(1000, "on_read_and_write"))
    )
    on_read.update(2)
    for _ in range(5):
        clock.now += 600
        assert on_read.value() == 2, "each read gives it another second"
    assert on_write.value() is None


def test_list_elements_expire_one_by_one(new_backend: Any) -> None:
    backend, clock = new_backend(), Clock()
    states = TtlStates(clock)
    lst: TtlListState[Any] = TtlListState(
        backend.list_state(ListStateDescriptor("l")), states.expiry(backend, "l", StateTtl(100))
    )
    backend.current_key = 7
    lst.add("old")
    clock.now += 60
    lst.add_all(["new", "newer"])
    clock.now += 50
    assert lst.get() == ["new", "newer"]
    clock.now += 60
    assert lst.get() == []
    assert backend.keys("l") == []


def test_map_entries_expire_one_by_one(new_backend: Any) -> None:
    backend, clock = new_backend(), Clock()
    states = TtlStates(clock)
    mp = TtlMapState(backend.map_state(MapStateDescriptor("m")), states.expiry(backend, "m", StateTtl(100)))
    backend.current_key = "k"
    mp.put("x", 1)
    clock.now += 60
    mp.put("y", 2)
    clock.now += 50
    assert mp.get("x") is None and not mp.contains("x")
    assert mp.items() == [("y", 2)]
    assert mp.get("y") == 2
    clock.now += 60
    assert mp.is_empty()


def test_an_open_key_space_reaches_a_steady_state_size(new_backend: Any) -> None:
    """Ever-new keys, each written once and never read again: incremental cleanup removes them."""
    backend, clock = new_backend(), Clock()
    state, _ = value_state(backend, clock, StateTtl(1000))
    sizes = []
    for i in range(20_000):
        clock.now += 1  # one new key per millisecond: about 1000 live at any time
        backend.current_key = f"user-{i}"
        state.update(i)
        if i % 1000 == 999:
            sizes.append(len(backend.keys("v")))
    assert max(sizes) <= 1000 + CLEANUP_PER_ACCESS, sizes
    assert min(sizes[2:]) >= 999, "what has not expired is kept"


def test_expiry_survives_a_snapshot_and_restore_and_sweeps_keys_nobody_reads(new_backend: Any) -> None:
    before, clock = new_backend(), Clock()
    state, _ = value_state(before, clock, StateTtl(1000))
    for key in range(50):
        before.current_key = key
        state.update(key * 10)
    clock.now += 500
    for key in range(50, 60):
        before.current_key = key
        state.update(key * 10)
    snapshot = before.begin_snapshot()
    snapshot.open_view()
    frames = [(t.name, t.kind, dict(t.entries.items())) for t in snapshot.tables]
    snapshot.release()

    after = new_backend()
    for name, kind, entries in frames:
        after.restore_frame(name, kind, entries, [])
    restored, states = value_state(after, clock, StateTtl(1000))
    after.current_key = 55
    assert restored.value() == 550
    clock.now += 500  # keys 0..49 were written 1000 ms ago: expired
    after.current_key = 3
    assert restored.value() is None
    states.sweep()  # at a checkpoint: keys nobody reads any more go too
    assert sorted(after.keys("v")) == list(range(50, 60))
    clock.now += 500
    states.sweep()
    assert after.keys("v") == []


def test_ttl_through_the_runtime_context(new_backend: Any) -> None:
    from sluice.engine.context import Metrics, OperatorContext

    ctx = OperatorContext(
        operator_uid="op",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        attempt=0,
        metrics=Metrics(),
        keyed=True,
    )
    try:
        clock = Clock()
        ctx.ttl_states = TtlStates(clock)
        assert ctx.keyed_backend is not None
        ctx.keyed_backend.current_key = "a"
        count = ctx.get_state(sluice.ValueStateDescriptor("count", default=0, ttl=sluice.StateTtl(10)))
        count.update(3)
        assert count.value() == 3
        clock.now += 10
        assert count.value() == 0
    finally:
        if ctx.keyed_backend is not None:
            ctx.keyed_backend.close()


def test_bad_ttl_is_refused() -> None:
    for bad in (0, -5, 1.5):
        with pytest.raises(ValueError, match="StateTtl needs a positive whole number"):
            StateTtl(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='update must be "on_write" or "on_read_and_write"'):
        StateTtl(10, update="on_read")
    with pytest.raises(TypeError, match=r"ttl must be a sluice\.StateTtl"):
        ValueStateDescriptor("v", ttl=10)  # type: ignore[arg-type]
