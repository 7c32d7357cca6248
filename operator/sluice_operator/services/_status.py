"""Status parts built from observations: the job, the last checkpoint, the savepoint history."""

from __future__ import annotations

from typing import Any

from sluice_operator.models import SavepointState
from sluice_operator.models import constants as c

from ._time import rfc3339
from .observed import CoordinatorView, JobResult, PodView, SavepointView, Snapshot


def job_from_result(result: JobResult, previous: dict[str, Any] | None) -> dict[str, Any]:
    job = dict(previous or {})
    job.update({"id": result.job_id, "state": result.state})
    if result.timestamp is not None:
        job["endTime"] = rfc3339(result.timestamp)
    subtasks = job.get("subtasks")
    if result.state == "FINISHED" and isinstance(subtasks, dict):
        job["subtasks"] = {
            "running": 0,
            "finished": subtasks.get("total", 0),
            "total": subtasks.get("total", 0),
        }
    return job


# Rates of `GET /v1/job`'s "rates", copied into status.job (`kubectl get streamjobs -o wide`).
_RATES = ("recordsReadPerSecond", "recordsWrittenPerSecond")


def job_from_coordinator(
    view: CoordinatorView, pod: PodView, previous: dict[str, Any] | None
) -> dict[str, Any]:
    job = dict(previous or {})
    body = view.job
    job["id"] = view.job_id or pod.job_id
    job["state"] = view.state
    counts = body.get("subtasks") or {}
    job["subtasks"] = {k: int(counts.get(k, 0)) for k in ("running", "finished", "total")}
    if isinstance(body.get("startTime"), int):
        job["startTime"] = rfc3339(body["startTime"])
    if isinstance(body.get("endTime"), int):
        job["endTime"] = rfc3339(body["endTime"])
    if isinstance(body.get("restarts"), int):
        job["restarts"] = body["restarts"]
    if pod.restored_from:
        job["restoredFrom"] = pod.restored_from
    found = body.get("rates")
    rates: dict[str, Any] = found if isinstance(found, dict) else {}
    for key in _RATES:
        value = rates.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            job[key] = round(float(value), 1)
        else:  # none measured yet (or an older coordinator): no stale figure
            job.pop(key, None)
    return job


def last_checkpoint(stored: Snapshot | None, view: CoordinatorView | None = None) -> dict[str, Any] | None:
    """The coordinator's latest checkpoint while it runs, else the newest one found in storage."""
    latest = (view.checkpoints or {}).get("latest") if view is not None else None
    if (
        isinstance(latest, dict)
        and latest.get("id") is not None
        and (stored is None or int(latest["id"]) >= stored.checkpoint_id or latest.get("path") != stored.path)
    ):
        finished = [str(u) for u in latest.get("fullyFinishedOperators") or []]
        out: dict[str, Any] = {
            "id": int(latest["id"]),
            "path": str(latest.get("path") or ""),
            "kind": str(latest.get("kind") or "checkpoint"),
            "fullyFinishedOperators": finished,
        }
        stamp = latest.get("timestamp", latest.get("completionTime"))
        if isinstance(stamp, int):
            out["time"] = rfc3339(stamp)
        if stored is not None and stored.path == out["path"]:
            out.update(operators=len(stored.operators), allOperatorsFinished=stored.all_finished)
        return out
    if stored is None:
        return None
    out = {
        "id": stored.checkpoint_id,
        "path": stored.path,
        "kind": stored.kind,
        "operators": len(stored.operators),
        "fullyFinishedOperators": list(stored.fully_finished),
        "allOperatorsFinished": stored.all_finished,
    }
    if stored.timestamp is not None:
        out["time"] = rfc3339(stored.timestamp)
    return out


def savepoint_summary(views: list[SavepointView], status: dict[str, Any]) -> dict[str, Any]:
    """`lastSavepoint` and `savepointHistory` from the job's completed Savepoint objects."""
    completed = sorted(
        (v for v in views if v.status.state is SavepointState.COMPLETED and v.status.path),
        key=lambda v: v.status.completion_time or v.created,
        reverse=True,
    )
    history = [
        {
            "name": v.name,
            "path": v.status.path,
            "time": v.status.completion_time,
            "kind": v.labels.get(c.LABEL_TRIGGER, "manual"),
        }
        for v in completed
    ]
    history = [{k: val for k, val in entry.items() if val is not None} for entry in history]
    out: dict[str, Any] = {"savepointHistory": history}
    if history:
        out["lastSavepoint"] = history[0]
    elif status.get("lastSavepoint"):
        out["lastSavepoint"] = status["lastSavepoint"]
    return out
