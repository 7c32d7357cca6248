"""Assigns event timestamps and generates watermarks with a bound on out-of-orderness."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.engine.context import processing_time_ms
from sluice.engine.events import MAX_WATERMARK, MIN_WATERMARK
from sluice.engine.operators.base import StreamOperator


class TimestampsOperator(StreamOperator):
    """Watermark = highest timestamp seen - max out-of-orderness - 1, emitted after every batch.

    Watermarks from upstream are replaced by the ones generated here, except MAX_WATERMARK, which means
    the input has ended and is always passed on. With `idleness_ms`, an input that brings no record for
    that long (processing time) is marked idle, so it does not hold back downstream event time; its next
    record makes it active again.
    """

    def __init__(
        self,
        uid: str,
        extract: Callable[[Any], int],
        max_out_of_orderness_ms: int,
        idleness_ms: int | None = None,
    ) -> None:
        if max_out_of_orderness_ms < 0:
            raise ValueError(f"operator {uid!r}: max_out_of_orderness_ms must be >= 0")
        if idleness_ms is not None and idleness_ms <= 0:
            raise ValueError(f"operator {uid!r}: idleness_ms must be a positive number of milliseconds")
        self.uid = uid
        self.extract = extract
        self.delay = max_out_of_orderness_ms
        self.idleness_ms = idleness_ms
        self.max_timestamp = MIN_WATERMARK + max_out_of_orderness_ms + 1
        self.emitted = MIN_WATERMARK
        self.idle = False
        self._last_record_ms = processing_time_ms()
        self._stopped = False

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        extract = self.extract
        stamps = [extract(v) for v in values]
        if not stamps:
            return
        if self.idleness_ms is not None:
            self._last_record_ms = processing_time_ms()
            if self.idle:
                self.idle = False
                self.output.emit_idle(False)
        self.output.emit(values, stamps)
        highest = max(stamps)
        if highest > self.max_timestamp:
            self.max_timestamp = highest
            watermark = highest - self.delay - 1
            if watermark > self.emitted:
                self.emitted = watermark
                self.output.emit_watermark(watermark)

    def process_watermark(self, timestamp: int) -> None:
        if timestamp == MAX_WATERMARK and self.emitted != MAX_WATERMARK:
            self.emitted = MAX_WATERMARK
            self.output.emit_watermark(MAX_WATERMARK)

    def process_idle(self, idle: bool) -> None:
        # Idleness is decided here from this operator's own records (with idleness_ms), not upstream.
        pass

    def next_processing_timer(self) -> int | None:
        if self.idleness_ms is None or self.idle or self._stopped:
            return None
        return self._last_record_ms + self.idleness_ms

    def on_processing_time(self, now_ms: int) -> None:
        timer = self.next_processing_timer()
        if timer is not None and now_ms >= timer:
            self.idle = True
            self.output.emit_idle(True)

    def stop_processing_timers(self) -> None:
        self._stopped = True
