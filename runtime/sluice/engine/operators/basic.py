"""Stateless record-at-a-time operators, run a whole batch at a time.

With `on_error` other than "fail" a batch takes a slower path that calls the function record by record
inside a try, so one record that makes it raise is skipped or dead-lettered and the rest go on. The
default path stays the tight loop it always was.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from typing import Any

from sluice.engine._failure_context import index_reached, mark_record
from sluice.engine.operators._udf import DeadLetters, UdfOperator
from sluice.engine.operators.base import Output, StreamOperator
from sluice.functions import FilterFunction, FlatMapFunction, MapFunction, ProcessFunction


def emit_processed(
    output: Output,
    call: Callable[[Any, int | None], Any],
    values: list[Any],
    timestamps: list[int] | None,
) -> None:
    """Calls a process function on each record of a batch and emits what it returned, each output
    with its input's timestamp, as one batch (the loop of every process-style operator)."""
    out: list[Any] = []
    out_ts: list[int] = []
    i = 0
    try:
        for i, value in enumerate(values):
            ts = None if timestamps is None else timestamps[i]
            produced = call(value, ts)
            if produced is None:
                continue
            before = len(out)
            out.extend(produced)
            if ts is not None:
                out_ts.extend([ts] * (len(out) - before))
    except Exception as error:
        mark_record(error, values, i)
        raise
    if out:
        output.emit(out, None if timestamps is None else out_ts)


class GuardedOperator(UdfOperator):
    """A user-function operator that can run a batch record by record, catching what the function raises."""

    def outputs_of(self, value: Any, timestamp: int | None) -> list[Any]:
        """What one record becomes; raises what the user function raises."""
        raise NotImplementedError

    def process_guarded(self, values: list[Any], timestamps: list[int] | None) -> None:
        outputs_of = self.outputs_of
        out: list[Any] = []
        out_ts: list[int] = []
        dead = DeadLetters()
        for i, value in enumerate(values):
            ts = None if timestamps is None else timestamps[i]
            try:
                produced = outputs_of(value, ts)
            except Exception as error:
                self.reject(value, ts, error, dead)
                continue
            out.extend(produced)
            if ts is not None:
                out_ts.extend([ts] * len(produced))
        if out:
            self.output.emit(out, None if timestamps is None else out_ts)
        self.send_dead_letters(dead)


class MapOperator(GuardedOperator):
    def open(self) -> None:
        super().open()
        self._call: Callable[[Any], Any] = self.fn.map if isinstance(self.fn, MapFunction) else self.fn

    def outputs_of(self, value: Any, timestamp: int | None) -> list[Any]:
        return [self._call(value)]

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        if self.guarded:
            self.process_guarded(values, timestamps)
            return
        call = self._call
        records = iter(values)
        try:
            mapped = [call(v) for v in records]
        except Exception as error:
            mark_record(error, values, index_reached(values, records))
            raise
        self.output.emit(mapped, timestamps)


class FilterOperator(GuardedOperator):
    def open(self) -> None:
        super().open()
        self._call: Callable[[Any], Any] = self.fn.filter if isinstance(self.fn, FilterFunction) else self.fn

    def outputs_of(self, value: Any, timestamp: int | None) -> list[Any]:
        return [value] if self._call(value) else []

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        if self.guarded:
            self.process_guarded(values, timestamps)
            return
        call = self._call
        records = iter(values)
        try:
            keep = [bool(call(v)) for v in records]
        except Exception as error:
            mark_record(error, values, index_reached(values, records))
            raise
        kept = list(compress(values, keep))
        if kept:
            self.output.emit(kept, None if timestamps is None else list(compress(timestamps, keep)))


class FlatMapOperator(GuardedOperator):
    def open(self) -> None:
        super().open()
        self._call: Callable[[Any], Any] = (
            self.fn.flat_map if isinstance(self.fn, FlatMapFunction) else self.fn
        )

    def outputs_of(self, value: Any, timestamp: int | None) -> list[Any]:
        # Whole or nothing: a generator that raises half-way emits none of what it yielded.
        return list(self._call(value))

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        if self.guarded:
            self.process_guarded(values, timestamps)
            return
        call = self._call
        out: list[Any] = []
        out_ts: list[int] = []
        records = iter(values)
        try:
            if timestamps is None:
                for v in records:
                    out.extend(call(v))
            else:
                for v, ts in zip(records, timestamps, strict=True):
                    before = len(out)
                    out.extend(call(v))
                    out_ts.extend([ts] * (len(out) - before))
        except Exception as error:
            mark_record(error, values, index_reached(values, records))
            raise
        if out:
            self.output.emit(out, None if timestamps is None else out_ts)


class ProcessOperator(GuardedOperator):
    """A non-keyed process function: zero or more outputs per record, keeping the record's timestamp."""

    def open(self) -> None:
        super().open()
        if not isinstance(self.fn, ProcessFunction):
            raise TypeError(f"operator {self.uid!r}: process() needs a sluice.ProcessFunction")

    def outputs_of(self, value: Any, timestamp: int | None) -> list[Any]:
        produced = self.fn.process_element(value, timestamp)
        return [] if produced is None else list(produced)

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        if self.guarded:
            self.process_guarded(values, timestamps)
            return
        emit_processed(self.output, self.fn.process_element, values, timestamps)


class SideOutputOperator(StreamOperator):
    """The head of a stream `get_side_output` made: passes on what its input edge (a side output) brings."""

    def __init__(self, uid: str) -> None:
        self.uid = uid
