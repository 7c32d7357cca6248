"""What the join steps add, and the checks on each.

A window join (`a.join(b).where(ka).equal_to(kb).window(w).apply(fn)`) is Flink's: both sides, tagged
with their side (`Tag`), go into one keyed window of the given assigner (tumbling, sliding or session,
merging included), keyed by each side's own key (`SideKey`); when a window fires, `PairsOfWindow` yields
every (left, right) pair of its key, and the buffers are dropped with the window. An interval join
(`a.key_by(ka).interval_join(b.key_by(kb)).between(lower, upper).process(fn)`) is a two-input operator
of its own (`sluice.engine.operators.interval_join`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sluice.api._callsite import user_call_site
from sluice.api._graph import Inputs, KeySelector, PipelineGraph
from sluice.engine.operators.interval_join import IntervalJoin, IntervalJoinOperator
from sluice.functions import ProcessJoinFunction, ProcessWindowFunction
from sluice.graph.transformations import Partitioning, PartitionKind, Transformation
from sluice.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    WindowAssigner,
)

JoinFn = Callable[[Any, Any], Any]


def check_key(key: object, what: str) -> None:
    if not callable(key):
        raise TypeError(
            f"{what} at {user_call_site()} needs a key selector (a function of the record), got {key!r}"
        )


def check_assigner(assigner: WindowAssigner) -> None:
    if not isinstance(assigner, TumblingEventTimeWindows | SlidingEventTimeWindows | EventTimeSessionWindows):
        raise TypeError(
            f"join(...).window at {user_call_site()} needs a window assigner (TumblingEventTimeWindows, "
            f"SlidingEventTimeWindows, EventTimeSessionWindows), got {assigner!r}"
        )


def check_pair_function(fn: object) -> None:
    if not callable(fn):
        raise TypeError(f"join(...).apply at {user_call_site()} needs a function (left, right) -> result")


class Tag:
    """Marks a record with its side of the join: 0 left, 1 right."""

    def __init__(self, side: int) -> None:
        self.side = side

    def __call__(self, value: Any) -> tuple[int, Any]:
        return (self.side, value)


class SideKey:
    """The key of a tagged record, by its own side's key selector."""

    def __init__(self, key_left: KeySelector, key_right: KeySelector) -> None:
        self.keys = (key_left, key_right)

    def __call__(self, tagged: tuple[int, Any]) -> Any:
        return self.keys[tagged[0]](tagged[1])


class PairsOfWindow(ProcessWindowFunction):
    """Every (left, right) pair of one key's window."""

    def __init__(self, fn: JoinFn) -> None:
        self.fn = fn

    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> Iterable[Any] | None:
        lefts = [v for side, v in elements if side == 0]
        rights = [v for side, v in elements if side == 1]
        fn = self.fn
        return [fn(left, right) for left in lefts for right in rights]


def check_bounds(lower_ms: int, upper_ms: int) -> None:
    """The checks of `interval_join(...).between(lower_ms, upper_ms)`."""
    for bound in (lower_ms, upper_ms):
        if not isinstance(bound, int) or isinstance(bound, bool):
            raise TypeError(
                f"interval_join(...).between at {user_call_site()} needs whole milliseconds, got {bound!r}"
            )
    if lower_ms > upper_ms:
        raise ValueError(
            f"interval_join(...).between at {user_call_site()}: lower bound {lower_ms} ms is above the "
            f"upper bound {upper_ms} ms, so no pair could ever match; swap them"
        )


def add_interval_join(
    graph: PipelineGraph,
    sides: tuple[Inputs, Inputs],
    keys: tuple[KeySelector, KeySelector],
    bounds: tuple[int, int],
    fn: JoinFn | ProcessJoinFunction,
    uid: str | None,
    name: str | None,
) -> Transformation:
    """The interval-join operator of two keyed streams, each partitioned by its own key."""
    if not callable(fn) and not isinstance(fn, ProcessJoinFunction):
        raise TypeError(
            f"interval_join(...).process at {user_call_site()} needs a function (left, right) -> result "
            f"or a sluice.ProcessJoinFunction, got {fn!r}"
        )
    lower, upper = bounds
    return graph.add_two_input(
        "interval_join",
        uid,
        name,
        lambda u: IntervalJoinOperator(u, keys, IntervalJoin(lower, upper, fn)),
        sides,
        (Partitioning(PartitionKind.HASH, keys[0]), Partitioning(PartitionKind.HASH, keys[1])),
    )
