"""Event-time window assigners.

A window covers `[start, end)` in milliseconds; its result carries the timestamp `end - 1`. A window
fires when the watermark reaches `end - 1`. A record for a window that has fired is late: within the
window's allowed lateness it fires the window again, past it it goes to the late-data side output if the
window has one, else it is dropped and counted (docs/windows-and-time.md).

Session windows merge: a record opens the window `[ts, ts + gap)` of its key, and windows of one key
that overlap or touch become one, as in Flink's EventTimeSessionWindows.
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


@dataclass(frozen=True)
class EventTimeSessionWindows:
    gap_ms: int

    @classmethod
    def with_gap_millis(cls, gap_ms: int) -> EventTimeSessionWindows:
        return cls(gap_ms)

    @classmethod
    def with_gap_seconds(cls, gap_s: float) -> EventTimeSessionWindows:
        return cls(round(gap_s * 1000))

    def __post_init__(self) -> None:
        if not isinstance(self.gap_ms, int) or isinstance(self.gap_ms, bool) or self.gap_ms <= 0:
            raise ValueError(
                f"a session window needs a positive gap in whole milliseconds, got {self.gap_ms!r}"
            )


@dataclass(frozen=True)
class TimeWindow:
    """The window `[start, end)` in milliseconds that a ProcessWindowFunction is called for."""

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """The timestamp of the window's results, `end - 1`."""
        return self.end - 1


WindowAssigner = TumblingEventTimeWindows | SlidingEventTimeWindows | EventTimeSessionWindows
FixedWindowAssigner = TumblingEventTimeWindows | SlidingEventTimeWindows


def window_ends(assigner: FixedWindowAssigner, timestamp: int) -> list[int]:
    """The end of every window `timestamp` belongs to (windows of one assigner share their size)."""
    size, slide, offset = assigner.size_ms, assigner.slide_ms, assigner.offset_ms
    last_start = timestamp - (timestamp - offset) % slide
    return [start + size for start in range(last_start, timestamp - size, -slide)]
