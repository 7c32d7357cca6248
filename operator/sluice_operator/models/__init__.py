"""Pydantic models of the `StreamJob` and `Savepoint` resources; the CRDs are generated from them."""

from sluice_contract.states import CheckpointStatus as TriggerState  # a savepoint trigger's status
from sluice_contract.states import JobState as RunState  # `JobState` here is `spec.state`
from sluice_contract.states import RestartKind
from sluice_contract.states import StopMode as TriggerStop  # a trigger's stop; `StopMode` has NONE too

from ._base import DURATION_HINT, URI_HINT, duration_ms
from .config import ConfigError, OperatorConfig, PodMonitorConfig, ScraperConfig
from .constants import API_VERSION, GROUP, REST_PORT, REST_PORT_NAME, VERSION
from .enums import (
    UNKNOWN_STATE,
    ConditionType,
    DegradedReason,
    JobState,
    LifecycleState,
    MonitorReason,
    PodPhase,
    SavepointKind,
    SavepointState,
    StateBackend,
    StopMode,
    UpgradeMode,
)
from .savepoint import SavepointSpec, SavepointStatus
from .status import (
    CheckpointInfo,
    Condition,
    JobStatus,
    SavepointInfo,
    StreamJobStatus,
    SubtaskCounts,
)
from .streamjob import (
    CheckpointSpec,
    CoordinatorSpec,
    PipelineSpec,
    Resources,
    SavepointPolicy,
    StreamJobSpec,
    TaskManagerSpec,
)

__all__ = [
    "API_VERSION",
    "DURATION_HINT",
    "GROUP",
    "REST_PORT",
    "REST_PORT_NAME",
    "UNKNOWN_STATE",
    "URI_HINT",
    "VERSION",
    "CheckpointInfo",
    "CheckpointSpec",
    "Condition",
    "ConditionType",
    "ConfigError",
    "CoordinatorSpec",
    "DegradedReason",
    "JobState",
    "JobStatus",
    "LifecycleState",
    "MonitorReason",
    "OperatorConfig",
    "PipelineSpec",
    "PodMonitorConfig",
    "PodPhase",
    "Resources",
    "RestartKind",
    "RunState",
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
    "TriggerState",
    "TriggerStop",
    "UpgradeMode",
    "duration_ms",
]
