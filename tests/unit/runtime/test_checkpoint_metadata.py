"""What `_metadata` records for each operator once every running subtask acknowledged a checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice._states import CheckpointKind
from sluice.checkpoint.acknowledgement import AckedOperator, Acknowledgement
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointCoordinator, CheckpointDeclined
from sluice.checkpoint.pending import PendingCheckpoint, Waiting
from sluice.checkpoint.plan import finished_by_vertex, plan_checkpoint
from sluice.checkpoint.storage import CheckpointStorage
from sluice.graph.jobgraph import JobGraph
from sluice.graph.transformations import PartitionKind

from ._graphs import graph
from ._support import TEST_KEY

Subtask = tuple[int, int]


def pipeline() -> JobGraph:
    """Two-subtask source chain `src -> parse`, hash into a three-subtask `agg -> sink` chain."""
    return graph(
        [(["src", "parse"], 2), (["agg", "sink"], 3)], [(0, 1, PartitionKind.HASH)], max_parallelism=64
    )


def operator_ack(
    uid: str, *, state: bool, finished: bool = False, union: bool = False, commits: bool = False
) -> AckedOperator:
    return AckedOperator(
        uid,
        finished,
        path=f"{uid}.state" if state else None,
        size=10 if state else 0,
        operator_state=state,
        union=union,
        pending_commits=commits,
    )


def ack(job: JobGraph, subtask: Subtask, **kwargs: Any) -> Acknowledgement:
    vertex = job.vertex(subtask[0])
    operators = [
        operator_ack(uid, **kwargs, commits=uid == "sink" and kwargs.get("finished", False))
        for uid in vertex.uids
    ]
    return Acknowledgement(7, subtask[0], subtask[1], tuple(operators), end_of_data=False)


def metadata(
    tmp_path: Path, job: JobGraph, finished: set[Subtask], acks: dict[Subtask, Acknowledgement]
) -> dict[str, Any]:
    """The `_metadata` document (as written) that the coordinator builds from `acks`."""
    by_vertex = finished_by_vertex(finished)
    coordinator = CheckpointCoordinator(
        job,
        CheckpointStorage(str(tmp_path), "job-1", TEST_KEY),
        CheckpointConfig(),
        lambda m, t: None,
        lambda: by_vertex,
    )
    plan = plan_checkpoint(job, by_vertex)
    pending = PendingCheckpoint(
        7, CheckpointKind.CHECKPOINT, "file:///x/chk-7", 1234, None, plan, Waiting(plan)
    )
    pending.acks = acks
    return coordinator.build_metadata(pending).to_json()


def by_uid(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {op["uid"]: op for op in meta["operators"]}


def test_all_running_records_every_subtask(tmp_path: Path) -> None:
    job = pipeline()
    acks = {(v, s): ack(job, (v, s), state=True) for v in (0, 1) for s in range(job.vertex(v).parallelism)}
    meta = metadata(tmp_path, job, set(), acks)
    assert meta["checkpointId"] == 7 and meta["jobId"] == "job-1" and meta["kind"] == "checkpoint"
    ops = by_uid(meta)
    assert list(ops) == ["src", "parse", "agg", "sink"]
    assert ops["agg"]["parallelism"] == 3 and ops["agg"]["maxParallelism"] == 64
    assert [h["index"] for h in ops["agg"]["subtasks"]] == [0, 1, 2]
    assert not any(op["fullyFinished"] or op["finishedSubtasks"] for op in ops.values())


def test_every_subtask_finished_before_the_plan_is_fully_finished_without_state(tmp_path: Path) -> None:
    job = pipeline()
    finished = {(0, 0), (0, 1)}
    acks = {(1, s): ack(job, (1, s), state=True) for s in range(3)}
    ops = by_uid(metadata(tmp_path, job, finished, acks))
    for uid in ("src", "parse"):
        assert ops[uid]["fullyFinished"] is True
        assert ops[uid]["subtasks"] == []
        assert ops[uid]["finishedSubtasks"] == []
    assert ops["agg"]["fullyFinished"] is False


def test_every_subtask_finished_after_the_plan_is_fully_finished_without_state(tmp_path: Path) -> None:
    # The final checkpoint: the subtasks ran finish() and still acknowledged, with state.
    job = pipeline()
    acks = {(v, s): ack(job, (v, s), state=True, finished=v == 1) for v in (0, 1) for s in range(2 + v)}
    ops = by_uid(metadata(tmp_path, job, set(), acks))
    assert ops["agg"]["fullyFinished"] is True and ops["agg"]["subtasks"] == []
    assert ops["sink"]["fullyFinished"] is True
    assert ops["src"]["fullyFinished"] is False and len(ops["src"]["subtasks"]) == 2


def test_partially_finished_keeps_running_handles_and_lists_finished_subtasks(tmp_path: Path) -> None:
    job = pipeline()
    finished = {(0, 1)}
    acks = {(0, 0): ack(job, (0, 0), state=True)}
    acks |= {(1, s): ack(job, (1, s), state=True) for s in range(3)}
    ops = by_uid(metadata(tmp_path, job, finished, acks))
    for uid in ("src", "parse"):
        assert ops[uid]["fullyFinished"] is False
        assert ops[uid]["finishedSubtasks"] == [1]
        assert [h["index"] for h in ops[uid]["subtasks"]] == [0]
        assert ops[uid]["subtasks"][0]["path"] == f"{uid}.state"


def test_running_subtask_without_state_has_no_handle_and_is_not_finished(tmp_path: Path) -> None:
    job = pipeline()
    acks = {(v, s): ack(job, (v, s), state=False) for v in (0, 1) for s in range(2 + v)}
    ops = by_uid(metadata(tmp_path, job, set(), acks))
    assert all(op["subtasks"] == [] and op["finishedSubtasks"] == [] for op in ops.values())
    assert not any(op["fullyFinished"] for op in ops.values())


def test_union_list_state_partially_finished_is_declined(tmp_path: Path) -> None:
    job = pipeline()
    acks = {(0, 0): ack(job, (0, 0), state=True, union=True)}
    acks |= {(1, s): ack(job, (1, s), state=True) for s in range(3)}
    with pytest.raises(CheckpointDeclined) as caught:
        metadata(tmp_path, job, {(0, 1)}, acks)
    message = str(caught.value)
    assert "'src'" in message and "union list state" in message and "1 of 2" in message


def test_union_list_state_some_subtasks_called_finish_is_declined(tmp_path: Path) -> None:
    job = pipeline()
    acks = {
        (0, 0): ack(job, (0, 0), state=True, union=True, finished=True),
        (0, 1): ack(job, (0, 1), state=True, union=True),
    }
    acks |= {(1, s): ack(job, (1, s), state=True) for s in range(3)}
    with pytest.raises(CheckpointDeclined, match="'src' uses union list state"):
        metadata(tmp_path, job, set(), acks)


def test_union_list_state_all_running_or_all_finished_is_accepted(tmp_path: Path) -> None:
    job = pipeline()
    running = {(v, s): ack(job, (v, s), state=True, union=v == 0) for v in (0, 1) for s in range(2 + v)}
    assert by_uid(metadata(tmp_path, job, set(), running))["src"]["subtasks"][0]["union"] is True
    done = {
        (v, s): ack(job, (v, s), state=True, union=v == 0, finished=v == 0)
        for v in (0, 1)
        for s in range(2 + v)
    }
    assert by_uid(metadata(tmp_path, job, set(), done))["src"]["fullyFinished"] is True


def test_final_checkpoint_keeps_the_transactions_a_finished_sink_must_still_commit(tmp_path: Path) -> None:
    job = pipeline()
    acks = {(v, s): ack(job, (v, s), state=True, finished=True) for v in (0, 1) for s in range(2 + v)}
    ops = by_uid(metadata(tmp_path, job, set(), acks))
    assert all(op["fullyFinished"] and op["subtasks"] == [] for op in ops.values())
    assert ops["sink"]["pendingCommits"] == [{"index": s, "path": "sink.state", "size": 10} for s in range(3)]
    assert "pendingCommits" not in ops["agg"]
