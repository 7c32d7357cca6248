"""Incremental checkpoints on real files: `_metadata` references shared files, retention deletes a shared
file only once no retained checkpoint refers to it, restore reads through the chain, and the record of
each checkpoint says what it cost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sluice.checkpoint.acknowledgement import Acknowledgement
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointCoordinator
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.restore import restored_share
from sluice.checkpoint.snapshot import RestoredState
from sluice.checkpoint.storage import CheckpointStorage, damage, read_metadata
from sluice.state.descriptors import ValueStateDescriptor
from sluice.state.heap import HeapKeyedStateBackend
from sluice.state.keygroups import key_group_for, key_group_range
from sluice.state.snapshots import ChangeLog, SnapshotWrite
from sluice.transport.messages import ToTaskManager

from ._graphs import graph


class Keyed:
    """A keyed subtask of operator 'count' (parallelism 2) with its backend, as a TaskManager has it."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.backend = HeapKeyedStateBackend(128)
        self.count = self.backend.value_state(ValueStateDescriptor("count", default=0))
        self.log = ChangeLog()
        self.pending: dict[int, SnapshotWrite] = {}

    def put(self, keys: range, value: int) -> None:
        groups = key_group_range(self.index, 128, 2)
        for key in keys:
            if key_group_for(key, 128) in groups:
                self.backend.current_key = key
                self.count.update(value)

    def ack(self, cid: int, location: str, savepoint: bool = False) -> Acknowledgement:
        write = self.log.plan(self.backend.begin_snapshot(), cid, savepoint)
        result = write.write(location, f"count-{self.index}")
        write.written(result)
        write.release()
        groups = key_group_range(self.index, 128, 2)
        # As it comes off the wire, through the coordinator's parser.
        return Acknowledgement.from_json(
            {
                "type": "ack",
                "checkpoint": cid,
                "vertex": 0,
                "subtask": self.index,
                "endOfData": False,
                "syncMs": 0.5 + self.index,
                "asyncMs": "not a number",  # what a TaskManager says is checked, not trusted
                "operators": [
                    {
                        "uid": "count",
                        "finished": False,
                        "union": False,
                        "pendingCommits": False,
                        "operatorState": False,
                        "keyGroups": [groups.start, groups.stop - 1],
                        "path": None,
                        "size": 0,
                        "keyedFiles": [f.as_json() for f in result.chain],
                        "bytesWritten": result.written,
                        "stateSize": result.state_size,
                    }
                ],
            }
        )


def shared_files(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "chk" / "job" / "shared").iterdir()}


def test_shared_files_live_as_long_as_a_retained_checkpoint_refers_to_them(tmp_path: Path) -> None:
    sent: list[ToTaskManager] = []
    subtasks = [Keyed(0), Keyed(1)]

    async def checkpoint(coord: CheckpointCoordinator, complete: bool = True) -> CheckpointMetadata | None:
        pending = coord.trigger()
        acks = [s.ack(pending.checkpoint_id, pending.location) for s in subtasks]
        if not complete:
            coord.fail(pending, "declined by a test")
            await coord.settle()
            return None
        for message in acks:
            coord.on_ack(message)
        await coord.settle()
        for s in subtasks:
            s.log.confirm(pending.checkpoint_id)
        return read_metadata(pending.location)

    async def scenario() -> None:
        storage = CheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
        config = CheckpointConfig(interval_s=None, retained=1)
        coord = CheckpointCoordinator(
            graph([(["count"], 2)], []), storage, config, lambda m, _: sent.append(m), dict
        )
        for s in subtasks:
            s.put(range(1000), 1)
        first = await checkpoint(coord)
        full_files = shared_files(tmp_path)
        assert len(full_files) == 2
        for s in subtasks:
            s.put(range(10), 2)
        second = await checkpoint(coord)
        assert second is not None
        handles = second.operators[0].subtasks
        assert [len(h.keyed_files) for h in handles] == [2, 2]
        assert full_files < shared_files(tmp_path), "checkpoint 1's files are still referenced by 2"
        record = coord.history[-1].as_json()
        assert record["bytesWritten"] < coord.history[0].as_json()["bytesWritten"] / 10
        assert record["stateSize"] == sum(f.size for h in handles for f in h.keyed_files)
        assert record["syncMs"] == 1.5 and record["asyncMs"] == 0.0
        assert record["durationMs"] >= 0
        # Restoring checkpoint 2 at parallelism 3 reads full snapshot + delta.
        metadata = read_metadata(coord.storage.checkpoint_location(2))
        merged: dict[Any, Any] = {}
        for subtask in range(3):
            share = restored_share(metadata, "count", subtask, 3, 128)
            assert isinstance(share, RestoredState)
            for name, _, upserts, removed in [f for c in share.keyed_chains for f in c.frames()]:
                assert name == "count" and not removed
                merged.update(upserts)
        assert merged == dict.fromkeys(range(1000), 1) | dict.fromkeys(range(10), 2)
        # A failed checkpoint's files go at the next retention; so do files no retained one refers to.
        for s in subtasks:
            s.put(range(10), 3)
        await checkpoint(coord, complete=False)
        assert first is not None and first.checkpoint_id == 1
        for s in subtasks:
            s.put(range(2000), 4)  # every key changes: the deltas outgrow the full snapshot
        third = None
        for _ in range(3):
            third = await checkpoint(coord)
        assert third is not None
        referenced = {f.name for h in third.operators[0].subtasks for f in h.keyed_files}
        assert shared_files(tmp_path) == referenced
        assert not full_files & referenced, (
            "the first full snapshots went with the last checkpoint using them"
        )
        assert damage(coord.storage.checkpoint_location(third.checkpoint_id)) is None
        (tmp_path / "chk" / "job" / "shared" / sorted(referenced)[0]).unlink()
        problem = damage(coord.storage.checkpoint_location(third.checkpoint_id))
        assert problem is not None and "is missing" in problem

    asyncio.run(scenario())


def test_a_pending_checkpoints_shared_files_are_not_collected(tmp_path: Path) -> None:
    subtasks = [Keyed(0), Keyed(1)]

    async def scenario() -> None:
        storage = CheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
        coord = CheckpointCoordinator(
            graph([(["count"], 2)], []), storage, CheckpointConfig(interval_s=None), lambda m, _: None, dict
        )
        for s in subtasks:
            s.put(range(100), 1)
        first = coord.trigger()
        for s in subtasks:
            coord.on_ack(s.ack(1, first.location))
        await coord.settle()
        # Checkpoint 2 is pending: one subtask has written its file, not yet acknowledged; then a
        # savepoint completes, which runs no retention, and checkpoint 2 is still pending.
        second = coord.trigger()
        subtasks[0].put(range(5), 2)
        early = subtasks[0].ack(2, second.location)
        coord.on_ack(early)
        written = {f.name for f in early.operators[0].keyed_files}
        assert written <= shared_files(tmp_path)
        coord._retain({1}, set(coord.pending))
        assert written <= shared_files(tmp_path)
        coord.on_ack(subtasks[1].ack(2, second.location))
        await coord.settle()
        assert coord.latest is not None and coord.latest.checkpoint_id == 2

    asyncio.run(scenario())
