"""What to trigger now: the stop's savepoint, the final checkpoint, a periodic one, or nothing.

The job master asks at every tick of an attempt and acts on the answer; the rules are here, apart from
the clock and the job's bookkeeping, as Flink's CheckpointRequestDecider keeps them apart from its
CheckpointCoordinator:

- One checkpoint at a time: nothing is triggered while one is pending.
- A stop-with-savepoint (FLIP-34) owns the triggers from its request to its end: its savepoint is
  triggered once every task has reached end of data, and no checkpoint is triggered meanwhile: a
  periodic one would hold the savepoint back, and the savepoint is the final checkpoint (it commits).
  Once every task has closed, there is no savepoint to take: the job finishes.
- Final checkpoint (FLIP-147): as soon as every task has reached end of data and some have not
  finished yet (they wait for it to close), checkpoint at once instead of at the next interval. Once a
  checkpoint that commits side effects, triggered after every task reached end of data, has completed,
  there is no other final one.
- Periodic: every `interval_s` (counted from the start of the attempt, then from the last periodic
  trigger, declined or not), and not within `min_pause_s` of the last completion.
- Nothing once every task has finished, or finishes on restore (every operator of its chain had
  finished in the checkpoint the attempt restored): no task has state left to take, and the job ends
  as they close. A job resumed from a finished job's checkpoint or a drained savepoint is all such
  tasks; a checkpoint triggered while they restore would record nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sluice.checkpoint.coordinator import CheckpointConfig


class Decision(StrEnum):
    NOTHING = "nothing"
    PERIODIC = "periodic"
    FINAL = "final"
    STOP_SAVEPOINT = "stop-savepoint"


class StopPhase(StrEnum):
    """Where a stop-with-savepoint is, as the decision needs it."""

    NONE = "none"
    REQUESTED = "requested"
    """The sources were told to stop; the savepoint waits until every task has reached end of data."""
    SAVEPOINT_TRIGGERED = "savepoint-triggered"


@dataclass(frozen=True)
class Progress:
    """The job at one instant, as the decision needs it."""

    pending: bool
    """A checkpoint or savepoint is pending."""
    last_completion: float
    """`time.monotonic()` when the last checkpoint or savepoint completed; 0.0 if none has."""
    all_reached_end: bool
    """Every subtask has reached end of data (END_OF_DATA or FINISHED)."""
    all_finished: bool
    """Every subtask has finished or finishes on restore."""
    stop: StopPhase = StopPhase.NONE


def decide(
    config: CheckpointConfig, now: float, next_periodic: float, final_done: bool, progress: Progress
) -> Decision:
    """The rules of the module docstring; `now` and `next_periodic` on the `time.monotonic()` clock."""
    if progress.stop is StopPhase.SAVEPOINT_TRIGGERED:
        return Decision.NOTHING
    if progress.stop is StopPhase.REQUESTED:
        # Every task closed already (the input ran out as the stop was asked for): the job is
        # finishing, and a savepoint would find no task to take it.
        ready = progress.all_reached_end and not progress.all_finished and not progress.pending
        return Decision.STOP_SAVEPOINT if ready else Decision.NOTHING
    if progress.pending or progress.all_finished:
        return Decision.NOTHING
    if not final_done and progress.all_reached_end and not progress.all_finished:
        return Decision.FINAL
    paused = now - progress.last_completion < config.min_pause_s
    if config.interval_s and now >= next_periodic and not paused:
        return Decision.PERIODIC
    return Decision.NOTHING


class TriggerDecider:
    """`decide` with what it remembers over one attempt: when the next periodic checkpoint is due, and
    whether the final checkpoint has completed."""

    def __init__(self, config: CheckpointConfig, now: float) -> None:
        self.config = config
        self.next_periodic = now + (config.interval_s or 0)
        self.final_done = False

    def decide(self, now: float, progress: Progress) -> Decision:
        """What to trigger now. The caller triggers what it is told: a periodic answer starts the next
        interval."""
        decision = decide(self.config, now, self.next_periodic, self.final_done, progress)
        if decision is Decision.PERIODIC:
            self.next_periodic = now + (self.config.interval_s or 0)
        return decision

    @staticmethod
    def is_final(commits: bool, all_reached_end: bool) -> bool:
        """Whether a checkpoint triggered now, once completed, is the final one."""
        return commits and all_reached_end

    def final_completed(self) -> None:
        self.final_done = True
