"""The O(n) checkpoint plan agrees with the plain definition on generated job graphs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice._states import CheckpointKind
from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry
from sluice.checkpoint.plan import CheckpointPlan, finished_by_vertex, finished_on_restore, plan_checkpoint
from sluice.graph.jobgraph import POINTWISE, JobGraph
from sluice.graph.transformations import PartitionKind

from ._graphs import graph

Subtask = tuple[int, int]


def reference_plan(job: JobGraph, finished: set[Subtask]) -> tuple[set[Subtask], set[Subtask], set[Subtask]]:
    """O(n²) by definition: a running subtask is triggered when none of its predecessors runs."""
    everything = {(v.id, s) for v in job.vertices for s in range(v.parallelism)}
    running = everything - finished
    trigger = set()
    for vertex_id, index in running:
        predecessors = []
        for edge in job.vertex(vertex_id).inputs:
            upstream = job.vertex(edge.source)
            if edge.pattern == POINTWISE:
                predecessors.append((upstream.id, index))
            else:
                predecessors.extend((upstream.id, s) for s in range(upstream.parallelism))
        if not any(p in running for p in predecessors):
            trigger.add((vertex_id, index))
    return trigger, running, finished & everything


@st.composite
def graphs_with_finished(draw: st.DrawFn) -> tuple[JobGraph, set[Subtask]]:
    count = draw(st.integers(min_value=1, max_value=8))
    parallelism = [draw(st.integers(min_value=1, max_value=5)) for _ in range(count)]
    edges = []
    for target in range(1, count):
        sources = draw(st.sets(st.integers(min_value=0, max_value=target - 1), max_size=3))
        for source in sorted(sources):
            # POINTWISE only joins vertices of equal parallelism, as the graph builder guarantees.
            kinds = [PartitionKind.HASH, PartitionKind.REBALANCE, PartitionKind.BROADCAST]
            if parallelism[source] == parallelism[target]:
                kinds.append(PartitionKind.FORWARD)
            edges.append((source, target, draw(st.sampled_from(kinds))))
    job = graph([([f"op{v}"], p) for v, p in enumerate(parallelism)], edges)
    all_subtasks = sorted((v, s) for v in range(count) for s in range(parallelism[v]))
    flags = draw(st.lists(st.booleans(), min_size=len(all_subtasks), max_size=len(all_subtasks)))
    return job, {subtask for subtask, done in zip(all_subtasks, flags, strict=True) if done}


def _plan(job: JobGraph, finished: set[Subtask]) -> CheckpointPlan:
    return plan_checkpoint(job, finished_by_vertex(finished))


@settings(max_examples=150, deadline=None)
@given(graphs_with_finished())
def test_plan_agrees_with_the_reference(case: tuple[JobGraph, set[Subtask]]) -> None:
    job, finished = case
    plan = _plan(job, finished)
    trigger, wait, done = reference_plan(job, finished)
    assert set(plan.to_trigger) == trigger
    assert set(plan.to_wait_for) == wait
    assert set(plan.finished) == done
    # Each subtask listed once.
    assert len(plan.to_trigger) == len(trigger)
    assert len(plan.to_wait_for) == len(wait)
    assert len(plan.finished) == len(done)


@settings(max_examples=60, deadline=None)
@given(graphs_with_finished())
def test_a_running_job_always_has_something_to_trigger(case: tuple[JobGraph, set[Subtask]]) -> None:
    # In a DAG the first running subtask in topological order has no running predecessor.
    job, finished = case
    plan = _plan(job, finished)
    if plan.to_wait_for:
        assert plan.to_trigger
    assert set(plan.to_trigger) <= set(plan.to_wait_for)


def test_nothing_finished_triggers_the_sources_only() -> None:
    job = graph(
        [(["src"], 2), (["map"], 2), (["agg"], 3)],
        [(0, 1, PartitionKind.FORWARD), (1, 2, PartitionKind.HASH)],
    )
    plan = _plan(job, set())
    assert plan.to_trigger == [(0, 0), (0, 1)]
    assert len(plan.to_wait_for) == 7
    assert plan.finished == []


def test_pointwise_successor_of_a_finished_source_is_triggered_alone() -> None:
    job = graph(
        [(["src"], 2), (["map"], 2), (["agg"], 2)],
        [(0, 1, PartitionKind.FORWARD), (1, 2, PartitionKind.HASH)],
    )
    plan = _plan(job, {(0, 0)})
    # map[0] lost its only predecessor; agg still hears from map[1] over the all-to-all edge.
    assert sorted(plan.to_trigger) == [(0, 1), (1, 0)]
    assert plan.finished == [(0, 0)]


def test_all_to_all_successor_is_triggered_only_when_every_upstream_subtask_finished() -> None:
    job = graph([(["src"], 3), (["agg"], 2)], [(0, 1, PartitionKind.HASH)])
    assert _plan(job, {(0, 0), (0, 1)}).to_trigger == [(0, 2)]
    plan = _plan(job, {(0, 0), (0, 1), (0, 2)})
    assert plan.to_trigger == [(1, 0), (1, 1)]
    assert plan.to_wait_for == [(1, 0), (1, 1)]


def test_multi_input_vertex_needs_every_input_finished() -> None:
    job = graph(
        [(["left"], 1), (["right"], 1), (["join"], 1)],
        [(0, 2, PartitionKind.HASH), (1, 2, PartitionKind.HASH)],
    )
    assert _plan(job, {(0, 0)}).to_trigger == [(1, 0)]
    assert _plan(job, {(0, 0), (1, 0)}).to_trigger == [(2, 0)]


def test_everything_finished_leaves_nothing_to_do() -> None:
    job = graph([(["src"], 2), (["sink"], 2)], [(0, 1, PartitionKind.FORWARD)])
    everything = {(0, 0), (0, 1), (1, 0), (1, 1)}
    plan = _plan(job, everything)
    assert plan.to_trigger == [] and plan.to_wait_for == []
    assert set(plan.finished) == everything


def _restored(*fully_finished: str) -> CheckpointMetadata:
    uids = ("src", "map", "sink")
    operators = tuple(OperatorEntry(uid, 2, 128, fully_finished=uid in fully_finished) for uid in uids)
    return CheckpointMetadata(1, "job", CheckpointKind.CHECKPOINT, 0, None, operators)


def test_chains_whose_operators_all_finished_finish_on_restore() -> None:
    job = graph([(["src", "map"], 2), (["sink"], 3)], [(0, 1, PartitionKind.HASH)])
    assert finished_on_restore(job, None) == {}
    assert finished_on_restore(job, _restored()) == {}
    assert finished_on_restore(job, _restored("src", "map")) == {0: range(2)}
    assert finished_on_restore(job, _restored("src", "map", "sink")) == {0: range(2), 1: range(3)}
