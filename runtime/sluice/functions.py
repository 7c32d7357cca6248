"""User function interfaces.

Plain callables work for `map`, `filter`, `flat_map`, `key_by` and `reduce`. Subclass `Function` (or one
of the classes below) to get the lifecycle hooks of FLIP-147: `open` when the subtask starts, `finish`
once all input is consumed and the job drains (it may return records to emit), and `close` to release
resources, which is also called when the task fails or the job stops without draining.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sluice.side_outputs import OutputTag
    from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
    from sluice.state.keyed import ListState, MapState, ValueState
    from sluice.windows import TimeWindow


class RuntimeContext(Protocol):
    """What a running function can see of its subtask and reach of its state."""

    @property
    def subtask_index(self) -> int: ...
    @property
    def parallelism(self) -> int: ...
    @property
    def max_parallelism(self) -> int: ...
    @property
    def operator_uid(self) -> str: ...
    @property
    def attempt(self) -> int: ...

    def get_state(self, descriptor: ValueStateDescriptor[Any]) -> ValueState[Any]: ...
    def get_list_state(self, descriptor: ListStateDescriptor[Any]) -> ListState[Any]: ...
    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState: ...
    def get_operator_list_state(self, name: str) -> list[Any]: ...
    def get_union_list_state(self, name: str) -> list[Any]: ...
    def get_broadcast_state(self, name: str) -> dict[Any, Any]: ...


class TimerService(Protocol):
    def current_watermark(self) -> int: ...
    def current_processing_time(self) -> int: ...
    def register_event_time_timer(self, timestamp: int) -> None: ...
    def register_processing_time_timer(self, timestamp: int) -> None: ...
    def delete_event_time_timer(self, timestamp: int) -> None: ...
    def delete_processing_time_timer(self, timestamp: int) -> None: ...


class KeyedContext(Protocol):
    """Passed to `process_element` and `on_timer` of a keyed process function."""

    @property
    def key(self) -> Any: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def time_domain(self) -> str | None:
        """In `on_timer`: "event" or "processing"; None in `process_element`."""

    @property
    def timer_service(self) -> TimerService: ...

    def output(self, tag: OutputTag, value: Any) -> None:
        """Sends `value` to side output `tag` (read it with `DataStream.get_side_output(tag)`), with
        the current record's timestamp (the timer's in `on_timer`)."""


class Function:
    """Base of user functions that want lifecycle hooks."""

    def open(self, ctx: RuntimeContext) -> None:
        """Called once per subtask before the first record, after state is restored."""

    def finish(self) -> Iterable[Any] | None:
        """Called when the input has ended and the job drains; may return records to emit."""
        return None

    def close(self) -> None:
        """Releases resources. Called on every end of the subtask: finished, failed or stopped."""


class MapFunction(Function):
    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FilterFunction(Function):
    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class FlatMapFunction(Function):
    def flat_map(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class ProcessFunction(Function):
    """A non-keyed function over each record; returns (or yields) the records to emit."""

    def process_element(self, value: Any, timestamp: int | None) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """A function over a keyed stream with keyed state and timers."""

    def process_element(self, value: Any, ctx: KeyedContext) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: KeyedContext) -> Iterable[Any] | None:
        return None


class AggregateFunction:
    """Incremental window aggregation: accumulate records, then turn the accumulator into a result."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, first: Any, second: Any) -> Any:
        """One accumulator holding what both hold; session windows need it when two sessions merge."""
        raise NotImplementedError(
            f"{type(self).__name__}.merge is not implemented; session windows merge accumulators"
        )


class ProcessWindowFunction(Function):
    """Called once per firing of a window with every element the window holds (kept in state until the
    window is cleaned up). Returns (or yields) the records to emit; they carry the timestamp
    `window.end - 1`."""

    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> Iterable[Any] | None:
        raise NotImplementedError


class CoProcessFunction(Function):
    """A function over two connected streams (`a.connect(b).process(...)`): each input has its own
    method; the returned (or yielded) records go to one output. Without keys, state is operator state
    (`ctx.get_operator_list_state` in `open`)."""

    def process_element1(self, value: Any, timestamp: int | None) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_element2(self, value: Any, timestamp: int | None) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedCoProcessFunction(Function):
    """A function over two connected streams keyed alike (`a.connect(b).key_by(ka, kb)`): both
    methods see the keyed state and timers of the current key, as in a `KeyedProcessFunction`."""

    def process_element1(self, value: Any, ctx: KeyedContext) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_element2(self, value: Any, ctx: KeyedContext) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: KeyedContext) -> Iterable[Any] | None:
        return None


class BroadcastContext(KeyedContext, Protocol):
    """The context of a `KeyedBroadcastProcessFunction`."""

    def broadcast_state(self, name: str) -> Mapping[Any, Any]:
        """Broadcast state `name`: a read-only mapping in `process_element` and `on_timer`, a mutable
        dict in `process_broadcast_element` (the same on every subtask, because every subtask sees
        every broadcast element)."""


class KeyedBroadcastProcessFunction(Function):
    """The broadcast state pattern: `keyed.connect(rules.broadcast()).process(fn, uid=...)`.

    `process_element` sees each keyed record with its key's state and timers and reads the broadcast
    state; `process_broadcast_element` sees every broadcast record (on every subtask) and is the only
    place that may change the broadcast state. No key is current there: timers and keyed state are
    refused with a TypeError (it would not be any real key's state).
    """

    def process_element(self, value: Any, ctx: BroadcastContext) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: BroadcastContext) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: BroadcastContext) -> Iterable[Any] | None:
        return None


class JoinContext(Protocol):
    """Passed to `ProcessJoinFunction.process_element`."""

    @property
    def left_timestamp(self) -> int: ...
    @property
    def right_timestamp(self) -> int: ...
    @property
    def timestamp(self) -> int:
        """The pair's timestamp: the later of the two (what the emitted records carry)."""

    @property
    def key(self) -> Any: ...


class ProcessJoinFunction(Function):
    """Called for each pair an interval join finds; returns (or yields) the records to emit."""

    def process_element(self, left: Any, right: Any, ctx: JoinContext) -> Iterable[Any] | None:
        raise NotImplementedError
