"""The job master's table of an attempt's subtasks (sluice.coordinator._attempt_tasks): what their
reports add up to for the checkpoint plan, the trigger rules and the attempt's end."""

from __future__ import annotations

from sluice._states import CheckpointKind, SubtaskState
from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry
from sluice.coordinator._attempt_tasks import AttemptTasks
from sluice.graph.transformations import PartitionKind

from ._graphs import graph

S = SubtaskState
# A bounded dimension source (vertex 0, one subtask) and a stream (vertex 1, two subtasks) feeding a sink.
GRAPH = graph(
    [(["dimension"], 1), (["events"], 2), (["sink"], 2)],
    [(0, 2, PartitionKind.HASH), (1, 2, PartitionKind.HASH)],
)


def test_an_attempt_starts_with_every_subtask_deploying_and_none_ended() -> None:
    tasks = AttemptTasks(GRAPH, None)
    assert set(tasks.states.values()) == {S.DEPLOYING} and len(tasks.states) == 5
    progress = tasks.progress(pending=False, last_completion=0.0)
    assert (progress.all_reached_end, progress.all_finished) == (False, False)
    assert AttemptTasks().states == {}, "no attempt: no subtask"


def test_reports_add_up_to_end_of_data_then_to_finished() -> None:
    tasks = AttemptTasks(GRAPH, None)
    for subtask in tasks.states:
        tasks.report(subtask, S.END_OF_DATA, drain=True)
    assert tasks.progress(pending=True, last_completion=1.0).all_reached_end
    assert not tasks.progress(pending=True, last_completion=1.0).all_finished
    for subtask in list(tasks.states)[:-1]:
        tasks.report(subtask, S.FINISHED, drain=None)
    assert not tasks.all(S.FINISHED)
    assert tasks.finished == {0: {0}, 1: {0, 1}, 2: {0}}
    tasks.report((2, 1), S.FINISHED, drain=None)
    assert tasks.all(S.FINISHED) and tasks.progress(pending=False, last_completion=1.0).all_finished


def test_an_input_that_ended_without_drain_is_remembered_until_the_subtask_finishes() -> None:
    # A SUSPEND stop: such a subtask's state would be lost if a checkpoint counted it as finished.
    tasks = AttemptTasks(GRAPH, None)
    tasks.report((1, 0), S.END_OF_DATA, drain=False)
    tasks.report((1, 1), S.END_OF_DATA, drain=True)
    assert (tasks.drained((1, 0)), tasks.drained((1, 1)), tasks.drained((2, 0))) == (False, True, True)


def test_a_chain_finished_in_the_restored_checkpoint_counts_as_finished() -> None:
    restored = CheckpointMetadata(
        7,
        "job",
        CheckpointKind.CHECKPOINT,
        0,
        None,
        (OperatorEntry("dimension", 1, 128, True), OperatorEntry("events", 2, 128, False)),
    )
    tasks = AttemptTasks(GRAPH, restored)
    for subtask in [(1, 0), (1, 1), (2, 0), (2, 1)]:
        tasks.report(subtask, S.FINISHED, drain=None)
    # The dimension's subtask restores as finished: it only commits again and closes.
    assert tasks.states[(0, 0)] is S.DEPLOYING
    assert tasks.progress(pending=False, last_completion=0.0).all_finished
    assert not tasks.progress(pending=False, last_completion=0.0).all_reached_end
