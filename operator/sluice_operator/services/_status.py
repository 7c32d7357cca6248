"""Status parts built from observations: the job, the last checkpoint, the savepoint history."""

from __future__ import annotations

import math
from typing import Any

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

from ._time import rfc3339
from .observed import CoordinatorView, JobResult, PodView, SavepointView, Snapshot


def job_from_result(result: JobResult, previous: JobStatus | None) -> JobStatus:
    job = (previous or JobStatus()).model_copy(update={"id": result.job_id, "state": result.state})
    if result.timestamp is not None:
        job.end_time = rfc3339(result.timestamp)
    if result.state == RunState.FINISHED and job.subtasks is not None:
        total = job.subtasks.total
        job.subtasks = SubtaskCounts(running=0, finished=total, total=total)
    return job


def _int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    return value if isinstance(value, int) else None


def _rate(rates: dict[str, Any], key: str) -> float | None:
    value = rates.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(float(value), 1)
    return None  # none measured yet (or an older coordinator): no stale figure


def job_from_coordinator(view: CoordinatorView, pod: PodView, previous: JobStatus | None) -> JobStatus:
    """`status.job` from `GET /v1/job`; what the coordinator leaves out keeps its earlier value."""
    body = view.job
    job = (previous or JobStatus()).model_copy()
    job.id = view.job_id or pod.job_id
    job.state = view.state
    counts = body.get("subtasks") or {}
    job.subtasks = SubtaskCounts(**{k: int(counts.get(k, 0)) for k in ("running", "finished", "total")})
    if (start := _int(body, "startTime")) is not None:
        job.start_time = rfc3339(start)
    if (end := _int(body, "endTime")) is not None:
        job.end_time = rfc3339(end)
    if (restarts := _int(body, "restarts")) is not None:
        job.restarts = restarts
    if pod.restored_from:
        job.restored_from = pod.restored_from
    # Copied into status.job for `kubectl get streamjobs -o wide`.
    found = body.get("rates")
    rates: dict[str, Any] = found if isinstance(found, dict) else {}
    job.records_read_per_second = _rate(rates, "recordsReadPerSecond")
    job.records_written_per_second = _rate(rates, "recordsWrittenPerSecond")
    return job


def last_checkpoint(stored: Snapshot | None, view: CoordinatorView | None = None) -> CheckpointInfo | None:
    """The coordinator's latest checkpoint while it runs, else the newest one found in storage."""
    latest = (view.checkpoints or {}).get("latest") if view is not None else None
    if (
        isinstance(latest, dict)
        and latest.get("id") is not None
        and (stored is None or int(latest["id"]) >= stored.checkpoint_id or latest.get("path") != stored.path)
    ):
        history = (view.checkpoints or {}).get("history") if view is not None else None
        return _reported(latest, stored, history if isinstance(history, list) else [])
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


def _copy_costs(out: CheckpointInfo, record: dict[str, Any]) -> None:
    """The figures the coordinator's history gives the checkpoint; one that is not a number is left out."""
    for field, key, kind in _COSTS:
        value = record.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
            setattr(out, field, kind(value))


_COSTS: tuple[tuple[str, str, type[int] | type[float]], ...] = (
    ("duration_ms", "durationMs", int),
    ("sync_ms", "syncMs", float),
    ("async_ms", "asyncMs", float),
    ("bytes_written", "bytesWritten", int),
    ("state_size", "stateSize", int),
)


def _reported(latest: dict[str, Any], stored: Snapshot | None, history: list[Any]) -> CheckpointInfo:
    """The coordinator's latest checkpoint, with what storage adds when it has read the same one."""
    out = CheckpointInfo(
        id=int(latest["id"]),
        path=str(latest.get("path") or ""),
        kind=str(latest.get("kind") or "checkpoint"),
        fully_finished_operators=[str(u) for u in latest.get("fullyFinishedOperators") or []],
    )
    stamp = latest.get("timestamp", latest.get("completionTime"))
    if isinstance(stamp, int):
        out.time = rfc3339(stamp)
    _copy_costs(out, next((r for r in history if isinstance(r, dict) and r.get("id") == out.id), {}))
    if stored is not None and stored.path == out.path:
        out.operators = len(stored.operators)
        out.all_operators_finished = stored.all_finished
    return out


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
