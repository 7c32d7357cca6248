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

from ._graphs import graph
from ._support import TEST_KEY


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
        write = self.log.plan(self.backend.begin_snapshot(view=False), cid, savepoint)
        result = write.write(location, f"count-{self.index}")
        write.written(result)
        write.release()
        if write.starts is not None:
            assert write.starts.wait(30), "the compaction this checkpoint started finishes"
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
                        "keyedFiles": [f.to_json() for f in result.chain],
                        "protectedFiles": result.protected,
                        "bytesWritten": result.written,
                        "stateSize": result.state_size,
                    }
                ],
            }
        )


def shared_files(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "chk" / "job" / "shared").iterdir()}


class Job:
    """Operator 'count' at parallelism 2 under a checkpoint coordinator that retains one checkpoint."""

    def __init__(self, tmp_path: Path) -> None:
        config = CheckpointConfig(interval_s=None, retained=1)
        self.coord = CheckpointCoordinator(
            graph([(["count"], 2)], []), storage(tmp_path), config, lambda m, _: None, dict
        )
        self.subtasks = [Keyed(0), Keyed(1)]

    def put(self, keys: range, value: int) -> None:
        for s in self.subtasks:
            s.put(keys, value)

    async def checkpoint(self) -> CheckpointMetadata:
        pending = self.coord.trigger()
        for message in [s.ack(pending.checkpoint_id, pending.location) for s in self.subtasks]:
            self.coord.on_ack(message)
        await self.coord.settle()
        for s in self.subtasks:
            s.log.confirm(pending.checkpoint_id)
        return read_metadata(pending.location, TEST_KEY)

    async def declined_checkpoint(self) -> None:
        """Every subtask writes its files, then the checkpoint fails."""
        pending = self.coord.trigger()
        for s in self.subtasks:
            s.ack(pending.checkpoint_id, pending.location)
        self.coord.fail(pending, "declined by a test")
        await self.coord.settle()


async def full_then_incremental(job: Job, tmp_path: Path) -> set[str]:
    """Checkpoint 1 of 1000 keys (full snapshots), then checkpoint 2 after 10 of them changed (deltas);
    returns the shared files checkpoint 1 wrote."""
    job.put(range(1000), 1)
    await job.checkpoint()
    full_files = shared_files(tmp_path)
    job.put(range(10), 2)
    await job.checkpoint()
    return full_files


