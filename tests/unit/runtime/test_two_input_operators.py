"""Two-input operators on their own: co-process, broadcast state, the interval join's pairs and cleanup."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import sluice
from sluice.engine.operators.broadcast import KeyedBroadcastProcessOperator, ReadOnlyBroadcastState
from sluice.engine.operators.co_process import CoProcessOperator, KeyedCoProcessOperator
from sluice.engine.operators.interval_join import IntervalJoin, IntervalJoinOperator
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

from ._support import start


class Tagging(sluice.CoProcessFunction):
    def process_element1(self, value: Any, timestamp: int | None) -> Any:
        return [("first", value, timestamp)]

    def process_element2(self, value: Any, timestamp: int | None) -> Any:
        if value == "bad":
            raise ValueError("bad record")
        return [("second", value, timestamp)]


def test_a_co_process_function_gets_each_input_in_its_own_method() -> None:
    op = CoProcessOperator("co", Tagging())
    out, _ = start(op)
    op.process_input(0, ["a"], [5])
    op.process_input(1, ["b"], None)
    assert out.records == [("first", "a", 5), ("second", "b", None)]


def test_a_co_process_function_with_on_error_skip_drops_only_the_failing_record() -> None:
    op = CoProcessOperator("co", Tagging(), on_error="skip")
    out, ctx = start(op)
    op.process_input(1, ["x", "bad", "y"], [1, 2, 3])
    assert out.records == [("second", "x", 1), ("second", "y", 3)]
    assert ctx.metrics.records_skipped == 1


class LastOfOtherInput(sluice.KeyedCoProcessFunction):
    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.seen = ctx.get_state(ValueStateDescriptor("seen"))

    def process_element1(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        return [(ctx.key, value, self.seen.value())]

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        self.seen.update(value)
        ctx.timer_service.register_event_time_timer(100)
        return None

    def on_timer(self, timestamp: int, ctx: sluice.KeyedContext) -> Any:
        return [("timer", ctx.key, self.seen.value())]


def test_a_keyed_co_process_function_shares_one_keyed_state_between_its_inputs() -> None:
    op = KeyedCoProcessOperator("co", (lambda v: v[0], lambda v: v["k"]), LastOfOtherInput())
    out, _ = start(op)
    op.process_input(1, [{"k": "a", "v": 1}], [10])
    op.process_input(0, [("a", "x"), ("b", "y")], [20, 20])
    op.process_watermark(100)
    assert out.records == [
        ("a", ("a", "x"), {"k": "a", "v": 1}),
        ("b", ("b", "y"), None),
        ("timer", "a", {"k": "a", "v": 1}),
    ]


def test_a_keyed_co_process_operator_refuses_a_function_of_the_wrong_kind() -> None:
    with pytest.raises(TypeError, match="KeyedCoProcessFunction"):
        KeyedCoProcessOperator("co", (lambda v: v, lambda v: v), Tagging())  # type: ignore[arg-type]


class Rules(sluice.KeyedBroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        rules = ctx.broadcast_state("rules")
        if value[1] == "write":
            rules["x"] = 1
        return [(ctx.key, rules.get(value[0]))]

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.broadcast_state("rules")[value[0]] = value[1]
        return None


def test_broadcast_state_is_written_by_broadcast_records_and_read_by_keyed_ones() -> None:
    op = KeyedBroadcastProcessOperator("rules", lambda v: v[0], Rules())
    out, ctx = start(op)
    op.process_input(0, [("a", "read")], None)
    op.process_input(1, [("a", 10), ("b", 20)], None)
    op.process_input(0, [("a", "read"), ("b", "read")], None)
    assert out.records == [("a", None), ("a", 10), ("b", 20)]
    assert op.snapshot_state(1) is not None
    assert ctx.operator_state.broadcast == {"rules": {"a": 10, "b": 20}}


def test_a_keyed_record_that_writes_broadcast_state_gets_a_clear_error() -> None:
    op = KeyedBroadcastProcessOperator("rules", lambda v: v[0], Rules())
    start(op)
    with pytest.raises(TypeError, match=r"read-only in process_element.*process_broadcast_element"):
        op.process_input(0, [("a", "write")], None)


class TimerOnBroadcast(Rules):
    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service.register_event_time_timer(10)


def test_a_broadcast_record_cannot_register_a_timer_because_it_has_no_key() -> None:
    op = KeyedBroadcastProcessOperator("rules", lambda v: v[0], TimerOnBroadcast())
    start(op)
    with pytest.raises(TypeError, match="a broadcast record has no key"):
        op.process_input(1, [("a", 1)], [5])


class KeyedStateOnBroadcast(Rules):
    """Keeps a count per key in keyed state, and (wrongly) touches it for broadcast records too."""

    def __init__(self, use: tuple[str, str, tuple[Any, ...]]) -> None:
        self.use = use

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.count = ctx.get_state(ValueStateDescriptor("count", default=0))
        self.seen = ctx.get_list_state(ListStateDescriptor("seen"))
        self.by_rule = ctx.get_map_state(MapStateDescriptor("by_rule"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        self.seen.add(value[1])
        self.by_rule.put(value[1], ctx.key)
        return [(ctx.key, self.count.value(), self.seen.get(), self.by_rule.items())]

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        state, method, args = self.use
        getattr(getattr(self, state), method)(*args)
        return None


KEYED_STATE_USES = [
    ("count", "value", ()), ("count", "update", (7,)), ("count", "clear", ()),
    ("seen", "get", ()), ("seen", "add", ("x",)), ("seen", "add_all", (["x"],)),
    ("seen", "update", (["x"],)), ("seen", "clear", ()),
    ("by_rule", "get", ("r",)), ("by_rule", "put", ("r", 1)), ("by_rule", "contains", ("r",)),
    ("by_rule", "remove", ("r",)), ("by_rule", "items", ()), ("by_rule", "keys", ()),
    ("by_rule", "values", ()), ("by_rule", "is_empty", ()), ("by_rule", "clear", ()),
]  # fmt: skip


@pytest.mark.parametrize("backend", ["heap", "disk"])
@pytest.mark.parametrize("use", KEYED_STATE_USES, ids=lambda use: f"{use[0]}.{use[1]}")
def test_keyed_state_used_for_a_broadcast_record_gets_a_clear_error(
    backend: str, use: tuple[str, str, tuple[Any, ...]]
) -> None:
    op = KeyedBroadcastProcessOperator("rules", lambda v: v[0], KeyedStateOnBroadcast(use))
    out, _ = start(op, state_backend=backend)
    try:
        op.process_input(0, [("a", "r1")], None)
        # Unguarded, the last key ("a") would still be current here: a read would see its state and
        # a write change it.
        refused = r"keyed state '\w+' used in process_broadcast_element.*in process_element or on_timer"
        with pytest.raises(TypeError, match=refused):
            op.process_input(1, [("rule", 1)], None)
        op.process_input(0, [("a", "r2")], None)
        assert out.records[-1] == ("a", 2, ["r1", "r2"], [("r1", "a"), ("r2", "a")])
    finally:
        op.close()


def test_keyed_state_of_a_broadcast_function_works_as_usual_for_keyed_records_and_timers() -> None:
    class CountThenTimer(KeyedStateOnBroadcast):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service.register_event_time_timer(10)
            return super().process_element(value, ctx)

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            return [("timer", ctx.key, self.count.value())]

        def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
            ctx.broadcast_state("rules")[value[0]] = value[1]

    op = KeyedBroadcastProcessOperator("rules", lambda v: v[0], CountThenTimer(("count", "value", ())))
    out, _ = start(op)
    op.process_input(0, [("a", "r1"), ("b", "r1"), ("a", "r2")], [1, 2, 3])
    op.process_input(1, [("rule", 1)], [4])
    op.process_watermark(10)
    assert [r for r in out.records if r[0] == "timer"] == [("timer", "a", 2), ("timer", "b", 1)]


def test_read_only_broadcast_state_refuses_every_kind_of_change() -> None:
    state = ReadOnlyBroadcastState("rules", {"a": 1})
    assert dict(state) == {"a": 1} and state["a"] == 1 and len(state) == 1
    changes: list[tuple[str, tuple[Any, ...]]] = [
        ("__setitem__", ("b", 2)),
        ("__delitem__", ("a",)),
        ("update", ({"b": 2},)),
        ("pop", ("a",)),
        ("popitem", ()),
        ("clear", ()),
        ("setdefault", ("c", 3)),
    ]
    for method, args in changes:
        with pytest.raises(TypeError, match="read-only"):
            getattr(state, method)(*args)
    assert dict(state) == {"a": 1}


def _interval(lower: int, upper: int, join: Any = lambda left, right: (left, right)) -> IntervalJoinOperator:
    return IntervalJoinOperator("join", (lambda v: v[0], lambda v: v[0]), IntervalJoin(lower, upper, join))


def _buffered(op: IntervalJoinOperator) -> int:
    backend = op.ctx.keyed_backend
    assert backend is not None and op.join.buffers is not None
    total = 0
    for key in ("a", "b"):
        backend.current_key = key
        total += sum(len(rows) for buffer in op.join.buffers for rows in buffer.values())
    return total


def test_an_interval_join_pairs_rows_within_the_bounds_like_a_nested_loop() -> None:
    lefts = [("a", t) for t in range(0, 60, 7)] + [("b", t) for t in range(0, 60, 11)]
    rights = [("a", t) for t in range(0, 60, 5)] + [("b", t) for t in range(3, 60, 13)]
    op = _interval(-4, 6)
    out, _ = start(op)
    # Interleaved, as two inputs arrive: the pairs do not depend on which side came first.
    for left, right in itertools.zip_longest(lefts, rights):
        if left is not None:
            op.process_input(0, [left], [left[1]])
        if right is not None:
            op.process_input(1, [right], [right[1]])
    expected = {
        ((lk, lt), (rk, rt)) for lk, lt in lefts for rk, rt in rights if lk == rk and lt - 4 <= rt <= lt + 6
    }
    assert sorted(out.records) == sorted(expected)
    assert all(ts == max(l[1], r[1]) for (l, r), ts in out.timestamped)  # noqa: E741


def test_an_interval_join_drops_rows_the_watermark_passed_beyond_the_bound() -> None:
    op = _interval(-10, 10)
    start(op)
    sizes = []
    for step in range(20):
        base = step * 100
        op.process_input(0, [("a", base), ("b", base + 1)], [base, base + 1])
        op.process_input(1, [("a", base + 5)], [base + 5])
        op.process_watermark(base + 50)
        sizes.append(_buffered(op))
    # Steady state: what is buffered does not grow with the input.
    assert max(sizes) <= 3 and sizes[-1] == sizes[5]


def test_an_interval_join_drops_late_rows_and_counts_them() -> None:
    op = _interval(0, 10)
    out, ctx = start(op)
    op.process_watermark(100)
    op.process_input(0, [("a", 50)], [50])
    op.process_input(1, [("a", 55)], [55])
    assert out.records == [] and ctx.metrics.late_records_dropped == 2


def test_an_interval_join_needs_timestamps() -> None:
    op = _interval(0, 10)
    start(op)
    with pytest.raises(ValueError, match=r"no timestamp.*assign_timestamps"):
        op.process_input(1, [("a", 1)], None)


class Describe(sluice.ProcessJoinFunction):
    def process_element(self, left: Any, right: Any, ctx: Any) -> Any:
        yield (ctx.key, ctx.left_timestamp, ctx.right_timestamp, ctx.timestamp)


def test_a_process_join_function_sees_both_timestamps_and_the_key() -> None:
    op = _interval(-5, 5, Describe())
    out, _ = start(op)
    op.process_input(1, [("a", 0)], [12])
    op.process_input(0, [("a", 0)], [9])
    assert out.timestamped == [(("a", 9, 12, 12), 12)]
