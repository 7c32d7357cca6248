"""Event time at the source: a `WatermarkStrategy` given to `env.from_source(..., watermarks=...)`.

With a strategy, every split of a source subtask (a Kafka partition slot, a generator split, a file)
keeps its own watermark: the highest timestamp it has produced minus the allowed out-of-orderness,
minus 1. The subtask emits the smallest of them, so a split that is behind holds event time back
instead of having its records dropped as late because another split of the same subtask ran ahead.
A split that brings no record for `idleness_ms` (processing time) stops holding it back until its next
record; a split that has ended never holds it back. This is Flink's `WatermarkStrategy` on
`fromSource`, and the way to use event time with sources whose subtasks read several splits.
`DataStream.assign_timestamps` remains for streams that do not come straight from a source; it sees
only the interleaved records of a subtask, not its splits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WatermarkStrategy:
    timestamp: Callable[[Any], int]
    """A record's event time in milliseconds."""
    max_out_of_orderness_ms: int = 0
    idleness_ms: int | None = None

    def __post_init__(self) -> None:
        if not callable(self.timestamp):
            raise TypeError(
                f"WatermarkStrategy: timestamp must be a function of a record, got {self.timestamp!r}"
            )
        if self.max_out_of_orderness_ms < 0:
            raise ValueError(
                f"WatermarkStrategy: max_out_of_orderness_ms must be >= 0, got {self.max_out_of_orderness_ms}"
            )
        if self.idleness_ms is not None and self.idleness_ms <= 0:
            raise ValueError(
                "WatermarkStrategy: idleness_ms must be a positive number of milliseconds, "
                f"got {self.idleness_ms}"
            )
