"""What GET /v1/job shows of a job master (docs/reference/rest-api.md, docs/reference/openapi.yaml).

`job_view` takes one look at the job master and returns it as a `JobView`: frozen dataclasses the
Prometheus exporter reads, and whose `to_json` is the document the REST API sends. Its parts are
documents of the contract's codec (`sluice_contract.codec`): their fields are what is sent.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sluice._states import CheckpointStatus, JobState, SubtaskState
from sluice.checkpoint.pending import CheckpointRecord
from sluice.coordinator._failure_text import AttemptFailure
from sluice.coordinator._restore_info import RestoredFrom
from sluice.coordinator.metrics import MetricsHistory, vertex_figures
from sluice_contract.codec import Document, wire
from sluice_contract.rest import JobRates, JobSummary, SubtaskCounts

if TYPE_CHECKING:
    from sluice.coordinator.jobmaster import JobMaster
    from sluice.graph.jobgraph import JobVertex

_METRICS = (
    "recordsIn",
    "recordsOut",
    "lateRecordsDropped",
    "lateRecordsRefired",
    "lateRecordsSideOutput",
    "recordsSkipped",
    "deadLetters",
)
_RECENT_CHECKPOINTS = 10

Figure = int | float | None
"""A figure as a TaskManager sent it (MetricsReport): a number, or null."""


def sum_metrics(samples: Iterable[Mapping[str, object]]) -> dict[str, int]:
    total = dict.fromkeys(_METRICS, 0)
    for values in samples:
        for key in _METRICS:
            value = values.get(key, 0)
            total[key] += value if isinstance(value, int) else 0
    return total


JsonObject = dict[str, object]


@dataclass(frozen=True)
class Counts(Document):
    """Records in, out, late (dropped, re-fired, sent to a side output) and failed (skipped, dead
    letters), summed over subtasks (integer counts only)."""

    records_in: int = 0
    records_out: int = 0
    late_records_dropped: int = 0
    late_records_refired: int = 0
    late_records_side_output: int = 0
    records_skipped: int = 0
    dead_letters: int = 0

    @staticmethod
    def total(samples: Iterable[Mapping[str, Figure]]) -> Counts:
        return Counts(*sum_metrics(samples).values())


@dataclass(frozen=True)
class SentCounts(Document):
    """One subtask's counts (as in Counts), as its TaskManager sent them (0 if not)."""

    records_in: Figure = 0
    records_out: Figure = 0
    late_records_dropped: Figure = 0
    late_records_refired: Figure = 0
    late_records_side_output: Figure = 0
    records_skipped: Figure = 0
    dead_letters: Figure = 0

    @staticmethod
    def of_sample(sample: Mapping[str, Figure]) -> SentCounts:
        return SentCounts(*(sample.get(key, 0) for key in _METRICS))


@dataclass(frozen=True)
class Rates(Document):
    """Per-second figures and gauges (sluice.coordinator.metrics); None where not known yet."""

    records_in_per_second: float | None = None
    records_out_per_second: float | None = None
    busy_time_ms_per_second: float | None = None
    back_pressured_time_ms_per_second: float | None = None
    idle_time_ms_per_second: float | None = None
    watermark_lag_ms: float | None = None
    input_queue_usage: float | None = None
    input_watermark: float | None = None

    @staticmethod
    def of(figures: Mapping[str, float | None]) -> Rates:
        """From `MetricsHistory.subtask` or `vertex_figures`, which name them as the JSON does."""
        return Rates(**{name: figures.get(key) for name, key in _RATE_KEYS.items()})


_RATE_KEYS = {
    "records_in_per_second": "recordsInPerSecond",
    "records_out_per_second": "recordsOutPerSecond",
    "busy_time_ms_per_second": "busyTimeMsPerSecond",
    "back_pressured_time_ms_per_second": "backPressuredTimeMsPerSecond",
    "idle_time_ms_per_second": "idleTimeMsPerSecond",
    "watermark_lag_ms": "watermarkLagMs",
    "input_queue_usage": "inputQueueUsage",
    "input_watermark": "inputWatermark",
}


