"""Pydantic models of the `StreamJob` and `Savepoint` resources; the CRDs are generated from them."""

from ._base import DURATION_HINT, URI_HINT, duration_ms
from .config import ConfigError, OperatorConfig, PodMonitorConfig, ScraperConfig
from .constants import API_VERSION, GROUP, REST_PORT, VERSION
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
    StateBackend,
    StreamJobSpec,
    TaskManagerSpec,
    UpgradeMode,
)

__all__ = [
    "API_VERSION",
    "DURATION_HINT",
    "GROUP",
    "REST_PORT",
    "URI_HINT",
    "VERSION",
    "CheckpointInfo",
    "CheckpointSpec",
    "Condition",
    "ConditionType",
    "ConfigError",
    "CoordinatorSpec",
    "JobState",
    "JobStatus",
    "LifecycleState",
    "OperatorConfig",
    "PipelineSpec",
    "PodMonitorConfig",
    "Resources",
    "SavepointInfo",
    "SavepointKind",
    "SavepointPolicy",
    "SavepointSpec",
    "SavepointState",
    "SavepointStatus",
    "ScraperConfig",
    "StateBackend",
    "StopMode",
    "StreamJobSpec",
    "StreamJobStatus",
    "SubtaskCounts",
    "TaskManagerSpec",
    "UpgradeMode",
    "duration_ms",
]
