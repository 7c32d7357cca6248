"""The subtasks of one attempt as their reports tell the job master: each one's state, which have
finished, and whether each one's input ended with drain. The checkpoint plan, the trigger rules and the
attempt's end read it."""

from __future__ import annotations

from sluice._states import SubtaskState
from sluice.checkpoint.decider import Progress
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.plan import SubtaskId, finished_on_restore
from sluice.graph.jobgraph import JobGraph


class AttemptTasks:
    def __init__(self, graph: JobGraph | None = None, restored: CheckpointMetadata | None = None) -> None:
        """Every subtask of `graph` deploying, restoring `restored`; without a graph, none (no attempt)."""
        vertices = graph.vertices if graph is not None else []
        self.states: dict[SubtaskId, SubtaskState] = {
            (v.id, s): SubtaskState.DEPLOYING for v in vertices for s in range(v.parallelism)
        }
        self.finished: dict[int, set[int]] = {}
        self._finished_on_restore = finished_on_restore(graph, restored) if graph is not None else {}
        """The vertices whose every operator had finished in the checkpoint this attempt restored."""
        self._ended_undrained: set[SubtaskId] = set()
        """Subtasks whose input ended without drain (a SUSPEND stop)."""

    def report(self, subtask: SubtaskId, state: SubtaskState, drain: bool | None) -> None:
        self.states[subtask] = state
        if state == SubtaskState.END_OF_DATA and drain is False:
            self._ended_undrained.add(subtask)
        elif state == SubtaskState.FINISHED:
            self.finished.setdefault(subtask[0], set()).add(subtask[1])

    def drained(self, subtask: SubtaskId) -> bool:
        """Whether `subtask`'s input ended with drain (or it has not ended): no SUSPEND stop ended it."""
        return subtask not in self._ended_undrained

    def all(self, *states: SubtaskState) -> bool:
        return all(s in states for s in self.states.values())

    def progress(self, pending: bool, last_completion: float) -> Progress:
        restored = self._finished_on_restore
        return Progress(
            pending=pending,
            last_completion=last_completion,
            all_reached_end=self.all(SubtaskState.END_OF_DATA, SubtaskState.FINISHED),
            all_finished=all(
                s == SubtaskState.FINISHED or subtask[1] in restored.get(subtask[0], ())
                for subtask, s in self.states.items()
            ),
        )
