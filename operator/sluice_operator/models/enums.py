"""Every state, mode and reason the operator compares in code, as one leaf of StrEnums.

A StrEnum member is its string: it serializes, compares and formats exactly as the literal it
replaces, so the CRD schemas and the statuses written are unchanged. Enums used as field types say
what they are in a comment, not a docstring: pydantic would put a docstring into the CRD schema.
The runtime's vocabulary is not here: it is the contract's (`sluice_contract.states`), which
`sluice_operator.models` names as the operator uses it.
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


UNKNOWN_STATE = "UNKNOWN"
"""The state shown when the runtime reported none: a run or trigger the coordinator does not know."""


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"
