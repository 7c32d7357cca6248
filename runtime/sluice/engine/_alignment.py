"""Aligned checkpoint barriers for one subtask.

When the first barrier of checkpoint n arrives, its channel is blocked; each further channel is blocked
as its barrier arrives. Once every channel has delivered barrier n, or has ended with EndOfPartition
(a closed channel counts as aligned for every pending and later checkpoint), the subtask snapshots and
all channels are unblocked. A barrier of a newer checkpoint aborts an alignment still in progress.

The aligner also times each checkpoint for its statistics, as Flink reports them: the start delay (from
the coordinator's trigger to the first barrier here: how long the barrier queued behind in-flight
records upstream) and the alignment (from the first barrier to the last).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sluice.checkpoint.barrier import BarrierTiming, CheckpointBarrier, delay_since


@dataclass
class AlignmentResult:
    aligned: CheckpointBarrier | None = None
    aborted: int | None = None
    timing: BarrierTiming | None = None
    """With `aligned`: how long the checkpoint's barriers took to reach and align here."""


class BarrierAligner:
    def __init__(self, num_channels: int, clock: Callable[[], float] = time.perf_counter) -> None:
        self.num_channels = num_channels
        self.closed: set[int] = set()
        self.pending: CheckpointBarrier | None = None
        self.arrived: set[int] = set()
        self.last_seen = 0
        self._clock = clock
        self._first_at = 0.0
        self._start_delay_ms = 0.0

    @property
    def blocked(self) -> set[int]:
        return self.arrived if self.pending is not None else set()

    @property
    def all_closed(self) -> bool:
        return len(self.closed) == self.num_channels

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> AlignmentResult:
        result = AlignmentResult()
        cid = barrier.checkpoint_id
        if cid < self.last_seen or (cid == self.last_seen and self.pending is None):
            return result  # a barrier of a checkpoint already aligned or given up
        if self.pending is not None and cid > self.pending.checkpoint_id:
            result.aborted = self.pending.checkpoint_id
            self.pending = None
        if self.pending is None:
            self._begin(barrier)
        self.arrived.add(channel)
        self._check(result)
        return result

    def on_trigger(self, barrier: CheckpointBarrier) -> AlignmentResult:
        """The coordinator triggered this subtask directly: its inputs have finished or are finishing.

        The checkpoint completes once the rest of the channels have closed (or deliver the barrier).
        """
        result = AlignmentResult()
        cid = barrier.checkpoint_id
        if cid <= self.last_seen and (self.pending is None or self.pending.checkpoint_id != cid):
            return result
        if self.pending is not None and cid > self.pending.checkpoint_id:
            result.aborted = self.pending.checkpoint_id
            self.pending = None
        if self.pending is None:
            self._begin(barrier)
        self._check(result)
        return result

    def on_cancel(self, checkpoint_id: int) -> bool:
        """Drops the alignment of `checkpoint_id`; True when one was in progress."""
        self.last_seen = max(self.last_seen, checkpoint_id)
        if self.pending is not None and self.pending.checkpoint_id == checkpoint_id:
            self.pending = None
            self.arrived = set()
            return True
        return False

    def on_channel_closed(self, channel: int) -> AlignmentResult:
        self.closed.add(channel)
        result = AlignmentResult()
        if self.pending is not None:
            self._check(result)
        return result

    def _begin(self, barrier: CheckpointBarrier) -> None:
        self.pending = barrier
        self.arrived = set()
        self.last_seen = barrier.checkpoint_id
        self._first_at = self._clock()
        self._start_delay_ms = delay_since(barrier.timestamp)

    def _check(self, result: AlignmentResult) -> None:
        assert self.pending is not None
        if len(self.arrived | self.closed) == self.num_channels:
            result.aligned, self.pending = self.pending, None
            self.arrived = set()
            alignment_ms = (self._clock() - self._first_at) * 1000
            result.timing = BarrierTiming(round(self._start_delay_ms, 3), round(alignment_ms, 3))
