"""Event-time window assigners.

A window covers `[start, end)` in milliseconds; its result carries the timestamp `end - 1`. A window
fires when the watermark reaches `end - 1`; records for a window that has already fired are late,
dropped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TumblingEventTimeWindows:
    size_ms: int
    offset_ms: int = 0

    @classmethod
    def of_millis(cls, size_ms: int, offset_ms: int = 0) -> TumblingEventTimeWindows:
        return cls(size_ms, offset_ms)

    @classmethod
    def of_seconds(cls, size_s: float, offset_s: float = 0) -> TumblingEventTimeWindows:
        return cls(round(size_s * 1000), round(offset_s * 1000))

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"a tumbling window needs a positive size, got {self.size_ms} ms")
        if not 0 <= self.offset_ms < self.size_ms:
            raise ValueError(f"window offset must be in [0, size), got {self.offset_ms} ms")

    @property
    def slide_ms(self) -> int:
        return self.size_ms


@dataclass(frozen=True)
class SlidingEventTimeWindows:
    size_ms: int
    slide_ms: int
    offset_ms: int = 0

    @classmethod
    def of_millis(cls, size_ms: int, slide_ms: int, offset_ms: int = 0) -> SlidingEventTimeWindows:
        return cls(size_ms, slide_ms, offset_ms)

    @classmethod
    def of_seconds(cls, size_s: float, slide_s: float, offset_s: float = 0) -> SlidingEventTimeWindows:
        return cls(round(size_s * 1000), round(slide_s * 1000), round(offset_s * 1000))

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.slide_ms <= 0:
            raise ValueError(
                f"a sliding window needs a positive size and slide, got {self.size_ms}/{self.slide_ms} ms"
            )
        if not 0 <= self.offset_ms < self.slide_ms:
            raise ValueError(f"window offset must be in [0, slide), got {self.offset_ms} ms")


WindowAssigner = TumblingEventTimeWindows | SlidingEventTimeWindows


def window_ends(assigner: WindowAssigner, timestamp: int) -> list[int]:
    """The end of every window `timestamp` belongs to (windows of one assigner share their size)."""
    size, slide, offset = assigner.size_ms, assigner.slide_ms, assigner.offset_ms
    last_start = timestamp - (timestamp - offset) % slide
    return [start + size for start in range(last_start, timestamp - size, -slide)]
