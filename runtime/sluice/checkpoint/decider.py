"""When the next periodic checkpoint is due, and the job's progress every trigger rule reads.

The rules of the periodic interval are here, apart from the clock and the job's bookkeeping, as Flink's
CheckpointRequestDecider keeps them apart from its CheckpointCoordinator. What else is triggered (the
final checkpoint, the stop's savepoint) and when periodic checkpoints are held back for them is the
finishing state machine's (`sluice.checkpoint.finishing`), which asks this schedule at every tick:

- One checkpoint at a time: nothing is due while one is pending.
- Every `interval_s` (counted from the start of the attempt, then from the last periodic trigger,
  declined or not), and not within `min_pause_s` of the last completion.
- Nothing once every task has finished, or finishes on restore (every operator of its chain had
  finished in the checkpoint the attempt restored): no task has state left to take, and the job ends
  as they close. A job resumed from a finished job's checkpoint or a drained savepoint is all such
  tasks; a checkpoint triggered while they restore would record nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.checkpoint.coordinator import CheckpointConfig


@dataclass(frozen=True)
class Progress:
    """The job at one instant, as the trigger rules need it."""

    pending: bool
    """A checkpoint or savepoint is pending."""
    last_completion: float
    """`time.monotonic()` when the last checkpoint or savepoint completed; 0.0 if none has."""
    all_reached_end: bool
    """Every subtask has reached end of data (END_OF_DATA or FINISHED)."""
    all_finished: bool
    """Every subtask has finished or finishes on restore."""

    @property
    def quiet(self) -> bool:
        """Nothing may be triggered: one is pending, or no task has state left to take."""
        return self.pending or self.all_finished


class PeriodicSchedule:
    """The periodic interval over one attempt, on the `time.monotonic()` clock."""

    def __init__(self, config: CheckpointConfig, now: float) -> None:
        self.config = config
        self.next_due = now + (config.interval_s or 0)

    def due(self, now: float, progress: Progress) -> bool:
        """Whether a periodic checkpoint is due now. The caller triggers it: the next interval starts."""
        if progress.quiet or not self.config.interval_s or now < self.next_due:
            return False
        if now - progress.last_completion < self.config.min_pause_s:
            return False
        self.next_due = now + self.config.interval_s
        return True
