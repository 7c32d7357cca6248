"""Aligned checkpoint barriers for one subtask.

When the first barrier of checkpoint n arrives, its channel is blocked; each further channel is blocked
as its barrier arrives. Once every channel has delivered barrier n, or has ended with EndOfPartition
(a closed channel counts as aligned for every pending and later checkpoint), the subtask snapshots and
all channels are unblocked. A barrier of a newer checkpoint aborts an alignment still in progress.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.engine.events import CheckpointBarrier


@dataclass
class AlignmentResult:
    aligned: CheckpointBarrier | None = None
    aborted: int | None = None


class BarrierAligner:
    def __init__(self, num_channels: int) -> None:
        self.num_channels = num_channels
        self.closed: set[int] = set()
        self.pending: CheckpointBarrier | None = None
        self.arrived: set[int] = set()
        self.last_seen = 0

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
            self.pending = barrier
            self.arrived = set()
            self.last_seen = cid
        self.arrived.add(channel)
        result.aligned = self._check()
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
            self.pending = barrier
            self.arrived = set()
            self.last_seen = cid
        result.aligned = self._check()
        return result

    def on_cancel(self, checkpoint_id: int) -> bool:
        """Drops the alignment of `checkpoint_id`; True when one was in progress."""
        self.last_seen = max(self.last_seen, checkpoint_id)
        if self.pending is not None and self.pending.checkpoint_id == checkpoint_id:
            self.pending = None
            self.arrived = set()
            return True
        return False

    def on_channel_closed(self, channel: int) -> CheckpointBarrier | None:
        self.closed.add(channel)
        return self._check() if self.pending is not None else None

    def _check(self) -> CheckpointBarrier | None:
        assert self.pending is not None
        if len(self.arrived | self.closed) == self.num_channels:
            barrier, self.pending = self.pending, None
            self.arrived = set()
            return barrier
        return None
