"""Observed situations for the decision tests: a job with or without a coordinator, results, savepoints."""

from __future__ import annotations

from typing import Any

from sluice_contract.results import JobResult
from sluice_contract.states import CheckpointKind, JobState
from sluice_operator import manifests as m
from sluice_operator.models import SavepointSpec, SavepointStatus, StreamJobSpec, StreamJobStatus
from sluice_operator.services.common.context import JobContext
from sluice_operator.services.common.observed import (
    CoordinatorView,
    PodView,
    SavepointView,
    Snapshot,
)
from sluice_operator.services.common.plan import Plan

from ._fixtures import CONFIG, OWNER, spec

NOW = 1_700_000_600_000
NEW_ID = "f" * 32
OLD_ID = "e" * 32


def ctx(
    job: StreamJobSpec | None = None, status: dict[str, Any] | None = None, generation: int = 3
) -> JobContext:
    return JobContext(
        owner=OWNER,
        generation=generation,
        spec=job or spec(),
        status=StreamJobStatus.model_validate(status or {}),
        config=CONFIG,
        now_ms=NOW,
        new_job_id=NEW_ID,
    )


def status_of(plan: Plan) -> dict[str, Any]:
    """The decided status as the operator writes it (camelCase, no nulls)."""
    return plan.status.model_dump(mode="json", by_alias=True, exclude_none=True)


def deployed_status(job: StreamJobSpec, lifecycle: str = "Running", **extra: Any) -> dict[str, Any]:
    return {
        "lifecycleState": lifecycle,
        "job": {"id": OLD_ID, "state": "RUNNING"},
        "lastReconciledSpec": m.deployed_spec_json(job),
        **extra,
    }


def pod(job: StreamJobSpec, phase: str = "Running", **changes: Any) -> PodView:
    values: dict[str, Any] = {
        "name": "counts-coordinator",
        "phase": phase,
        "ip": "10.0.0.5",
        "job_id": OLD_ID,
        "spec_hash": m.spec_hash(job),
        "restored_from": None,
    }
    values.update(changes)
    return PodView(**values)


def coordinator(state: str = "RUNNING", **job: Any) -> CoordinatorView:
    body = {
        "jobId": OLD_ID,
        "state": state,
        "startTime": NOW - 300_000,
        "restarts": 0,
        "subtasks": {"total": 8, "running": 6, "finished": 2},
        **job,
    }
    checkpoints = {
        "latest": {
            "id": 7,
            "kind": "checkpoint",
            "status": "COMPLETED",
            "triggerTime": NOW - 5_100,
            "completionTime": NOW - 5_000,
            "path": f"s3://b/chk/{OLD_ID}/chk-7",
            "fullyFinishedOperators": ["numbers"],
        }
    }
    return CoordinatorView.parse(body, checkpoints)


def result(state: str = "FINISHED", savepoint: str | None = None, job_id: str = OLD_ID) -> JobResult:
    return JobResult(
        job_id=job_id,
        state=JobState(state),
        timestamp=NOW - 1_000,
        stop_savepoint=savepoint,
        last_checkpoint=f"s3://b/chk/{job_id}/chk-9",
        error=None if state == "FINISHED" else "boom",
    )


def snapshot(path: str = f"s3://b/chk/{OLD_ID}/chk-9", finished: tuple[str, ...] = ("a", "b")) -> Snapshot:
    return Snapshot(
        path=path,
        checkpoint_id=9,
        job_id=OLD_ID,
        kind=CheckpointKind.CHECKPOINT,
        timestamp=NOW - 2_000,
        stop_mode=None,
        operators=("a", "b"),
        fully_finished=finished,
    )


def savepoint(
    name: str,
    stop: str = "none",
    *,
    owned: bool = True,
    created: str = "2023-11-14T22:00:00Z",
    labels: dict[str, str] | None = None,
    **status: Any,
) -> SavepointView:
    return SavepointView(
        name=name,
        spec=SavepointSpec.model_validate({"jobName": "counts", "stop": stop}),
        status=SavepointStatus.model_validate(status),
        labels=labels or {},
        created=created,
        owned=owned,
    )
