"""GET /v1/job is a typed view (sluice.coordinator.views) whose JSON is the document the REST API always
sent: data/job_view.json was written by the dict-building job_view before the view was typed, for the
job built here (its inputs gained `input` and `finished` since), and the typed view must give it back key
for key. Since the view is the contract's `JobSummary` extended, its top-level keys start with the
contract's; every nested object keeps its order."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any, cast

import pytest

from sluice._states import CheckpointKind, CheckpointStatus, SubtaskState
from sluice.checkpoint.pending import CheckpointRecord, SnapshotStats
from sluice.coordinator._prometheus import PrometheusExporter
from sluice.coordinator.jobmaster import JobConfig, JobMaster
from sluice.coordinator.metrics import MetricsHistory
from sluice.coordinator.views import job_view
from sluice.graph.transformations import PartitionKind
from sluice.hosts.base import TaskManagerHost
from sluice_contract.rest import JobSummary

from ._graphs import graph

GOLDEN = Path(__file__).parent / "data" / "job_view.json"


def _job() -> tuple[JobMaster, MetricsHistory]:
    """Two vertices, five subtasks in every state the view distinguishes, one completed checkpoint and
    one failed savepoint, figures of every kind: rates, a gauge, a count sent as a float, a null."""
    g = graph([(["src"], 2), (["map", "sink"], 3)], [(0, 1, PartitionKind.HASH)])
    job = JobMaster(g, JobConfig(checkpoint_dir="file:///nowhere", job_id="j1"), cast(TaskManagerHost, None))
    job.start_ms, job.end_ms, job.error = 1000, 6000, "e"
    job.subtasks.update(
        {
            (0, 0): SubtaskState.RUNNING,
            (0, 1): SubtaskState.FINISHED,
            (1, 0): SubtaskState.END_OF_DATA,
        }
    )
    job.placement = {(0, 0): 0, (0, 1): 1, (1, 0): 0, (1, 1): 1}
    history = MetricsHistory()
    for t in (1, 2):
        job.metrics = {
            "0:0": {
                "recordsIn": 10 * t,
                "recordsOut": 7 * t,
                "timeNs": t * 10**9,
                "idleNs": t * 10**8,
                "backpressuredNs": 0,
                "inputQueueLength": 3,
                "inputQueueCapacity": 12,
            },
            "0:1": {"recordsIn": 4.5, "recordsOut": None},
            "1:0": {
                "recordsIn": 3 * t,
                "recordsOut": 2 * t,
                "lateRecordsDropped": 1,
                "timeNs": t * 10**9,
                "idleNs": 0,
                "backpressuredNs": t * 10**8,
            },
        }
        history.ingest(job.metrics)
    checkpoints = job.checkpoints
    completed = CheckpointRecord(
        1, CheckpointKind.CHECKPOINT, CheckpointStatus.COMPLETED, 100, 150, "p1", None, ["a"], 2,
        SnapshotStats(1.5, 2.0, 30, 40),
    )  # fmt: skip
    failed = CheckpointRecord(2, CheckpointKind.SAVEPOINT, CheckpointStatus.FAILED, 200, 260, None, "boom")
    checkpoints.history += [completed, failed]
    checkpoints.counts.update(completed=1, failed=1)
    checkpoints.latest = completed
    return job, history


def test_the_typed_view_writes_the_document_as_it_was() -> None:
    job, history = _job()
    golden: dict[str, Any] = json.loads(GOLDEN.read_text())
    document = json.loads(json.dumps(job_view(job, history).to_json()))
    # Each field as it was, nested keys in their order; the top level now begins with the contract's
    # part (JobSummary's fields), which the view extends, then the dashboard's.
    assert sorted(document) == sorted(golden)
    assert {key: json.dumps(value) for key, value in document.items()} == {
        key: json.dumps(value) for key, value in golden.items()
    }
    contract = [f.name for f in fields(JobSummary)]
    assert [_snake(key) for key in list(document)[: len(contract)]] == contract


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def test_the_operator_reads_the_document_the_view_writes() -> None:
    job, history = _job()
    view = job_view(job, history)
    read = JobSummary.from_json(json.loads(json.dumps(view.to_json())))
    assert read == JobSummary(
        view.job_id,
        view.state,
        view.start_time,
        view.end_time,
        view.restarts,
        view.error,
        view.subtasks,
        view.rates,
    )


def test_the_typed_view_holds_what_the_document_shows() -> None:
    job, history = _job()
    view = job_view(job, history)
    source, sink = view.vertices
    assert (view.state, view.uptime_ms, view.subtasks.running) == ("CREATED", 5000, 2)
    assert [t.state for t in sink.subtasks] == ["END_OF_DATA", "CREATED", "CREATED"]
    assert sink.subtasks[2].task_manager is None  # placed nowhere
    assert source.subtasks[0].rates.input_queue_usage == 0.25
    assert source.subtasks[1].counts.records_out is None  # as sent
    assert view.rates.records_read_per_second == 10.0 and view.rates.records_written_per_second == 2.0
    assert [r.checkpoint_id for r in view.checkpoints.recent] == [2, 1]


def test_prometheus_reads_the_typed_view() -> None:
    job, history = _job()
    lines = PrometheusExporter(job, history).render().decode().splitlines()
    assert 'sluice_subtask_records_in_total{job_id="j1",subtask="1",vertex="src",vertex_id="0"} 4.5' in lines
    assert (
        'sluice_subtask_input_queue_usage{job_id="j1",subtask="0",vertex="src",vertex_id="0"} 0.25' in lines
    )
    # A figure not known yet is left out, not exported as 0.
    assert not [
        line
        for line in lines
        if line.startswith("sluice_subtask_records_out_total")
        and 'subtask="1"' in line
        and 'vertex="src"' in line
    ]
    assert 'sluice_job_records_written_per_second{job_id="j1"} 2.0' in lines
    assert (
        'sluice_vertex_subtasks{job_id="j1",state="END_OF_DATA",vertex="map -> sink",vertex_id="1"} 1.0'
        in lines
    )
    # The latest completed checkpoint's figures, not the newer failed savepoint's.
    assert 'sluice_last_checkpoint_id{job_id="j1"} 1.0' in lines
    assert 'sluice_last_checkpoint_sync_duration_seconds{job_id="j1"} 0.0015' in lines
    assert 'sluice_last_checkpoint_state_size_bytes{job_id="j1"} 40.0' in lines
    assert pytest.approx(0.05) == float(
        next(line for line in lines if line.startswith("sluice_last_checkpoint_duration_seconds")).split()[-1]
    )
