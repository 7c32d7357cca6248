"""What one reconcile observed: plain data, built by `observe` and read by the pure decision functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice_contract.metadata import MetadataSummary
from sluice_contract.rest import CheckpointsSummary, CheckpointSummary, JobSummary, SavepointProgress
from sluice_contract.results import JobResult
from sluice_contract.states import CheckpointKind, StopMode
from sluice_operator.models import REST_PORT, UNKNOWN_STATE, PodPhase, SavepointSpec, SavepointStatus


@dataclass(frozen=True)
class PodView:
    """The coordinator pod of the current run."""

    name: str
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    ip: str | None
    job_id: str | None
    spec_hash: str | None
    restored_from: str | None
    rest_port: int = REST_PORT
    terminating: bool = False
    reason: str | None = None  # why the container ended, e.g. OOMKilled, Error; or the pod's reason
    exit_code: int | None = None
    finished_ms: int | None = None  # when the coordinator container ended

    @property
    def exited(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)


@dataclass(frozen=True)
class Snapshot:
    """A checkpoint or savepoint read from its `_metadata` (`sluice_contract.metadata`)."""

    path: str
    checkpoint_id: int
    job_id: str
    kind: CheckpointKind
    timestamp: int
    stop_mode: StopMode | None
    operators: tuple[str, ...]
    fully_finished: tuple[str, ...]

    @staticmethod
    def of(path: str, metadata: MetadataSummary) -> Snapshot:
        return Snapshot(
            path,
            metadata.checkpoint_id,
            metadata.job_id,
            metadata.kind,
            metadata.timestamp,
            metadata.stop_mode,
            tuple(op.uid for op in metadata.operators),
            metadata.fully_finished,
        )

    @property
    def all_finished(self) -> bool:
        return bool(self.operators) and set(self.operators) == set(self.fully_finished)


@dataclass(frozen=True)
class CoordinatorView:
    """What the coordinator's REST API says (`GET /v1/job`, `GET /v1/checkpoints`)."""

    job: JobSummary
    checkpoints: CheckpointsSummary | None

    @staticmethod
    def parse(job: Any, checkpoints: Any = None) -> CoordinatorView:
        """From the documents as sent; a malformed one raises DocumentError naming the field."""
        return CoordinatorView(
            JobSummary.from_json(job, "job"),
            None if checkpoints is None else CheckpointsSummary.from_json(checkpoints, "checkpoints"),
        )

    @property
    def job_id(self) -> str | None:
        return self.job.job_id or None

    @property
    def state(self) -> str:
        return self.job.state or UNKNOWN_STATE

    @property
    def latest_checkpoint(self) -> CheckpointSummary | None:
        return self.checkpoints.latest if self.checkpoints is not None else None


@dataclass(frozen=True)
class SavepointView:
    name: str
    spec: SavepointSpec | None  # None when the object's spec is invalid
    status: SavepointStatus
    labels: dict[str, str]
    created: str  # RFC 3339, sorts in time order
    owned: bool  # made by the operator for this job (has the job as owner)
    spec_error: str | None = None
    uid: str | None = None
    deleting: bool = False  # has a deletionTimestamp: its finalizer is disposing of it
    finalized: bool = True  # carries the operator's finalizer (what disposeOnDelete relies on)
    namespace: str = ""


@dataclass
class Observed:
    """Everything a StreamJob reconcile looks at, gathered before any decision."""

    pod: PodView | None = None
    stray_pods: list[str] = field(default_factory=list)  # job pods that belong to no live coordinator
    coordinator: CoordinatorView | None = None
    coordinator_error: str | None = None
    result: JobResult | None = None  # of the current run (pod's job id, else status.job.id)
    """The run's `job-result.json`, as its coordinator stored it: the contract's one reading of it."""
    latest_checkpoint: Snapshot | None = None  # newest of the current run in storage (no coordinator)
    last_result_snapshot: Snapshot | None = None  # the result's lastCheckpoint, read from storage
    savepoints: list[SavepointView] = field(default_factory=list)
    savepoint_polls: dict[str, SavepointProgress] = field(default_factory=dict)  # by trigger id
    storage_error: str | None = None
    # The coordinator's REST token, for the calls acting on what was observed; kept out of any repr.
    rest_token: str | None = field(default=None, repr=False)
