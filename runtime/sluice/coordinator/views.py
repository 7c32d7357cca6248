"""What GET /v1/job shows of a job master (docs/reference/rest-api.md)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sluice._states import CheckpointStatus, SubtaskState
from sluice.coordinator.metrics import MetricsHistory, vertex_figures

if TYPE_CHECKING:
    from sluice.coordinator.jobmaster import JobMaster

_METRICS = ("recordsIn", "recordsOut", "lateRecordsDropped")
_RECENT_CHECKPOINTS = 10


def sum_metrics(samples: Iterable[Mapping[str, object]]) -> dict[str, int]:
    total = dict.fromkeys(_METRICS, 0)
    for values in samples:
        for key in _METRICS:
            value = values.get(key, 0)
            total[key] += value if isinstance(value, int) else 0
    return total


def job_view(job: JobMaster, history: MetricsHistory | None = None) -> dict[str, Any]:
    """The job document; rates and gauges come from `history` (None while there is none)."""
    if history is None:
        history = MetricsHistory()
        history.ingest(job.metrics)
    now_ms = time.time_ns() // 1_000_000
    states = list(job.subtasks.values())
    vertices = []
    read_rate: list[float] = []
    written_rate: list[float] = []
    for vertex in job.graph.vertices:
        empty = dict.fromkeys(_METRICS, 0)
        subtasks = []
        figures = []
        for s in range(vertex.parallelism):
            key = f"{vertex.id}:{s}"
            state = job.subtasks.get((vertex.id, s), SubtaskState.CREATED)
            sample = job.metrics.get(key, empty)
            counts = {k: sample.get(k, 0) for k in _METRICS}
            rates = history.subtask(key, finished=state == SubtaskState.FINISHED, now_ms=now_ms)
            figures.append(rates)
            subtasks.append(
                {
                    "index": s,
                    "state": state,
                    "taskManager": job.placement.get((vertex.id, s)),
                    "metrics": {**counts, **rates},
                }
            )
        totals = sum_metrics(job.metrics.get(f"{vertex.id}:{s}", empty) for s in range(vertex.parallelism))
        combined = vertex_figures(figures)
        if vertex.is_source and combined["recordsInPerSecond"] is not None:
            read_rate.append(combined["recordsInPerSecond"])
        if not vertex.outputs and combined["recordsOutPerSecond"] is not None:
            written_rate.append(combined["recordsOutPerSecond"])
        vertices.append(
            {
                "id": vertex.id,
                "name": vertex.name,
                "uids": vertex.uids,
                "parallelism": vertex.parallelism,
                "inputs": [
                    {"vertex": edge.source, "partitioning": edge.partitioning.kind.value}
                    for edge in vertex.inputs
                ],
                "subtasks": subtasks,
                "finishedSubtasks": sum(t["state"] == SubtaskState.FINISHED for t in subtasks),
                "metrics": {**totals, **combined},
            }
        )
    checkpoints = job.checkpoints
    failures = [r for r in checkpoints.history if r.status == CheckpointStatus.FAILED]
    recent = list(reversed(checkpoints.history[-_RECENT_CHECKPOINTS:]))
    end = job.end_ms if job.end_ms is not None else now_ms
    return {
        "jobId": job.config.job_id,
        "name": job.graph.name,
        "state": job.state,
        "startTime": job.start_ms,
        "endTime": job.end_ms,
        "uptimeMs": max(0, end - job.start_ms),
        "attempt": job.attempt,
        "restarts": job.restarts,
        "error": job.error,
        "lastSavepoint": job.savepoints.last,
        "subtasks": {
            "total": len(states),
            "running": sum(not s.ended for s in states),
            "finished": states.count(SubtaskState.FINISHED),
        },
        "checkpoints": {
            "completed": checkpoints.counts["completed"],
            "failed": checkpoints.counts["failed"],
            "lastFailure": (
                {"id": failures[-1].checkpoint_id, "error": failures[-1].error} if failures else None
            ),
            # With its duration, failed ones too (their as_json has figures only once completed).
            "recent": [{**r.as_json(), "durationMs": r.duration_ms} for r in recent],
            # The newest completed checkpoint with what it cost: durationMs, syncMs (record processing
            # stopped), asyncMs, bytesWritten, stateSize (all state it references).
            "lastCompleted": checkpoints.latest.as_json() if checkpoints.latest else None,
        },
        "vertices": vertices,
        "taskManagers": [
            {"index": link.index, "host": link.host, "dataPort": link.data_port, "pid": link.pid}
            for link in job.taskmanager_links()
        ],
        "metrics": sum_metrics(job.metrics.values()),
        "rates": {
            "recordsReadPerSecond": sum(read_rate) if read_rate else None,
            "recordsWrittenPerSecond": sum(written_rate) if written_rate else None,
        },
    }
