"""GET /metrics: the job document in Prometheus' text format (docs/reference/rest-api.md lists them).

Built at scrape time from the same figures as GET /v1/job, in a registry of its own (the process-wide
default registry would mix in whatever else runs in the driver). Every series carries `job_id`
(Prometheus keeps `job` for its own scrape job); subtask series add `vertex` (the operator uids of the
chain), `vertex_id` and `subtask`. A figure not known yet (a rate before two heartbeats, a watermark
before the first) is left out rather than exported as 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from sluice._states import JobState, SubtaskState
from sluice.coordinator.metrics import MetricsHistory
from sluice.coordinator.views import job_view

if TYPE_CHECKING:
    from sluice.coordinator.jobmaster import JobMaster

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

JOB_STATES = tuple(JobState)
# CREATED is only what the job view shows before a TaskManager reported: no subtask is counted in it.
SUBTASK_STATES = tuple(s for s in SubtaskState if s != SubtaskState.CREATED)

# (field of a subtask's metrics, metric name, help, counter?)
_SUBTASK_SERIES = (
    ("recordsIn", "sluice_subtask_records_in", "Records the subtask took in (a source: emitted).", True),
    ("recordsOut", "sluice_subtask_records_out", "Records the subtask's chain emitted or wrote.", True),
    ("lateRecordsDropped", "sluice_subtask_late_records_dropped", "Records dropped as late.", True),
    ("recordsInPerSecond", "sluice_subtask_records_in_per_second", "Records in per second.", False),
    ("recordsOutPerSecond", "sluice_subtask_records_out_per_second", "Records out per second.", False),
    (
        "busyTimeMsPerSecond",
        "sluice_subtask_busy_time_ms_per_second",
        "Milliseconds per second neither idle nor backpressured.",
        False,
    ),
    (
        "backPressuredTimeMsPerSecond",
        "sluice_subtask_backpressured_time_ms_per_second",
        "Milliseconds per second spent waiting for room in a full output channel.",
        False,
    ),
    (
        "idleTimeMsPerSecond",
        "sluice_subtask_idle_time_ms_per_second",
        "Milliseconds per second spent waiting for input.",
        False,
    ),
    ("watermarkLagMs", "sluice_subtask_watermark_lag_ms", "Wall clock minus the input watermark.", False),
    (
        "inputQueueUsage",
        "sluice_subtask_input_queue_usage",
        "Queued input events over capacity (0-1).",
        False,
    ),
)


class _JobCollector(Collector):
    def __init__(self, job: JobMaster, history: MetricsHistory) -> None:
        self.job = job
        self.history = history

    def collect(self) -> Iterator[Any]:
        self.history.ingest(self.job.metrics)
        view = job_view(self.job, self.history)
        job_id = view["jobId"]
        state = GaugeMetricFamily(
            "sluice_job_state", "1 for the job's current state.", labels=["job_id", "state"]
        )
        for name in sorted({*JOB_STATES, view["state"]}):
            state.add_metric([job_id, name], 1.0 if name == view["state"] else 0.0)
        yield state
        yield _gauge(
            "sluice_job_uptime_seconds", "Seconds since the job started.", job_id, view["uptimeMs"] / 1000
        )
        yield _counter(
            "sluice_job_restarts", "Restarts of the job (attempts after the first).", job_id, view["restarts"]
        )
        rates = view["rates"]
        for field, name, what in (
            (
                "recordsReadPerSecond",
                "sluice_job_records_read_per_second",
                "Records its sources emit per second.",
            ),
            (
                "recordsWrittenPerSecond",
                "sluice_job_records_written_per_second",
                "Records its sinks take per second.",
            ),
        ):
            if rates[field] is not None:
                yield _gauge(name, what, job_id, rates[field])
        yield from self._subtasks(job_id, view)
        yield from self._checkpoints(job_id, view)

    def _subtasks(self, job_id: str, view: dict[str, Any]) -> Iterator[Any]:
        labels = ["job_id", "vertex", "vertex_id", "subtask"]
        families = {
            field: (CounterMetricFamily if counter else GaugeMetricFamily)(name, what, labels=labels)
            for field, name, what, counter in _SUBTASK_SERIES
        }
        states = GaugeMetricFamily(
            "sluice_vertex_subtasks",
            "Subtasks of a vertex in each state.",
            labels=["job_id", "vertex", "vertex_id", "state"],
        )
        for vertex in view["vertices"]:
            vid = str(vertex["id"])
            counts = dict.fromkeys(SUBTASK_STATES, 0)
            for subtask in vertex["subtasks"]:
                counts[subtask["state"]] = counts.get(subtask["state"], 0) + 1
                values = [job_id, vertex["name"], vid, str(subtask["index"])]
                for field, family in families.items():
                    value = subtask["metrics"].get(field)
                    if value is not None:
                        family.add_metric(values, float(value))
            for name, count in counts.items():
                states.add_metric([job_id, vertex["name"], vid, name], float(count))
        yield from families.values()
        yield states

    def _checkpoints(self, job_id: str, view: dict[str, Any]) -> Iterator[Any]:
        cc = self.job.checkpoints
        counts = cc.counts
        total = CounterMetricFamily(
            "sluice_checkpoints", "Checkpoints and savepoints by outcome.", labels=["job_id", "status"]
        )
        for status in ("completed", "failed"):
            total.add_metric([job_id, status], float(counts.get(status, 0)))
        yield total
        yield _gauge(
            "sluice_checkpoints_in_progress",
            "Checkpoints triggered and not yet completed.",
            job_id,
            len(cc.pending),
        )
        latest = next((c for c in view["checkpoints"]["recent"] if c["status"] == "COMPLETED"), None)
        if latest is None:
            return
        yield _gauge(
            "sluice_last_checkpoint_id",
            "Id of the latest completed checkpoint or savepoint.",
            job_id,
            latest["id"],
        )
        yield _gauge(
            "sluice_last_checkpoint_completion_timestamp_seconds",
            "When the latest checkpoint or savepoint completed (Unix time).",
            job_id,
            latest["completionTime"] / 1000,
        )
        for field, name, what, scale in (
            ("durationMs", "sluice_last_checkpoint_duration_seconds", "Trigger to completion.", 1000),
            (
                "syncMs",
                "sluice_last_checkpoint_sync_duration_seconds",
                "Slowest subtask's synchronous part (record processing stopped).",
                1000,
            ),
            ("asyncMs", "sluice_last_checkpoint_async_duration_seconds", "Slowest asynchronous part.", 1000),
            ("bytesWritten", "sluice_last_checkpoint_written_bytes", "Bytes written for it.", 1),
            ("stateSize", "sluice_last_checkpoint_state_size_bytes", "Size of all state it references.", 1),
        ):
            value = latest.get(field)
            if isinstance(value, int | float) and not isinstance(value, bool):
                yield _gauge(name, what, job_id, value / scale)


def _gauge(name: str, what: str, job_id: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, what, labels=["job_id"])
    family.add_metric([job_id], float(value))
    return family


def _counter(name: str, what: str, job_id: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, what, labels=["job_id"])
    family.add_metric([job_id], float(value))
    return family


class PrometheusExporter:
    def __init__(self, job: JobMaster, history: MetricsHistory) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_JobCollector(job, history))

    def render(self) -> bytes:
        return generate_latest(self.registry)
