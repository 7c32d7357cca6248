"""`KeyedStream.window(...)`: a keyed stream cut into event-time windows, and what runs on each window."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.engine.operators.keyed_window import KeyedWindowOperator
from sluice.engine.operators.window import WindowOperator
from sluice.functions import AggregateFunction, ProcessWindowFunction
from sluice.side_outputs import OutputTag
from sluice.windows import EventTimeSessionWindows

if TYPE_CHECKING:
    from sluice.api.datastream import DataStream, KeyedStream
    from sluice.windows import WindowAssigner


@dataclasses.dataclass(frozen=True)
class _Lateness:
    allowed_ms: int = 0
    late_tag: OutputTag | None = None


class WindowedStream:
    def __init__(
        self, keyed: KeyedStream, assigner: WindowAssigner, lateness: _Lateness = _Lateness()
    ) -> None:
        self._keyed = keyed
        self._assigner = assigner
        self._lateness = lateness

    def allowed_lateness_millis(self, ms: int) -> WindowedStream:
        """Keeps each window `ms` past its end: a record that arrives meanwhile fires it again."""
        if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
            raise ValueError(
                f"allowed_lateness_millis needs a positive whole number of milliseconds, got {ms!r} "
                "(leave it out for no lateness)"
            )
        return WindowedStream(self._keyed, self._assigner, dataclasses.replace(self._lateness, allowed_ms=ms))

    def side_output_late_data(self, tag: OutputTag) -> WindowedStream:
        """Records too late for every window they belong to go to side output `tag` instead of being
        dropped; read them with `get_side_output(tag)` on the stream the window returns."""
        if not isinstance(tag, OutputTag):
            raise TypeError(f"side_output_late_data needs a sluice.OutputTag, got {tag!r}")
        return WindowedStream(self._keyed, self._assigner, dataclasses.replace(self._lateness, late_tag=tag))

    def reduce(
        self, fn: Callable[[Any, Any], Any], uid: str | None = None, name: str | None = None
    ) -> DataStream:
        return self._window(uid, name, reduce=fn)

    def aggregate(self, fn: AggregateFunction, uid: str | None = None, name: str | None = None) -> DataStream:
        if not isinstance(fn, AggregateFunction):
            raise TypeError("aggregate() needs a sluice.AggregateFunction")
        if isinstance(self._assigner, EventTimeSessionWindows) and type(fn).merge is AggregateFunction.merge:
            raise TypeError(
                f"aggregate() over session windows: {type(fn).__name__} must implement merge(first, second), "
                "because two sessions of a key merge into one when a record bridges them"
            )
        return self._window(uid, name, aggregate=fn)

    def process(
        self, fn: ProcessWindowFunction, uid: str | None = None, name: str | None = None
    ) -> DataStream:
        if not isinstance(fn, ProcessWindowFunction):
            raise TypeError("process() on a windowed stream needs a sluice.ProcessWindowFunction")
        return self._window(uid, name, process=fn)

    def _window(self, uid: str | None, name: str | None, **function: Any) -> DataStream:
        key, assigner, lateness = self._keyed.key_selector, self._assigner, self._lateness
        late_tag = lateness.late_tag.name if lateness.late_tag is not None else None
        simple = (
            not isinstance(assigner, EventTimeSessionWindows)
            and lateness == _Lateness()
            and "process" not in function
        )
        if simple and not isinstance(assigner, EventTimeSessionWindows):
            # Windows that fire once and fold as they go: the operator tuned for that.
            factory: Any = lambda u: WindowOperator(u, assigner, key, **function)  # noqa: E731
        else:
            factory = lambda u: KeyedWindowOperator(  # noqa: E731
                u, assigner, key, allowed_lateness_ms=lateness.allowed_ms, late_tag=late_tag, **function
            )
        stream = self._keyed._then("window", uid, name, factory, True)
        if late_tag is not None:
            stream._node.declare_side_output(late_tag, "late data")
        return stream
