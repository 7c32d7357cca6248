"""The broadcast state pattern: `keyed.connect(rules.broadcast()).process(KeyedBroadcastProcessFunction)`.

Input 0 is the keyed stream, input 1 the broadcast one: every subtask sees every broadcast record, so
broadcast state changed only in `process_broadcast_element` is the same on every subtask. That is why a
restore may take it from any one subtask and give it to all, at any new parallelism
(`sluice.checkpoint.restore`), and why keyed records may only read it: a write there would make the
subtasks differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

from sluice.engine.operators._keyless_guard import BroadcastFunctionContext
from sluice.engine.operators.keyed import KeyedProcessContext, KeyedProcessOperator
from sluice.functions import KeyedBroadcastProcessFunction
from sluice.side_outputs import OutputTag


class ReadOnlyBroadcastState(Mapping[Any, Any]):
    """Broadcast state as `process_element` and `on_timer` see it: readable, not writable."""

    __slots__ = ("_entries", "_name")

    def __init__(self, name: str, entries: dict[Any, Any]) -> None:
        self._name = name
        self._entries = entries

    def __getitem__(self, key: Any) -> Any:
        return self._entries[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ReadOnlyBroadcastState({self._name!r}, {self._entries!r})"

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"broadcast state {self._name!r} is read-only in process_element and on_timer: change it in "
            "process_broadcast_element, which every subtask runs for every broadcast record, so the "
            "state stays the same on all of them"
        )

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _refuse


class BroadcastContext(KeyedProcessContext):
    __slots__ = ("writable",)

    def __init__(self, op: KeyedProcessOperator) -> None:
        super().__init__(op)
        self.writable = False

    def broadcast_state(self, name: str) -> Mapping[Any, Any]:
        entries = self._op.ctx.operator_state.broadcast_state(name)
        return entries if self.writable else ReadOnlyBroadcastState(name, entries)

    def _keyless(self, what: str) -> None:
        if self.writable:
            raise TypeError(
                f"{what} in process_broadcast_element: a broadcast record has no key, and timers belong "
                "to a key; register them in process_element or on_timer"
            )

    def register_event_time_timer(self, timestamp: int) -> None:
        self._keyless("register_event_time_timer")
        super().register_event_time_timer(timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._keyless("register_processing_time_timer")
        super().register_processing_time_timer(timestamp)


class KeyedBroadcastProcessOperator(KeyedProcessOperator):
    two_inputs = True

    def __init__(
        self,
        uid: str,
        key_selector: Callable[[Any], Any],
        fn: KeyedBroadcastProcessFunction,
        on_error: str | OutputTag = "fail",
    ) -> None:
        super().__init__(uid, key_selector, fn, on_error)  # type: ignore[arg-type]

    def check_function(self, uid: str, fn: Any) -> None:
        if not isinstance(fn, KeyedBroadcastProcessFunction):
            raise TypeError(
                f"operator {uid!r}: process() on a keyed stream connected to a broadcast stream needs "
                "a sluice.KeyedBroadcastProcessFunction"
            )

    def make_context(self) -> BroadcastContext:
        return BroadcastContext(self)

    def open(self) -> None:
        # Keyed state handles check, on each use, that no broadcast record is being processed.
        context = self._context
        assert isinstance(context, BroadcastContext)
        self.fn.open(BroadcastFunctionContext(self.ctx, lambda: context.writable))

    def process_input(self, input_index: int, values: list[Any], timestamps: list[int] | None) -> None:
        if input_index == 0:
            self.process_batch(values, timestamps)
            return
        ctx = self._context
        assert isinstance(ctx, BroadcastContext)
        backend = self.ctx.keyed_backend
        assert backend is not None
        ctx.writable = True
        try:
            # No key is current: keyed state belongs to the keyed input's records.
            self.process_keyed(values, timestamps, _no_key, self.fn.process_broadcast_element)
        finally:
            ctx.writable = False
            backend.current_key = ctx.key = None


def _no_key(value: Any) -> None:
    return None
