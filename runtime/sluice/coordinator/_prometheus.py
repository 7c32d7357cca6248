"""GET /metrics: the job document in Prometheus' text format (docs/reference/rest-api.md lists them).

Built at scrape time from the same figures as GET /v1/job, in a registry of its own (the process-wide
default registry would mix in whatever else runs in the driver). Every series carries `job_id`
(Prometheus keeps `job` for its own scrape job); subtask series add `vertex` (the operator uids of the
chain), `vertex_id` and `subtask`. A figure not known yet (a rate before two heartbeats, a watermark
before the first) is left out rather than exported as 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from sluice._states import CheckpointStatus, JobState, SubtaskState
from sluice.checkpoint.pending import CheckpointRecord, SnapshotStats
from sluice.coordinator.metrics import MetricsHistory
from sluice.coordinator.views import JobView, SubtaskView, job_view

if TYPE_CHECKING:
    from sluice.coordinator.jobmaster import JobMaster

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

JOB_STATES = tuple(JobState)
# CREATED is only what the job view shows before a TaskManager reported: no subtask is counted in it.
SUBTASK_STATES = tuple(s for s in SubtaskState if s != SubtaskState.CREATED)

Figure = Callable[[SubtaskView], float | None]

# (figure of a subtask, metric name, help, counter?)
_SUBTASK_SERIES: tuple[tuple[Figure, str, str, bool], ...] = (
    (
        lambda t: t.counts.records_in,
        "sluice_subtask_records_in",
        "Records the subtask took in (a source: emitted).",
        True,
    ),
    (
        lambda t: t.counts.records_out,
        "sluice_subtask_records_out",
        "Records the subtask's chain emitted or wrote.",
        True,
    ),
    (
        lambda t: t.counts.late_records_dropped,
        "sluice_subtask_late_records_dropped",
        "Records dropped as late.",
        True,
    ),
    (
        lambda t: t.counts.late_records_refired,
        "sluice_subtask_late_records_refired",
        "Late records within the allowed lateness, each of which fired its window again.",
        True,
    ),
    (
        lambda t: t.counts.late_records_side_output,
        "sluice_subtask_late_records_side_output",
        "Records too late for their windows, sent to the late-data side output.",
        True,
    ),
    (
        lambda t: t.counts.records_skipped,
        "sluice_subtask_records_skipped",
        'Records that made a user function raise, dropped (on_error="skip").',
        True,
    ),
    (
        lambda t: t.counts.dead_letters,
        "sluice_subtask_dead_letters",
        "Records that made a user function raise, sent to its on_error side output.",
        True,
    ),
    (
        lambda t: t.rates.records_in_per_second,
        "sluice_subtask_records_in_per_second",
        "Records in per second.",
        False,
    ),
    (
        lambda t: t.rates.records_out_per_second,
        "sluice_subtask_records_out_per_second",
        "Records out per second.",
        False,
    ),
    (
        lambda t: t.rates.busy_time_ms_per_second,
        "sluice_subtask_busy_time_ms_per_second",
        "Milliseconds per second neither idle nor backpressured.",
        False,
    ),
    (
        lambda t: t.rates.back_pressured_time_ms_per_second,
        "sluice_subtask_backpressured_time_ms_per_second",
        "Milliseconds per second spent waiting for room in a full output channel.",
        False,
    ),
    (
        lambda t: t.rates.idle_time_ms_per_second,
        "sluice_subtask_idle_time_ms_per_second",
        "Milliseconds per second spent waiting for input.",
        False,
    ),
    (
        lambda t: t.rates.watermark_lag_ms,
        "sluice_subtask_watermark_lag_ms",
        "Wall clock minus the input watermark.",
        False,
    ),
    (
        lambda t: t.rates.input_queue_usage,
        "sluice_subtask_input_queue_usage",
        "Queued input events over capacity (0-1).",
        False,
    ),
)

# (figure of a completed checkpoint, metric name, help)
_CHECKPOINT_SERIES: tuple[tuple[Callable[[CheckpointRecord, SnapshotStats], float | None], str, str], ...] = (
    (
        lambda r, _: r.duration_ms / 1000 if r.duration_ms is not None else None,
        "sluice_last_checkpoint_duration_seconds",
        "Trigger to completion.",
    ),
    (
        lambda _, s: s.sync_ms / 1000,
        "sluice_last_checkpoint_sync_duration_seconds",
        "Slowest subtask's synchronous part (record processing stopped).",
    ),
    (
        lambda _, s: s.async_ms / 1000,
        "sluice_last_checkpoint_async_duration_seconds",
        "Slowest asynchronous part.",
    ),
    (
        lambda _, s: s.start_delay_ms / 1000,
        "sluice_last_checkpoint_start_delay_seconds",
        "Slowest subtask's wait from the trigger to its first barrier (in-flight data ahead of it).",
    ),
    (
        lambda _, s: s.alignment_ms / 1000,
        "sluice_last_checkpoint_alignment_duration_seconds",
        "Slowest subtask's wait from its first barrier to its last.",
    ),
    (lambda _, s: s.bytes_written, "sluice_last_checkpoint_written_bytes", "Bytes written for it."),
    (
        lambda _, s: s.state_size,
        "sluice_last_checkpoint_state_size_bytes",
        "Size of all state it references.",
    ),
)


class _JobCollector(Collector):
    def __init__(self, job: JobMaster, history: MetricsHistory) -> None:
        self.job = job
        self.history = history

    def collect(self) -> Iterator[Any]:
        self.history.ingest(self.job.metrics)
        view = job_view(self.job, self.history)
        job_id = view.job_id
        state = GaugeMetricFamily(
            "sluice_job_state", "1 for the job's current state.", labels=["job_id", "state"]
        )
        for name in sorted({*JOB_STATES, view.state}):
            state.add_metric([job_id, name], 1.0 if name == view.state else 0.0)
        yield state
        yield _gauge(
            "sluice_job_uptime_seconds", "Seconds since the job started.", job_id, view.uptime_ms / 1000
        )
        yield _counter(
            "sluice_job_restarts", "Restarts of the job (attempts after the first).", job_id, view.restarts
        )
        if view.rates.records_read_per_second is not None:
            yield _gauge(
                "sluice_job_records_read_per_second",
                "Records its sources emit per second.",
                job_id,
                view.rates.records_read_per_second,
            )
        if view.rates.records_written_per_second is not None:
            yield _gauge(
                "sluice_job_records_written_per_second",
                "Records its sinks take per second.",
                job_id,
                view.rates.records_written_per_second,
            )
        yield from self._subtasks(job_id, view)
        yield from self._checkpoints(job_id, view)

    def _subtasks(self, job_id: str, view: JobView) -> Iterator[Any]:
        labels = ["job_id", "vertex", "vertex_id", "subtask"]
        families = [
            (figure, (CounterMetricFamily if counter else GaugeMetricFamily)(name, what, labels=labels))
            for figure, name, what, counter in _SUBTASK_SERIES
        ]
        states = GaugeMetricFamily(
            "sluice_vertex_subtasks",
            "Subtasks of a vertex in each state.",
            labels=["job_id", "vertex", "vertex_id", "state"],
        )
        for vertex in view.vertices:
            vid = str(vertex.id)
            counts: dict[SubtaskState, int] = dict.fromkeys(SUBTASK_STATES, 0)
            for subtask in vertex.subtasks:
                counts[subtask.state] = counts.get(subtask.state, 0) + 1
                values = [job_id, vertex.name, vid, str(subtask.index)]
                for figure, family in families:
                    value = figure(subtask)
                    if value is not None:
                        family.add_metric(values, float(value))
            for name, count in counts.items():
                states.add_metric([job_id, vertex.name, vid, name], float(count))
        yield from (family for _, family in families)
        yield states

    def _checkpoints(self, job_id: str, view: JobView) -> Iterator[Any]:
        total = CounterMetricFamily(
            "sluice_checkpoints", "Checkpoints and savepoints by outcome.", labels=["job_id", "status"]
        )
        total.add_metric([job_id, "completed"], float(view.checkpoints.completed))
        total.add_metric([job_id, "failed"], float(view.checkpoints.failed))
        yield total
        yield _gauge(
            "sluice_checkpoints_in_progress",
            "Checkpoints triggered and not yet completed.",
            job_id,
            len(self.job.checkpoints.pending),
        )
        recent = view.checkpoints.recent
        latest = next((c for c in recent if c.status == CheckpointStatus.COMPLETED), None)
        if latest is None or latest.completion_ms is None:
            return
        yield _gauge(
            "sluice_last_checkpoint_id",
            "Id of the latest completed checkpoint or savepoint.",
            job_id,
            latest.checkpoint_id,
        )
        yield _gauge(
            "sluice_last_checkpoint_completion_timestamp_seconds",
            "When the latest checkpoint or savepoint completed (Unix time).",
            job_id,
            latest.completion_ms / 1000,
        )
        stats = latest.stats or SnapshotStats()
        for figure, name, what in _CHECKPOINT_SERIES:
            value = figure(latest, stats)
            if value is not None:
                yield _gauge(name, what, job_id, value)


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
