"""Status parts built from observations: the job, the last checkpoint, the savepoint history."""

from __future__ import annotations

import math
from typing import TypeVar

from sluice_contract.rest import CheckpointSummary
from sluice_contract.results import JobResult
from sluice_operator.models import (
    CheckpointInfo,
    JobStatus,
    RunState,
    SavepointInfo,
    SavepointKind,
    SavepointState,
    SubtaskCounts,
)
from sluice_operator.models import constants as c

from ..common._time import rfc3339
from ..common.observed import CoordinatorView, PodView, SavepointView, Snapshot

N = TypeVar("N", int, float)


def job_from_result(result: JobResult, previous: JobStatus | None) -> JobStatus:
    job = (previous or JobStatus()).model_copy(update={"id": result.job_id, "state": result.state.value})
    job.end_time = rfc3339(result.timestamp)
    if result.state == RunState.FINISHED and job.subtasks is not None:
        total = job.subtasks.total
        job.subtasks = SubtaskCounts(running=0, finished=total, total=total)
    return job


def _rate(value: float | None) -> float | None:
    # None: none measured yet (or an older coordinator), no stale figure.
    return round(value, 1) if value is not None and math.isfinite(value) else None


def job_from_coordinator(view: CoordinatorView, pod: PodView, previous: JobStatus | None) -> JobStatus:
    """`status.job` from `GET /v1/job`; what the coordinator leaves out keeps its earlier value."""
    body = view.job
    job = (previous or JobStatus()).model_copy()
    job.id = view.job_id or pod.job_id
    job.state = view.state
    counts = body.subtasks
    job.subtasks = SubtaskCounts(running=counts.running, finished=counts.finished, total=counts.total)
    if body.start_time is not None:
        job.start_time = rfc3339(body.start_time)
    if body.end_time is not None:
        job.end_time = rfc3339(body.end_time)
    if body.restarts is not None:
        job.restarts = body.restarts
    if pod.restored_from:
        job.restored_from = pod.restored_from
    # Copied into status.job for `kubectl get streamjobs -o wide`.
    job.records_read_per_second = _rate(body.rates.records_read_per_second)
    job.records_written_per_second = _rate(body.rates.records_written_per_second)
    return job


def last_checkpoint(stored: Snapshot | None, view: CoordinatorView | None = None) -> CheckpointInfo | None:
    """The coordinator's latest checkpoint while it runs, else the newest one found in storage."""
    latest = view.latest_checkpoint if view is not None else None
    if latest is not None and (
        stored is None or latest.id >= stored.checkpoint_id or latest.path != stored.path
    ):
        assert view is not None and view.checkpoints is not None
        return _reported(latest, stored, view.checkpoints.history)
    if stored is None:
        return None
    return CheckpointInfo(
        id=stored.checkpoint_id,
        path=stored.path,
        kind=stored.kind,
        operators=len(stored.operators),
        fully_finished_operators=list(stored.fully_finished),
        all_operators_finished=stored.all_finished,
        time=rfc3339(stored.timestamp) if stored.timestamp is not None else None,
    )


def _reported(
    latest: CheckpointSummary, stored: Snapshot | None, history: tuple[CheckpointSummary, ...]
) -> CheckpointInfo:
    """The coordinator's latest checkpoint, with what storage adds when it has read the same one."""
    out = CheckpointInfo(
        id=latest.id,
        path=latest.path or "",
        kind=latest.kind,
        fully_finished_operators=list(latest.fully_finished_operators or ()),
    )
    if latest.completion_time is not None:
        out.time = rfc3339(latest.completion_time)
    # The figures the coordinator's history gives the checkpoint; one that is not a number is left out.
    record = next((r for r in history if r.id == out.id), None)
    if record is not None:
        out.duration_ms = _figure(record.duration_ms)
        out.sync_ms = _figure(record.sync_ms)
        out.async_ms = _figure(record.async_ms)
        out.bytes_written = _figure(record.bytes_written)
        out.state_size = _figure(record.state_size)
    if stored is not None and stored.path == out.path:
        out.operators = len(stored.operators)
        out.all_operators_finished = stored.all_finished
    return out


def _figure(value: N | None) -> N | None:
    return value if value is not None and 0 <= value < math.inf else None


def savepoint_summary(
    views: list[SavepointView], last: SavepointInfo | None
) -> tuple[SavepointInfo | None, list[SavepointInfo]]:
    """`lastSavepoint` and `savepointHistory` from the job's completed Savepoint objects.

    With none left, the last savepoint recorded stays: it is still where a job would resume from.
    """
    completed = sorted(
        (v for v in views if v.status.state is SavepointState.COMPLETED and v.status.path),
        key=lambda v: v.status.completion_time or v.created,
        reverse=True,
    )
    history = [
        SavepointInfo(
            name=v.name,
            path=v.status.path or "",
            time=v.status.completion_time,
            kind=v.labels.get(c.LABEL_TRIGGER, SavepointKind.MANUAL.value),
        )
        for v in completed
    ]
    return (history[0] if history else last), history
