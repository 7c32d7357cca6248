"""Stateless record-at-a-time operators, run a whole batch at a time."""

from __future__ import annotations

from itertools import compress
from typing import Any

from sluice.engine.operators._udf import UdfOperator
from sluice.functions import FilterFunction, FlatMapFunction, MapFunction, ProcessFunction


class MapOperator(UdfOperator):
    def open(self) -> None:
        super().open()
        self._call = self.fn.map if isinstance(self.fn, MapFunction) else self.fn

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        call = self._call
        self.output.emit([call(v) for v in values], timestamps)


class FilterOperator(UdfOperator):
    def open(self) -> None:
        super().open()
        self._call = self.fn.filter if isinstance(self.fn, FilterFunction) else self.fn

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        call = self._call
        keep = [bool(call(v)) for v in values]
        kept = list(compress(values, keep))
        if kept:
            self.output.emit(kept, None if timestamps is None else list(compress(timestamps, keep)))


class FlatMapOperator(UdfOperator):
    def open(self) -> None:
        super().open()
        self._call = self.fn.flat_map if isinstance(self.fn, FlatMapFunction) else self.fn

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        call = self._call
        out: list[Any] = []
        if timestamps is None:
            for v in values:
                out.extend(call(v))
            if out:
                self.output.emit(out, None)
            return
        out_ts: list[int] = []
        for v, ts in zip(values, timestamps, strict=True):
            before = len(out)
            out.extend(call(v))
            out_ts.extend([ts] * (len(out) - before))
        if out:
            self.output.emit(out, out_ts)


class ProcessOperator(UdfOperator):
    """A non-keyed process function: zero or more outputs per record, keeping the record's timestamp."""

    def open(self) -> None:
        super().open()
        if not isinstance(self.fn, ProcessFunction):
            raise TypeError(f"operator {self.uid!r}: process() needs a sluice.ProcessFunction")

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        call = self.fn.process_element
        out: list[Any] = []
        out_ts: list[int] = []
        for i, v in enumerate(values):
            ts = None if timestamps is None else timestamps[i]
            produced = call(v, ts)
            if produced is None:
                continue
            before = len(out)
            out.extend(produced)
            if ts is not None:
                out_ts.extend([ts] * (len(out) - before))
        if out:
            self.output.emit(out, out_ts if timestamps is not None else None)