_INLINE = wire(inline=True)


@dataclass(frozen=True)
class SubtaskMetrics(Document):
    """A subtask's `metrics`: its counts as sent, then its rates and gauges, in one object."""

    counts: SentCounts = field(metadata=_INLINE)
    rates: Rates = field(metadata=_INLINE)


@dataclass(frozen=True)
class VertexMetrics(Document):
    """A vertex's `metrics`: its counts summed over its subtasks, then its rates and gauges."""

    counts: Counts = field(metadata=_INLINE)
    rates: Rates = field(metadata=_INLINE)


@dataclass(frozen=True)
class SubtaskView(Document):
    index: int
    state: SubtaskState
    task_manager: int | None
    metrics: SubtaskMetrics

    @property
    def counts(self) -> SentCounts:
        return self.metrics.counts

    @property
    def rates(self) -> Rates:
        return self.metrics.rates


@dataclass(frozen=True)
class InputView(Document):
    vertex: int
    partitioning: str
    input: int = 0
    """Which input of a two-input operator (connect, joins) the edge feeds; 0 for all others."""
    finished: bool = False
    """Every subtask of the upstream vertex reached the end of its data: this input has ended, and
    the vertex runs on with its other inputs (FLIP-147)."""


@dataclass(frozen=True)
class VertexView(Document):
    id: int
    name: str
    uids: tuple[str, ...]
    parallelism: int
    inputs: tuple[InputView, ...]
    subtasks: tuple[SubtaskView, ...]
    finished_subtasks: int
    metrics: VertexMetrics
    """Counts summed over the subtasks; record rates summed over them, the other figures the worst
    subtask's."""

    @property
    def counts(self) -> Counts:
        return self.metrics.counts

    @property
    def rates(self) -> Rates:
        return self.metrics.rates


def _failure_note(record: CheckpointRecord | None) -> JsonObject | None:
    return None if record is None else {"id": record.checkpoint_id, "error": record.error}


def _with_durations(records: tuple[CheckpointRecord, ...]) -> list[JsonObject]:
    # With its duration, failed ones too (their summary has figures only once completed).
    return [{**r.as_json(), "durationMs": r.duration_ms} for r in records]


def _summary(record: CheckpointRecord | None) -> JsonObject | None:
    # The newest completed checkpoint with what it cost: durationMs, syncMs (record processing
    # stopped), asyncMs, bytesWritten, stateSize (all state it references).
    return None if record is None else record.as_json()


@dataclass(frozen=True)
class CheckpointsView(Document):
    """Written only: the job master's own records, shown as GET /v1/checkpoints shows them."""

    completed: int
    failed: int
    last_failure: CheckpointRecord | None = field(metadata=wire(write=_failure_note))
    recent: tuple[CheckpointRecord, ...] = field(metadata=wire(write=_with_durations))
    """The last few, newest first."""
    last_completed: CheckpointRecord | None = field(metadata=wire(write=_summary))


@dataclass(frozen=True)
class TaskManagerView(Document):
    index: int
    host: str
    data_port: int
    pid: int


@dataclass(frozen=True, kw_only=True)
class JobView(JobSummary):
    """GET /v1/job: the contract's `JobSummary`, which the operator reads, then what the dashboard shows.
    A field of the contract renamed or retyped is one here too; what the job master knows for certain is
    typed narrower than the contract's reader allows."""

    state: JobState
    restarts: int
    name: str
    uptime_ms: int
    attempt: int
    last_savepoint: str | None
    checkpoints: CheckpointsView
    vertices: tuple[VertexView, ...]
    task_managers: tuple[TaskManagerView, ...]
    counts: Counts = field(metadata=wire(name="metrics"))
    restored_from: RestoredFrom | None = None
    """The snapshot the latest attempt restored, None when it started empty."""
    exceptions: tuple[AttemptFailure, ...] = ()
    """Why attempts failed, newest first (the last 20)."""


