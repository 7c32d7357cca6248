"""Every state, mode and reason the operator compares in code, as one leaf of StrEnums.

A StrEnum member is its string: it serializes, compares and formats exactly as the literal it
replaces, so the CRD schemas and the statuses written are unchanged. Enums used as field types say
what they are in a comment, not a docstring: pydantic would put a docstring into the CRD schema.
The runtime's vocabulary (`RunState`, `TriggerState`) is mirrored here rather than imported: the
operator knows the runtime only through its REST API and storage layout.
"""

from __future__ import annotations

from enum import StrEnum


# `spec.state`: where the user wants the job.
class JobState(StrEnum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    FINISHED = "finished"


class StateBackend(StrEnum):
    HEAP = "heap"
    DISK = "disk"


class UpgradeMode(StrEnum):
    STATELESS = "stateless"
    SAVEPOINT = "savepoint"
    LAST_STATE = "last-state"


class RestartKind(StrEnum):
    FIXED_DELAY = "fixed-delay"
    EXPONENTIAL = "exponential"
    NONE = "none"


# `status.lifecycleState`: where the operator sees the job.
class LifecycleState(StrEnum):
    CREATED = "Created"
    DEPLOYING = "Deploying"
    RUNNING = "Running"
    STOPPING = "Stopping"
    SUSPENDED = "Suspended"
    FINISHED = "Finished"
    FAILED = "Failed"
    UPGRADING = "Upgrading"
    DELETING = "Deleting"


class ConditionType(StrEnum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    # Only with the operator's PodMonitor option: whether the job's PodMonitor exists.
    MONITORED = "Monitored"


class DegradedReason(StrEnum):
    """The reason of the `Degraded` condition (and of the Warning event saying the same)."""

    HEALTHY = "Healthy"
    ERROR = "Error"
    JOB_FAILED = "JobFailed"
    INVALID_SPEC = "InvalidSpec"
    NO_STORAGE = "NoStorage"
    SECRET_CONFLICT = "SecretConflict"
    STORAGE_UNAVAILABLE = "StorageUnavailable"


class MonitorReason(StrEnum):
    """The reason of the `Monitored` condition."""

    CREATED = "PodMonitorCreated"
    READY = "PodMonitorReady"
    CONFLICT = "PodMonitorConflict"
    CRD_MISSING = "PodMonitorCRDMissing"
    INVALID = "PodMonitorInvalid"
    FORBIDDEN = "PodMonitorForbidden"


# Why a Savepoint was taken (its trigger label, and `kind` in the savepoint history).
class SavepointKind(StrEnum):
    MANUAL = "manual"
    PERIODIC = "periodic"
    SUSPEND = "suspend"
    TERMINATE = "terminate"
    UPGRADE = "upgrade"
    DELETION = "deletion"


# `Savepoint.spec.stop`: whether the savepoint stops the job, and how.
class StopMode(StrEnum):
    NONE = "none"
    SUSPEND = "suspend"
    TERMINATE = "terminate"


class SavepointState(StrEnum):
    PENDING = "Pending"
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    ABANDONED = "Abandoned"

    @property
    def terminal(self) -> bool:
        return self in (SavepointState.COMPLETED, SavepointState.FAILED, SavepointState.ABANDONED)


class RunState(StrEnum):
    """A run's state as its coordinator (`GET /v1/job`) or its `job-result.json` reports it.

    Kept as text where it is read (a newer runtime may report a state this list lacks); compared
    against these members.
    """

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    SUSPENDED = "SUSPENDED"
    """The coordinator was shut down (SIGTERM) before the job ended; the next coordinator goes on."""
    UNKNOWN = "UNKNOWN"


class TriggerState(StrEnum):
    """A savepoint trigger's state as the coordinator reports it (`GET /v1/savepoints/<trigger>`)."""

    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"
