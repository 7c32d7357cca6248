"""`Savepoint`: one savepoint of a StreamJob, taken while it runs or as the way it stops."""

from __future__ import annotations

from pydantic import Field

from ._base import CamelModel, ObjectName, StatusModel, Uri
from .enums import SavepointState, StopMode


class SavepointSpec(CamelModel):
    """Desired savepoint; immutable once the savepoint has been triggered."""

    job_name: ObjectName = Field(description="The StreamJob (same namespace) to take the savepoint of.")
    stop: StopMode = Field(
        default=StopMode.NONE,
        description=(
            "none: the job keeps running; suspend: stop without drain (resumable); terminate: drain and stop."
        ),
    )
    target_directory: Uri | None = Field(
        default=None, description=("Default: the job's spec.savepoints.targetDirectory.")
    )
    dispose_on_delete: bool = Field(
        default=False, description=("Delete the savepoint's files when this object is deleted.")
    )
    backoff_limit: int = Field(
        default=0, ge=0, le=100, description=("Retries of a failed savepoint before it is marked Failed.")
    )


class SavepointStatus(StatusModel):
    state: SavepointState = SavepointState.PENDING
    trigger_id: str | None = Field(
        default=None, description="The coordinator's trigger id of the attempt in flight."
    )
    job_id: str | None = Field(default=None, description="The job run the savepoint was triggered on.")
    path: str | None = None
    checkpoint_id: int | None = None
    trigger_time: str | None = None
    completion_time: str | None = None
    failures: int = 0
    error: str | None = None
    observed_generation: int | None = None
