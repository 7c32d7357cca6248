"""Joins of two streams: window joins (`a.join(b).where(ka).equal_to(kb).window(w).apply(fn)`) and
interval joins (`a.key_by(ka).interval_join(b.key_by(kb)).between(lower, upper).process(fn)`).

A window join is Flink's: both sides, tagged with their side, go into one keyed window of the given
assigner (tumbling, sliding or session, merging included); when a window fires its buffers yield every
(left, right) pair of its key, and are dropped with the window. An interval join is a two-input
operator of its own (`sluice.engine.operators.interval_join`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sluice.api._callsite import user_call_site
from sluice.api.connected import two_input_node
from sluice.engine.operators.interval_join import IntervalJoin, IntervalJoinOperator
from sluice.functions import ProcessJoinFunction, ProcessWindowFunction
from sluice.graph.transformations import Partitioning, PartitionKind
from sluice.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowAssigner,
)

if TYPE_CHECKING:
    from sluice.api.datastream import DataStream, KeyedStream
    from sluice.windows import TimeWindow

KeySelector = Callable[[Any], Any]
_ASSIGNERS = (TumblingEventTimeWindows, SlidingEventTimeWindows, EventTimeSessionWindows)
JoinFn = Callable[[Any, Any], Any]


def _check_key(key: Any, what: str) -> None:
    if not callable(key):
        raise TypeError(
            f"{what} at {user_call_site()} needs a key selector (a function of the record), got {key!r}"
        )


class JoinedStreams:
    """`a.join(b)`: say the key of each side with `where` and `equal_to`, then the window."""

    def __init__(self, left: DataStream, right: DataStream, key_left: KeySelector | None = None) -> None:
        if left._env is not right._env:
            raise ValueError(
                f"join at {user_call_site()}: both streams must come from the same StreamEnvironment"
            )
        self._left = left
        self._right = right
        self._key_left = key_left

    def where(self, key_left: KeySelector) -> JoinedStreams:
        _check_key(key_left, "join(...).where")
        return JoinedStreams(self._left, self._right, key_left)

    def equal_to(self, key_right: KeySelector) -> JoinedKeys:
        _check_key(key_right, "join(...).equal_to")
        if self._key_left is None:
            raise ValueError(
                f"join(...).equal_to at {user_call_site()}: give the left key first: "
                "a.join(b).where(key_a).equal_to(key_b)"
            )
        return JoinedKeys(self._left, self._right, self._key_left, key_right)


class JoinedKeys:
    def __init__(
        self, left: DataStream, right: DataStream, key_left: KeySelector, key_right: KeySelector
    ) -> None:
        self._left, self._right = left, right
        self._keys = (key_left, key_right)

    def window(self, assigner: WindowAssigner) -> WindowJoin:
        if not isinstance(
            assigner, TumblingEventTimeWindows | SlidingEventTimeWindows | EventTimeSessionWindows
        ):
            raise TypeError(
                f"join(...).window at {user_call_site()} needs a window assigner (TumblingEventTimeWindows, "
                f"SlidingEventTimeWindows, EventTimeSessionWindows), got {assigner!r}"
            )
        return WindowJoin(self._left, self._right, self._keys, assigner)


class _PairsOfWindow(ProcessWindowFunction):
    """Every (left, right) pair of one key's window."""

    def __init__(self, fn: JoinFn) -> None:
        self.fn = fn

    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> Iterable[Any] | None:
        lefts = [v for side, v in elements if side == 0]
        rights = [v for side, v in elements if side == 1]
        fn = self.fn
        return [fn(left, right) for left in lefts for right in rights]


class WindowJoin:
    def __init__(
        self,
        left: DataStream,
        right: DataStream,
        keys: tuple[KeySelector, KeySelector],
        assigner: WindowAssigner,
    ) -> None:
        self._left, self._right = left, right
        self._keys = keys
        self._assigner = assigner

    def apply(self, fn: JoinFn, uid: str | None = None, name: str | None = None) -> DataStream:
        """An inner join: `fn(left, right)` for every pair of one key in one window, when it fires;
        the results carry the window's last timestamp (`end - 1`)."""
        if not callable(fn):
            raise TypeError(f"join(...).apply at {user_call_site()} needs a function (left, right) -> result")
        key_left, key_right = self._keys
        label = name or uid or "window-join"
        tagged_left = self._left.map(_Tag(0), name=f"{label}[left]")
        tagged_right = self._right.map(_Tag(1), name=f"{label}[right]")
        keyed = tagged_left.union(tagged_right).key_by(_SideKey(key_left, key_right))
        return keyed.window(self._assigner).process(_PairsOfWindow(fn), uid=uid, name=name)


class _Tag:
    def __init__(self, side: int) -> None:
        self.side = side

    def __call__(self, value: Any) -> tuple[int, Any]:
        return (self.side, value)


class _SideKey:
    def __init__(self, key_left: KeySelector, key_right: KeySelector) -> None:
        self.keys = (key_left, key_right)

    def __call__(self, tagged: tuple[int, Any]) -> Any:
        return self.keys[tagged[0]](tagged[1])


class IntervalJoinBuilder:
    """`a.key_by(ka).interval_join(b.key_by(kb))`: say the bounds with `between`."""

    def __init__(self, left: KeyedStream, right: KeyedStream) -> None:
        self._left, self._right = left, right

    def between(self, lower_ms: int, upper_ms: int) -> IntervalJoined:
        """Pairs a left row at `lt` with a right row at `rt` when `lt + lower_ms <= rt <= lt + upper_ms`."""
        for bound in (lower_ms, upper_ms):
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise TypeError(
                    f"interval_join(...).between at {user_call_site()} needs whole milliseconds, "
                    f"got {bound!r}"
                )
        if lower_ms > upper_ms:
            raise ValueError(
                f"interval_join(...).between at {user_call_site()}: lower bound {lower_ms} ms is above the "
                f"upper bound {upper_ms} ms, so no pair could ever match; swap them"
            )
        return IntervalJoined(self._left, self._right, lower_ms, upper_ms)


class IntervalJoined:
    def __init__(self, left: KeyedStream, right: KeyedStream, lower_ms: int, upper_ms: int) -> None:
        self._left, self._right = left, right
        self._bounds = (lower_ms, upper_ms)

    def process(
        self, fn: JoinFn | ProcessJoinFunction, uid: str | None = None, name: str | None = None
    ) -> DataStream:
        """`fn(left, right)` (or a ProcessJoinFunction's `process_element(left, right, ctx)`) for each
        pair; the results carry the later of the two timestamps."""
        if not callable(fn) and not isinstance(fn, ProcessJoinFunction):
            raise TypeError(
                f"interval_join(...).process at {user_call_site()} needs a function (left, right) -> result "
                f"or a sluice.ProcessJoinFunction, got {fn!r}"
            )
        keys = (self._left.key_selector, self._right.key_selector)
        lower, upper = self._bounds
        return two_input_node(
            self._left,
            self._right,
            "interval_join",
            uid,
            name,
            lambda u: IntervalJoinOperator(u, keys, IntervalJoin(lower, upper, fn)),
            (Partitioning(PartitionKind.HASH, keys[0]), Partitioning(PartitionKind.HASH, keys[1])),
        )
