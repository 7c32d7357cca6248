"""Assigns event timestamps and generates watermarks with a bound on out-of-orderness."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.engine.events import MAX_WATERMARK, MIN_WATERMARK
from sluice.engine.operators.base import StreamOperator


class TimestampsOperator(StreamOperator):
    """Watermark = highest timestamp seen - max out-of-orderness - 1, emitted after every batch.

    Watermarks from upstream are replaced by the ones generated here, except MAX_WATERMARK, which means
    the input has ended and is always passed on.
    """

    def __init__(self, uid: str, extract: Callable[[Any], int], max_out_of_orderness_ms: int) -> None:
        if max_out_of_orderness_ms < 0:
            raise ValueError(f"operator {uid!r}: max_out_of_orderness_ms must be >= 0")
        self.uid = uid
        self.extract = extract
        self.delay = max_out_of_orderness_ms
        self.max_timestamp = MIN_WATERMARK + max_out_of_orderness_ms + 1
        self.emitted = MIN_WATERMARK

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        extract = self.extract
        stamps = [extract(v) for v in values]
        if not stamps:
            return
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
