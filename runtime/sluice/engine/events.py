"""What travels through a channel: record batches and the control events that interleave with them.

Events are ordered per channel. A task sends `EndOfData` once it will emit no more records (after
finishing, or on a stop without drain) and keeps forwarding checkpoint barriers; it sends
`EndOfPartition` as its very last event, right before it exits. A receiving task treats a channel that
delivered `EndOfPartition` as aligned for every pending and later checkpoint. The checkpoint barrier
and its cancellation belong to the checkpoint protocol (`sluice.checkpoint.barrier`); they are
re-exported here with the other events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice.checkpoint.barrier import CancelCheckpoint, CheckpointBarrier

__all__ = [
    "MAX_WATERMARK",
    "MIN_WATERMARK",
    "CancelCheckpoint",
    "CheckpointBarrier",
    "EndOfData",
    "EndOfPartition",
    "Event",
    "RecordBatch",
    "Watermark",
    "WatermarkStatus",
]

MAX_WATERMARK = 2**63 - 1
"""Sent when a task finishes with drain: fires every remaining event-time timer and window."""

MIN_WATERMARK = -(2**63)


@dataclass(slots=True)
class RecordBatch:
    """Records that travel together. `timestamps` is parallel to `values`, or None without event time."""

    values: list[Any]
    timestamps: list[int] | None


@dataclass(frozen=True, slots=True)
class Watermark:
    """No record with a timestamp at or below `timestamp` will follow on this channel."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class WatermarkStatus:
    """An idle channel does not hold back the watermark of the task that reads it."""

    idle: bool


@dataclass(frozen=True, slots=True)
class EndOfData:
    """No more records on this channel. `drain` tells whether upstream flushed (finish, timers fired)."""

    drain: bool


@dataclass(frozen=True, slots=True)
class EndOfPartition:
    """The last event of a channel: its sender has closed and exits."""


Event = (
    RecordBatch
    | Watermark
    | WatermarkStatus
    | CheckpointBarrier
    | CancelCheckpoint
    | EndOfData
    | EndOfPartition
)
