"""Which subtasks a checkpoint triggers and which it waits for, with some subtasks finished.

A running subtask is triggered directly when none of its predecessors is running any more (it is one
of the job's current "sources"); every running subtask must acknowledge. Finished subtasks are recorded.

The plan is O(n) in the number of subtasks (FLIP-147, appendix): over an ALL_TO_ALL edge a subtask has
every upstream subtask as a predecessor, so one "is any upstream subtask running?" per edge answers for
all its downstream subtasks; over a POINTWISE edge the only predecessor is the same-index subtask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sluice.graph.jobgraph import POINTWISE, JobGraph

SubtaskId = tuple[int, int]


@dataclass(frozen=True)
class CheckpointPlan:
    to_trigger: list[SubtaskId]
    to_wait_for: list[SubtaskId]
    finished: list[SubtaskId]


def plan_checkpoint(graph: JobGraph, is_finished: Callable[[int, int], bool]) -> CheckpointPlan:
    to_trigger: list[SubtaskId] = []
    to_wait: list[SubtaskId] = []
    finished: list[SubtaskId] = []
    # any_running[v]: whether some subtask of vertex v is still running, computed once per vertex.
    any_running: list[bool] = []
    for vertex in graph.vertices:
        running = False
        for s in range(vertex.parallelism):
            if is_finished(vertex.id, s):
                finished.append((vertex.id, s))
            else:
                running = True
        any_running.append(running)
    for vertex in graph.vertices:
        if not any_running[vertex.id]:
            continue
        upstream_all_to_all_running = any(
            any_running[e.source] for e in vertex.inputs if e.pattern != POINTWISE
        )
        pointwise = [e.source for e in vertex.inputs if e.pattern == POINTWISE]
        for s in range(vertex.parallelism):
            if is_finished(vertex.id, s):
                continue
            to_wait.append((vertex.id, s))
            if upstream_all_to_all_running:
                continue
            if any(not is_finished(u, s) for u in pointwise):
                continue
            to_trigger.append((vertex.id, s))
    return CheckpointPlan(to_trigger, to_wait, finished)