def test_an_incremental_checkpoint_refers_to_the_full_snapshot_it_adds_to(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = Job(tmp_path)
        full_files = await full_then_incremental(job, tmp_path)
        assert len(full_files) == 2
        second = read_metadata(job.coord.storage.checkpoint_location(2), TEST_KEY)
        assert [len(h.keyed_files) for h in second.operators[0].subtasks] == [2, 2]
        assert full_files < shared_files(tmp_path), "checkpoint 1's files are still referenced by 2"

    asyncio.run(scenario())


def test_the_record_of_an_incremental_checkpoint_says_what_it_cost(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = Job(tmp_path)
        await full_then_incremental(job, tmp_path)
        handles = read_metadata(job.coord.storage.checkpoint_location(2), TEST_KEY).operators[0].subtasks
        record = job.coord.history[-1].as_json()
        assert record["bytesWritten"] < job.coord.history[0].as_json()["bytesWritten"] / 10
        assert record["stateSize"] == sum(f.size for h in handles for f in h.keyed_files)
        assert record["syncMs"] == 1.5 and record["asyncMs"] == 0.0
        assert record["durationMs"] >= 0

    asyncio.run(scenario())


def test_restore_at_another_parallelism_reads_the_full_snapshot_and_the_delta(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = Job(tmp_path)
        await full_then_incremental(job, tmp_path)
        metadata = read_metadata(job.coord.storage.checkpoint_location(2), TEST_KEY)
        merged: dict[Any, Any] = {}
        for subtask in range(3):
            share = restored_share(metadata, "count", subtask, 3, 128)
            assert isinstance(share, RestoredState)
            for name, _, upserts, removed in [f for c in share.keyed_chains for f in c.frames()]:
                assert name == "count" and not removed
                merged.update(upserts)
        assert merged == dict.fromkeys(range(1000), 1) | dict.fromkeys(range(10), 2)

    asyncio.run(scenario())


def test_shared_files_live_as_long_as_a_retained_checkpoint_refers_to_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = Job(tmp_path)
        full_files = await full_then_incremental(job, tmp_path)
        # A failed checkpoint's files go at the next retention; so do files no retained one refers to.
        job.put(range(10), 3)
        await job.declined_checkpoint()
        job.put(range(2000), 4)  # every key changes: the deltas outgrow the full snapshot
        for _ in range(2):
            await job.checkpoint()
        last = await job.checkpoint()
        referenced = {f.name for h in last.operators[0].subtasks for f in h.keyed_files}
        assert shared_files(tmp_path) == referenced
        assert not full_files & referenced, (
            "the first full snapshots went with the last checkpoint using them"
        )

    asyncio.run(scenario())


def test_a_checkpoint_whose_shared_file_is_missing_is_damaged(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = Job(tmp_path)
        await full_then_incremental(job, tmp_path)
        location = job.coord.storage.checkpoint_location(2)
        assert damage(location, TEST_KEY) is None
        referenced = [
            f.name for h in read_metadata(location, TEST_KEY).operators[0].subtasks for f in h.keyed_files
        ]
        (tmp_path / "chk" / "job" / "shared" / sorted(referenced)[0]).unlink()
        problem = damage(location, TEST_KEY)
        assert problem is not None and "is missing" in problem

    asyncio.run(scenario())


def storage(tmp_path: Path) -> CheckpointStorage:
    return CheckpointStorage(f"file://{tmp_path / 'chk'}", "job", TEST_KEY)


async def first_checkpoint(coord: CheckpointCoordinator, subtasks: list[Keyed]) -> None:
    """Checkpoint 1 of 100 keys, completed."""
    for s in subtasks:
        s.put(range(100), 1)
    first = coord.trigger()
    for s in subtasks:
        coord.on_ack(s.ack(1, first.location))
    await coord.settle()


def test_a_pending_checkpoints_shared_files_are_not_collected(tmp_path: Path) -> None:
    subtasks = [Keyed(0), Keyed(1)]

    async def scenario() -> None:
        coord = CheckpointCoordinator(
            graph([(["count"], 2)], []),
            storage(tmp_path),
            CheckpointConfig(interval_s=None),
            lambda m, _: None,
            dict,
        )
        await first_checkpoint(coord, subtasks)
        # Checkpoint 2 is pending: one subtask has written its file, not yet acknowledged; then a
        # savepoint completes, which runs no retention, and checkpoint 2 is still pending.
        second = coord.trigger()
        subtasks[0].put(range(5), 2)
        early = subtasks[0].ack(2, second.location)
        coord.on_ack(early)
        written = {f.name for f in early.operators[0].keyed_files}
        assert written <= shared_files(tmp_path)
        coord._retain({1}, set(coord.pending), min([*coord.pending, coord._next_id]))
        assert written <= shared_files(tmp_path)
        coord.on_ack(subtasks[1].ack(2, second.location))
        await coord.settle()
        assert coord.latest is not None and coord.latest.checkpoint_id == 2

    asyncio.run(scenario())


def test_files_of_a_checkpoint_triggered_while_retention_runs_are_not_collected(tmp_path: Path) -> None:
    """Retention runs in a thread, which may start late: checkpoint 2 can be triggered, and its subtasks
    can write their files, after checkpoint 1's retention was decided and before its thread ran. The
    files have no `_metadata` referring to them yet, and checkpoint 2 was not pending when retention
    was decided: they must be kept all the same."""
    subtasks = [Keyed(0), Keyed(1)]
    late: list[tuple[Any, ...]] = []

    async def scenario() -> None:
        config = CheckpointConfig(interval_s=None, retained=1)
        coord = CheckpointCoordinator(
            graph([(["count"], 2)], []), storage(tmp_path), config, lambda m, _: None, dict
        )
        retain = coord._retain
        coord._retain = lambda *args: late.append(args)  # type: ignore[method-assign]
        await first_checkpoint(coord, subtasks)
        assert len(late) == 1, "checkpoint 1's retention was decided"
        second = coord.trigger()
        for s in subtasks:
            s.put(range(50), 2)
        acks = [s.ack(2, second.location) for s in subtasks]
        written = {f.name for a in acks for f in a.operators[0].keyed_files}
        retain(*late.pop())  # the thread runs now
        assert written <= shared_files(tmp_path)
        for ack in acks:
            coord.on_ack(ack)
        await coord.settle()
        assert damage(second.location, TEST_KEY) is None

    asyncio.run(scenario())


def test_a_compactions_file_is_kept_while_a_retained_checkpoint_protects_it(tmp_path: Path) -> None:
    """The compacted file is written after the checkpoint that planned it was acknowledged, and no chain
    refers to it until a later checkpoint adopts it: the acknowledgements name it meanwhile."""

    async def scenario() -> None:
        job = Job(tmp_path)
        job.put(range(1000), 1)
        await job.checkpoint()
        while job.subtasks[0].log.compaction is None:
            job.put(range(3), 2)
            planning = await job.checkpoint()
        handles = planning.operators[0].subtasks
        protected = {name for h in handles for name in h.protected_files}
        assert len(protected) == 2, "one compaction per subtask"
        assert protected <= shared_files(tmp_path), "kept, though no chain refers to it yet"
        assert not protected & {f.name for h in handles for f in h.keyed_files}
        adopting = await job.checkpoint()
        assert {h.keyed_files[0].name for h in adopting.operators[0].subtasks} == protected
        # A failover: new subtasks start over from nothing and protect nothing; once their checkpoint
        # completes, the old chains and compacted files go.
        job.subtasks = [Keyed(0), Keyed(1)]
        job.put(range(10), 3)
        fresh = await job.checkpoint()
        assert shared_files(tmp_path) == {f.name for h in fresh.operators[0].subtasks for f in h.keyed_files}

    asyncio.run(scenario())
