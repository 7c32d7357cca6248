"""Which subtasks a checkpoint triggers and which it waits for, with some subtasks finished.

A running subtask is triggered directly when none of its predecessors is running any more (it is one
of the job's current "sources"); every running subtask must acknowledge. Finished subtasks are recorded.

The plan is O(n) in the number of subtasks (FLIP-147, appendix): over an ALL_TO_ALL edge a subtask has
every upstream subtask as a predecessor, so "is any upstream subtask running?" is answered once per edge
(from the count of finished subtasks, in O(1)) for all its downstream subtasks; over a POINTWISE edge
the only predecessor is the subtask with the same index.

A subtask restored from a checkpoint in which every operator of its chain had finished finishes on
restore (`finished_on_restore`): it commits that checkpoint's transactions again and closes. A job all
of whose subtasks do has nothing to checkpoint (`sluice.checkpoint.decider`). Otherwise such a subtask
is planned as a running one until it reports FINISHED, which it does after those commits: a checkpoint
completed before them would record it finished without its pending commits, and a restore from that
checkpoint would never commit them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.graph.jobgraph import POINTWISE, JobGraph

SubtaskId = tuple[int, int]
FinishedSubtasks = Mapping[int, Collection[int]]
"""Vertex id -> indices of its finished subtasks (vertices with none may be absent)."""


@dataclass(frozen=True)
class CheckpointPlan:
    """Per vertex: the subtasks to trigger, to wait for, and already finished.

    A vertex none of whose subtasks finished is described by a `range`, so the plan costs O(vertices +
    finished subtasks) to build; the flat lists below are materialized only when asked for.
    """

    trigger: dict[int, Collection[int]]
    wait: dict[int, Collection[int]]
    done: dict[int, Collection[int]]

    @property
    def to_trigger(self) -> list[SubtaskId]:
        return [(v, s) for v, indices in self.trigger.items() for s in indices]

    @property
    def to_wait_for(self) -> list[SubtaskId]:
        return [(v, s) for v, indices in self.wait.items() for s in indices]

    @property
    def finished(self) -> list[SubtaskId]:
        return [(v, s) for v, indices in self.done.items() for s in indices]

    def waits_for(self, vertex: int, subtask: int) -> bool:
        return subtask in self.wait.get(vertex, ())

    @property
    def wait_count(self) -> int:
        return sum(len(indices) for indices in self.wait.values())

    @property
    def any_finished(self) -> bool:
        return any(self.done.values())


def finished_by_vertex(subtasks: Iterable[SubtaskId]) -> dict[int, set[int]]:
    grouped: dict[int, set[int]] = {}
    for vertex, index in subtasks:
        grouped.setdefault(vertex, set()).add(index)
    return grouped


def finished_on_restore(graph: JobGraph, metadata: CheckpointMetadata | None) -> dict[int, range]:
    """Vertex id -> every subtask index, for the vertices all of whose operators are fully finished in
    `metadata` (the checkpoint an attempt restores; None: it starts empty). A chain is finished as a
    whole or not at all (`validate_restore` refuses a mix), as the task decides (`Chain`)."""
    if metadata is None:
        return {}
    finished = {op.uid for op in metadata.operators if op.fully_finished}
    return {
        vertex.id: range(vertex.parallelism)
        for vertex in graph.vertices
        if all(uid in finished for uid in vertex.uids)
    }


def plan_checkpoint(graph: JobGraph, finished: FinishedSubtasks) -> CheckpointPlan:
    trigger: dict[int, Collection[int]] = {}
    wait: dict[int, Collection[int]] = {}
    done: dict[int, Collection[int]] = {}
    empty: Collection[int] = ()
    any_running = [len(finished.get(v.id, empty)) < v.parallelism for v in graph.vertices]
    for vertex in graph.vertices:
        vid, mine = vertex.id, finished.get(vertex.id, empty)
        if mine:
            done[vid] = sorted(mine)
        if not any_running[vid]:
            continue
        running: Collection[int] = (
            frozenset(s for s in range(vertex.parallelism) if s not in mine)
            if mine
            else range(vertex.parallelism)
        )
        wait[vid] = running
        if any(any_running[e.source] for e in vertex.inputs if e.pattern != POINTWISE):
            continue  # some upstream subtask runs and feeds every subtask of this vertex
        pointwise = [finished.get(e.source, empty) for e in vertex.inputs if e.pattern == POINTWISE]
        if not pointwise:
            trigger[vid] = running
            continue
        # Only subtasks whose same-index predecessors all finished; that needs a finished predecessor,
        # so the scan is over the (smallest) finished set, not over all subtasks.
        smallest = min(pointwise, key=len)
        chosen = sorted(s for s in smallest if s in running and all(s in upstream for upstream in pointwise))
        if chosen:
            trigger[vid] = chosen
    return CheckpointPlan(trigger, wait, done)
