"""What ends a job attempt: the events the job master's attempt waits for, and the end each stands for.

Subtasks, lost TaskManagers, the checkpoint coordinator (too many failed checkpoints), a failed stop
savepoint and the operations (cancel, suspend) all end an attempt by queueing one of these; the job
master's attempt raises it as `AttemptEnded`, and the job master decides from it whether the job ends
(and in which state) or restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sluice._states import JobState


@dataclass(frozen=True)
class TasksFinished:
    """Every subtask finished: the job ends FINISHED."""

    @property
    def end(self) -> JobState:
        return JobState.FINISHED


@dataclass(frozen=True)
class AttemptFailed:
    """A subtask failed, a TaskManager was lost, storage failed...: the restart strategy decides."""

    reason: str

    @property
    def end(self) -> JobState:
        """The job's state when no restart is left."""
        return JobState.FAILED


@dataclass(frozen=True)
class EndRequested:
    """cancel() (CANCELED: for good, with a stored result) or suspend() (SUSPENDED: resumable)."""

    state: Literal[JobState.CANCELED, JobState.SUSPENDED]
    reason: str

    @property
    def end(self) -> JobState:
        return self.state


AttemptEvent = TasksFinished | AttemptFailed | EndRequested


def stop_failure(event: AttemptEvent) -> str:
    """Why a stop-with-savepoint whose savepoint had not completed failed when the attempt ended so."""
    if isinstance(event, TasksFinished):
        # The input ran out as the stop was asked for: the job is FINISHED, its final checkpoint
        # committed every output, and there is nothing left to stop (FLIP-147).
        return (
            "the job finished before the savepoint completed: every task reached the end of its "
            "input, and the final checkpoint committed the output"
        )
    if isinstance(event, AttemptFailed):
        return f"the job attempt failed before the savepoint completed: {event.reason}"
    return f"the job was {event.state.lower()} before the savepoint completed: {event.reason}"


class AttemptEnded(Exception):
    """Raised out of an attempt at whatever stage it was in (restoring, registering, running)."""

    def __init__(self, event: AttemptEvent) -> None:
        super().__init__(event)
        self.event = event


__all__ = ["AttemptEnded", "AttemptEvent", "AttemptFailed", "EndRequested", "TasksFinished", "stop_failure"]
