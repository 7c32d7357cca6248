"""Pydantic models of the `StreamJob` and `Savepoint` resources; the CRDs are generated from them."""

from ._base import DURATION_HINT, URI_HINT, duration_ms
from .constants import API_VERSION, GROUP, VERSION
from .savepoint import SavepointSpec, SavepointState, SavepointStatus, StopMode
from .status import (
    CheckpointInfo,
    Condition,
    ConditionType,
    JobStatus,
    LifecycleState,
    SavepointInfo,
    SavepointKind,
    StreamJobStatus,
    SubtaskCounts,
)
from .streamjob import (
    CheckpointSpec,
    CoordinatorSpec,
    JobState,
    PipelineSpec,
    Resources,
    SavepointPolicy,
    StreamJobSpec,
    TaskManagerSpec,
    UpgradeMode,
)

__all__ = [
    "API_VERSION",
    "DURATION_HINT",
    "GROUP",
    "URI_HINT",
    "VERSION",
    "CheckpointInfo",
    "CheckpointSpec",
    "Condition",
    "ConditionType",
    "CoordinatorSpec",
    "JobState",
    "JobStatus",
    "LifecycleState",
    "PipelineSpec",
    "Resources",
    "SavepointInfo",
    "SavepointKind",
    "SavepointPolicy",
    "SavepointSpec",
    "SavepointState",
    "SavepointStatus",
    "StopMode",
    "StreamJobSpec",
    "StreamJobStatus",
    "SubtaskCounts",
    "TaskManagerSpec",
    "UpgradeMode",
    "duration_ms",
]
