"""The checkpoint barrier, its cancellation, and when it arrived: what carries a checkpoint through the
job's channels.

A barrier travels in every channel between the records (see `sluice.engine.events`, which re-exports
these classes for the engine): the records before it are in the checkpoint, the ones after it are not.
A subtask that gives up a checkpoint's alignment sends `CancelCheckpoint` downstream instead, so that
the tasks there stop waiting for a barrier that will not come.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CheckpointBarrier:
    checkpoint_id: int
    timestamp: int
    location: str
    """Where every subtask writes its state for this checkpoint (a URI)."""
    is_savepoint: bool = False
    completed: int = 0
    """The newest checkpoint completed when this one was triggered (0: none)."""


@dataclass(frozen=True, slots=True)
class CancelCheckpoint:
    """Tells downstream tasks to drop an alignment for a checkpoint that was declined upstream."""

    checkpoint_id: int


@dataclass(frozen=True)
class BarrierTiming:
    """How long a checkpoint's barriers took to reach a subtask, as Flink reports it with the ack."""

    start_delay_ms: float = 0.0
    """From the coordinator's trigger (its wall clock) to the checkpoint's first barrier (or trigger) here."""
    alignment_ms: float = 0.0
    """From the first barrier to the moment every channel had delivered its barrier or closed."""

    @staticmethod
    def on_trigger(trigger_ms: int) -> BarrierTiming:
        """A source subtask, triggered by the coordinator: nothing to align."""
        return BarrierTiming(start_delay_ms=delay_since(trigger_ms))


def delay_since(trigger_ms: int) -> float:
    """Milliseconds from `trigger_ms` (the coordinator's wall clock) to now."""
    # Clocks of different hosts may disagree by a little: a barrier is never early.
    return max(0.0, time.time() * 1000 - trigger_ms)