def job_view(job: JobMaster, history: MetricsHistory | None = None) -> JobView:
    """The job as GET /v1/job shows it; rates and gauges come from `history` (None while there is none)."""
    if history is None:
        history = MetricsHistory()
        history.ingest(job.metrics)
    now_ms = time.time_ns() // 1_000_000
    vertices = tuple(_vertex_view(job, vertex, history, now_ms) for vertex in job.graph.vertices)
    read = [v.rates.records_in_per_second for v in vertices if job.graph.vertex(v.id).is_source]
    written = [v.rates.records_out_per_second for v in vertices if not job.graph.vertex(v.id).outputs]
    read_rates = [r for r in read if r is not None]
    written_rates = [r for r in written if r is not None]
    states = list(job.subtasks.values())
    end = job.end_ms if job.end_ms is not None else now_ms
    return JobView(
        job_id=job.config.job_id,
        name=job.graph.name,
        state=job.state,
        start_time=job.start_ms,
        end_time=job.end_ms,
        uptime_ms=max(0, end - job.start_ms),
        attempt=job.attempt,
        restarts=job.restarts,
        error=job.error,
        last_savepoint=job.savepoints.last,
        subtasks=SubtaskCounts(
            total=len(states),
            running=sum(not s.ended for s in states),
            finished=states.count(SubtaskState.FINISHED),
        ),
        checkpoints=_checkpoints_view(job),
        vertices=vertices,
        task_managers=tuple(
            TaskManagerView(link.index, link.host, link.data_port, link.pid)
            for link in job.taskmanager_links()
        ),
        counts=Counts.total(job.metrics.values()),
        rates=JobRates(
            records_read_per_second=sum(read_rates) if read_rates else None,
            records_written_per_second=sum(written_rates) if written_rates else None,
        ),
        restored_from=job.restored,
        exceptions=tuple(reversed(job.exceptions)),
    )


def _vertex_view(job: JobMaster, vertex: JobVertex, history: MetricsHistory, now_ms: int) -> VertexView:
    samples = []
    subtasks = []
    figures = []
    for s in range(vertex.parallelism):
        key = f"{vertex.id}:{s}"
        state = job.subtasks.get((vertex.id, s), SubtaskState.CREATED)
        sample = job.metrics.get(key, {})
        rates = history.subtask(key, finished=state == SubtaskState.FINISHED, now_ms=now_ms)
        samples.append(sample)
        figures.append(rates)
        task_manager = job.placement.get((vertex.id, s))
        metrics = SubtaskMetrics(SentCounts.of_sample(sample), Rates.of(rates))
        subtasks.append(SubtaskView(s, state, task_manager, metrics))
    return VertexView(
        id=vertex.id,
        name=vertex.name,
        uids=tuple(vertex.uids),
        parallelism=vertex.parallelism,
        inputs=tuple(
            InputView(edge.source, edge.partitioning.kind.value, edge.side, _ended(job, edge.source))
            for edge in vertex.inputs
        ),
        subtasks=tuple(subtasks),
        finished_subtasks=sum(t.state == SubtaskState.FINISHED for t in subtasks),
        metrics=VertexMetrics(Counts.total(samples), Rates.of(vertex_figures(figures))),
    )


def _ended(job: JobMaster, vertex_id: int) -> bool:
    """Every subtask of the vertex is past the end of its data (END_OF_DATA or FINISHED)."""
    vertex = job.graph.vertex(vertex_id)
    states = [job.subtasks.get((vertex_id, s), SubtaskState.CREATED) for s in range(vertex.parallelism)]
    return all(s in (SubtaskState.END_OF_DATA, SubtaskState.FINISHED) for s in states)


def _checkpoints_view(job: JobMaster) -> CheckpointsView:
    checkpoints = job.checkpoints
    failures = [r for r in checkpoints.history if r.status == CheckpointStatus.FAILED]
    return CheckpointsView(
        completed=checkpoints.counts["completed"],
        failed=checkpoints.counts["failed"],
        last_failure=failures[-1] if failures else None,
        recent=tuple(reversed(checkpoints.history[-_RECENT_CHECKPOINTS:])),
        last_completed=checkpoints.latest,
    )
