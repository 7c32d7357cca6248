"""What GET /v1/job shows of a job master (docs/reference/rest-api.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluice.coordinator.jobmaster import JobMaster

_METRICS = ("recordsIn", "recordsOut", "lateRecordsDropped")


def sum_metrics(samples: Iterable[dict[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(_METRICS, 0)
    for values in samples:
        for key in _METRICS:
            total[key] += values.get(key, 0)
    return total


def job_view(job: JobMaster) -> dict[str, Any]:
    states = list(job.subtasks.values())
    vertices = []
    for vertex in job.graph.vertices:
        empty = dict.fromkeys(_METRICS, 0)
        per_subtask = [job.metrics.get(f"{vertex.id}:{s}", empty) for s in range(vertex.parallelism)]
        subtasks = [
            {
                "index": s,
                "state": job.subtasks.get((vertex.id, s), "CREATED"),
                "taskManager": job.placement.get((vertex.id, s)),
                "metrics": per_subtask[s],
            }
            for s in range(vertex.parallelism)
        ]
        vertices.append(
            {
                "id": vertex.id,
                "name": vertex.name,
                "uids": vertex.uids,
                "parallelism": vertex.parallelism,
                "subtasks": subtasks,
                "metrics": sum_metrics(per_subtask),
            }
        )
    checkpoints = job.checkpoints
    failures = [r for r in checkpoints.history if r.status == "FAILED"] if checkpoints else []
    return {
        "jobId": job.config.job_id,
        "name": job.graph.name,
        "state": job.state,
        "startTime": job.start_ms,
        "endTime": job.end_ms,
        "attempt": job.attempt,
        "restarts": job.restarts,
        "error": job.error,
        "lastSavepoint": job.last_savepoint,
        "subtasks": {
            "total": len(states),
            "running": sum(s not in ("FINISHED", "FAILED", "CANCELED") for s in states),
            "finished": states.count("FINISHED"),
        },
        "checkpoints": {
            "completed": checkpoints.counts["completed"] if checkpoints else 0,
            "failed": checkpoints.counts["failed"] if checkpoints else 0,
            "lastFailure": (
                {"id": failures[-1].checkpoint_id, "error": failures[-1].error} if failures else None
            ),
        },
        "vertices": vertices,
        "taskManagers": [
            {"index": link.index, "host": link.host, "dataPort": link.data_port, "pid": link.pid}
            for link in job.taskmanager_links()
        ],
        "metrics": sum_metrics(job.metrics.values()),
    }
