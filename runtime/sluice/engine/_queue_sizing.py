"""How many events a subtask's input queues hold, from how fast the subtask takes them.

A checkpoint barrier waits behind every event queued ahead of it, so the time a barrier spends in a
subtask's input queues is their length over the subtask's rate. A fixed length that suits a fast
subtask (a few milliseconds of records) holds a slow one's barriers for hundreds of milliseconds, and
for longer still while its rate dips (a compaction, a disk flush): at 20M keys on the disk backend that
made one checkpoint in a few miss its interval. So, as Flink's buffer debloating does (FLIP-183), the
queues of one input gate are sized together to hold about `TARGET_S` of the gate's measured rate: the
rate is counted over windows of `WINDOW_S`, smoothed, and split evenly over the gate's open channels.
A queue never shrinks below `MIN_CAPACITY` events (a sender always has room for one while the receiver
works on another) nor grows past `MAX_CAPACITY` (memory: an event is a batch of up to
`sluice.engine.writer.BATCH_SIZE` records).

A fast subtask gets `MAX_CAPACITY` and loses nothing: at 1.5M records/s, 8 batches are ~5 ms. Shrinking
only ever slows senders that are already waiting on this subtask (backpressure); events already queued
stay queued.
"""

from __future__ import annotations

import time
from collections.abc import Callable

TARGET_S = 0.05
"""Time the queued events of one gate should take to process."""
WINDOW_S = 0.2
MIN_CAPACITY = 1
MAX_CAPACITY = 8
_SMOOTHING = 0.5
"""Weight of the newest window in the smoothed rate: a single stall does not halve the queues."""


def capacity_for(events_per_s: float, open_channels: int) -> int:
    """Events each of `open_channels` queues holds for the gate's queued events to last `TARGET_S`."""
    share = events_per_s * TARGET_S / max(open_channels, 1)
    return max(MIN_CAPACITY, min(MAX_CAPACITY, round(share)))


class QueueSizer:
    """Counts the events a gate hands out and, once a window has passed, says what its queues' capacity
    should now be."""

    __slots__ = ("_clock", "_count", "_rate", "_since")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since = clock()
        self._count = 0
        self._rate: float | None = None

    def consumed(self, open_channels: int) -> int | None:
        """One event was handed out. The new per-channel capacity when a window just closed, else None."""
        self._count += 1
        now = self._clock()
        elapsed = now - self._since
        if elapsed < WINDOW_S:
            return None
        rate = self._count / elapsed
        self._rate = rate if self._rate is None else _SMOOTHING * rate + (1 - _SMOOTHING) * self._rate
        self._count = 0
        self._since = now
        return capacity_for(self._rate, open_channels)
