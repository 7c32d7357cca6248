"""The runtime's states and modes, each one StrEnum whose values are the strings stored and sent.

A StrEnum member is a `str`: it compares equal to its value, and `json.dumps` writes the value, so
`_metadata`, `job-result.json`, control messages and the REST API keep exactly their spelling. The
runtime reports them and the operator compares against them: both import them from here, so a state
one side knows and the other does not (the operator once lacked `SUSPENDED`) cannot happen again.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    SUSPENDED = "SUSPENDED"

    @property
    def ended(self) -> bool:
        """An end that is stored (job-result.json): a suspended job goes on with the next coordinator."""
        return self in (JobState.FINISHED, JobState.FAILED, JobState.CANCELED)


class SubtaskState(StrEnum):
    CREATED = "CREATED"
    """Shown for a subtask no TaskManager has reported on yet."""
    DEPLOYING = "DEPLOYING"
    RUNNING = "RUNNING"
    END_OF_DATA = "END_OF_DATA"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"

    @property
    def ended(self) -> bool:
        return self in (SubtaskState.FINISHED, SubtaskState.FAILED, SubtaskState.CANCELED)


class CheckpointKind(StrEnum):
    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class CheckpointStatus(StrEnum):
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    IN_PROGRESS = "IN_PROGRESS"
    """Only a savepoint requested over REST is shown in progress (POST /v1/savepoints)."""


class RestartKind(StrEnum):
    FIXED_DELAY = "fixed-delay"
    EXPONENTIAL = "exponential"
    NONE = "none"


class StopMode(StrEnum):
    """How stop-with-savepoint ends the job (FLIP-34); the value is the REST and CLI spelling.

    The same mode is a `drain` flag in the `stop` control message and `drain`/`no-drain` in the
    `stopMode` of `_metadata`: `drains`, `in_metadata` and `from_metadata` translate.
    """

    TERMINATE = "terminate"
    """Drain: sources stop, every task flushes, fires its timers and finishes; the job ends FINISHED."""
    SUSPEND = "suspend"
    """No drain: tasks end where they are; the job can be resumed from the savepoint."""

    @property
    def drains(self) -> bool:
        return self is StopMode.TERMINATE

    @staticmethod
    def of_drain(drain: bool) -> StopMode:
        return StopMode.TERMINATE if drain else StopMode.SUSPEND

    @property
    def in_metadata(self) -> str:
        return "drain" if self.drains else "no-drain"

    @staticmethod
    def from_metadata(value: str) -> StopMode:
        if value not in ("drain", "no-drain"):
            raise ValueError(f"stopMode must be null, 'drain' or 'no-drain', not {value!r}")
        return StopMode.of_drain(value == "drain")
