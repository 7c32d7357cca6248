"""`StreamJob.status`: what the operator observed, written only by the operator."""

from __future__ import annotations

from pydantic import Field

from ._base import StatusModel
from .enums import LifecycleState


class Condition(StatusModel):
    """A Kubernetes-style condition; `lastTransitionTime` changes only when `status` changes."""

    type: str
    status: str = Field(description="True, False or Unknown.")
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class SubtaskCounts(StatusModel):
    running: int = 0
    finished: int = 0
    total: int = 0


class JobStatus(StatusModel):
    """The current (or last) run of the job as the coordinator or the job result store reports it."""

    id: str | None = None
    state: str | None = Field(
        default=None, description="CREATED, RUNNING, RESTARTING, FINISHED, FAILED, CANCELED."
    )
    subtasks: SubtaskCounts | None = None
    start_time: str | None = None
    end_time: str | None = None
    restarts: int | None = None
    restored_from: str | None = Field(
        default=None, description="Savepoint or checkpoint this run started from."
    )
    records_read_per_second: float | None = Field(
        default=None, description="Records the sources read per second, while the coordinator runs."
    )
    records_written_per_second: float | None = Field(
        default=None, description="Records the sinks took per second, while the coordinator runs."
    )


class CheckpointInfo(StatusModel):
    id: int
    path: str
    time: str | None = None
    kind: str = "checkpoint"
    operators: int | None = Field(default=None, description="Operators in the checkpoint.")
    fully_finished_operators: list[str] = Field(default_factory=list)
    all_operators_finished: bool = False
    # What it cost, while the coordinator that took it runs (GET /v1/checkpoints has every one).
    duration_ms: int | None = Field(default=None, description="Trigger to completion.")
    sync_ms: float | None = Field(
        default=None, description="The slowest subtask's synchronous part, while record processing stopped."
    )
    async_ms: float | None = Field(
        default=None, description="The slowest subtask's asynchronous part, state written beside processing."
    )
    bytes_written: int | None = Field(
        default=None, description="Bytes all subtasks wrote for it (incremental state: what changed)."
    )
    state_size: int | None = Field(
        default=None, description="Bytes of all state it references, files shared with earlier ones included."
    )


class SavepointInfo(StatusModel):
    name: str | None = Field(default=None, description="The Savepoint object, when there is one.")
    path: str
    time: str | None = None
    kind: str | None = None


class StreamJobStatus(StatusModel):
    lifecycle_state: LifecycleState = LifecycleState.CREATED
    job: JobStatus | None = None
    last_checkpoint: CheckpointInfo | None = None
    last_savepoint: SavepointInfo | None = None
    savepoint_history: list[SavepointInfo] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    error: str | None = None
    last_reconciled_spec: str | None = Field(
        default=None, description=("JSON of the spec the current run was deployed with.")
    )
    last_stable_spec: str | None = Field(
        default=None, description=("JSON of the last spec whose run reached Running (or finished).")
    )
    dashboard_url: str | None = Field(
        default=None,
        description=(
            "The coordinator's web dashboard inside the cluster, while a coordinator runs "
            "(kubectl port-forward to its Service to open it)."
        ),
    )
    checkpoint_runs: list[str] = Field(
        default_factory=list,
        description=(
            "Job ids of the runs this StreamJob started whose checkpoint directories may still exist, "
            "oldest first. The operator deletes an earlier run's directory once the current run has a "
            "checkpoint of its own and nothing (restore point, savepoint) refers to it."
        ),
    )
