"""A two-input operator whose one input ended: what `_metadata` and GET /v1/job say about that input."""

from __future__ import annotations

from typing import cast

from sluice._states import SubtaskState
from sluice.checkpoint.metadata import OperatorEntry
from sluice.coordinator.jobmaster import JobConfig, JobMaster
from sluice.coordinator.views import job_view
from sluice.graph.jobgraph import JobEdge, JobGraph, JobVertex, finished_inputs
from sluice.graph.transformations import Partitioning, PartitionKind
from sluice.hosts.base import TaskManagerHost

from ._graphs import spec


def _enrichment() -> JobGraph:
    """events (0) and dimension -> rows (1) into enrich -> sink (2): events feed input 0, rows input 1."""
    vertices = [
        JobVertex(0, [spec("events")], 2, 128),
        JobVertex(1, [spec("dimension"), spec("rows")], 1, 128),
        JobVertex(2, [spec("enrich"), spec("sink")], 2, 128),
    ]
    for source, side in ((0, 0), (1, 1)):
        edge = JobEdge(source, 2, Partitioning(PartitionKind.HASH), side, side=side)
        vertices[2].inputs.append(edge)
        vertices[source].outputs.append(edge)
    return JobGraph("enrichment", vertices, 128)


def test_an_input_has_finished_when_every_operator_upstream_of_it_has() -> None:
    graph = _enrichment()
    enrich = graph.vertex(2)
    assert finished_inputs(graph, enrich, set()) == ()
    assert finished_inputs(graph, enrich, {"dimension"}) == (), "rows, chained after it, still runs"
    assert finished_inputs(graph, enrich, {"dimension", "rows"}) == (1,)
    assert finished_inputs(graph, enrich, {"dimension", "rows", "events"}) == (0, 1)


def test_a_one_input_vertex_has_no_finished_inputs_to_show() -> None:
    graph = _enrichment()
    assert finished_inputs(graph, graph.vertex(1), {"dimension", "rows"}) == ()


def test_metadata_keeps_finished_inputs_and_leaves_them_out_when_there_are_none() -> None:
    entry = OperatorEntry("enrich", 2, 128, False, finished_inputs=(1,))
    assert entry.to_json()["finishedInputs"] == [1]
    assert "finishedInputs" not in OperatorEntry("map", 2, 128, False).to_json()


def test_the_rest_view_marks_the_input_whose_upstream_reached_its_end() -> None:
    job = JobMaster(
        _enrichment(), JobConfig(checkpoint_dir="file:///nowhere", job_id="j"), cast(TaskManagerHost, None)
    )
    job.subtasks.update(
        {
            (0, 0): SubtaskState.RUNNING,
            (0, 1): SubtaskState.END_OF_DATA,
            (1, 0): SubtaskState.FINISHED,
            (2, 0): SubtaskState.RUNNING,
            (2, 1): SubtaskState.RUNNING,
        }
    )
    [enrich] = [v for v in job_view(job).to_json()["vertices"] if v["id"] == 2]
    assert enrich["inputs"] == [
        {"vertex": 0, "partitioning": "hash", "input": 0, "finished": False},
        {"vertex": 1, "partitioning": "hash", "input": 1, "finished": True},
    ]
