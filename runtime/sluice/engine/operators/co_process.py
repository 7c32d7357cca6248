"""Two-input operators over connected streams: `a.connect(b).process(fn)`, keyed or not.

The task hands each batch to `process_input(i, ...)` with the number of the input it came from; the
barriers of both inputs are aligned and the watermark is the minimum of both before the operator sees
them (`sluice.engine.task`). When one input ends, `end_input(i)` tells the operator and it runs on with
the other: what the ended input left in state stays (FLIP-147's partially finished inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sluice.engine.operators.basic import GuardedOperator, emit_processed
from sluice.engine.operators.keyed import KeyedProcessOperator
from sluice.functions import CoProcessFunction, KeyedCoProcessFunction
from sluice.side_outputs import OutputTag


class CoProcessOperator(GuardedOperator):
    """A `CoProcessFunction`: `process_element1` for the first input, `process_element2` for the second."""

    two_inputs = True

    def __init__(self, uid: str, fn: CoProcessFunction, on_error: str | OutputTag = "fail") -> None:
        if not isinstance(fn, CoProcessFunction):
            raise TypeError(f"operator {uid!r}: connect(...).process() needs a sluice.CoProcessFunction")
        super().__init__(uid, fn, on_error)
        self._calls: tuple[Callable[[Any, int | None], Iterable[Any] | None], ...] = (
            fn.process_element1,
            fn.process_element2,
        )
        self._call: Callable[[Any, int | None], Iterable[Any] | None] = self._calls[0]

    def outputs_of(self, value: Any, timestamp: int | None) -> list[Any]:
        produced = self._call(value, timestamp)
        return [] if produced is None else list(produced)

    def process_input(self, input_index: int, values: list[Any], timestamps: list[int] | None) -> None:
        self._call = call = self._calls[input_index]
        if self.guarded:
            self.process_guarded(values, timestamps)
            return
        emit_processed(self.output, call, values, timestamps)

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.process_input(0, values, timestamps)


class KeyedCoProcessOperator(KeyedProcessOperator):
    """A `KeyedCoProcessFunction`: both inputs partitioned by their own key selector into the same key
    groups, so one key's records of both inputs meet in one subtask, with one keyed state and timers."""

    two_inputs = True

    def __init__(
        self,
        uid: str,
        key_selectors: tuple[Callable[[Any], Any], Callable[[Any], Any]],
        fn: KeyedCoProcessFunction,
        on_error: str | OutputTag = "fail",
    ) -> None:
        super().__init__(uid, key_selectors[0], fn, on_error)  # type: ignore[arg-type]
        self.key_selectors = key_selectors
        self._calls = (fn.process_element1, fn.process_element2)

    def check_function(self, uid: str, fn: Any) -> None:
        if not isinstance(fn, KeyedCoProcessFunction):
            raise TypeError(
                f"operator {uid!r}: process() on keyed connected streams needs a "
                "sluice.KeyedCoProcessFunction"
            )

    def process_input(self, input_index: int, values: list[Any], timestamps: list[int] | None) -> None:
        self.process_keyed(values, timestamps, self.key_selectors[input_index], self._calls[input_index])

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.process_input(0, values, timestamps)
