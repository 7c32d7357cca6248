"""Compaction of keyed state chains beside checkpointing, on both backends: the compacted file restores
what the chain did, checkpoints go on as deltas while it is made, acknowledgements protect its file until
a completed checkpoint refers to it, and a compaction that cannot be used is dropped."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.state import snapshots
from sluice.state.chain_files import Batched, KeyedFile, read_frames
from sluice.state.compaction import Cancelled, Compaction, compact
from sluice.state.snapshots import MAX_DELTAS, ChainShare, DeferredKeyed

from ._chains import Subtask, new_backend, restored

__all__ = ["new_backend"]  # the fixture, used by name


def grown_chain(
    task: Subtask, deltas: int, rng: random.Random, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[KeyedFile]]:
    """A full snapshot of 2000 keys, then `deltas` checkpoints that each put and remove random keys,
    some of them new, some removed before and put again; no compaction starts meanwhile."""
    with monkeypatch.context() as patch:
        patch.setattr(snapshots, "_due_for_compaction", lambda chain: False)
        task.put(range(2000), 0)
        location, result = task.checkpoint(1)
        for cid in range(2, deltas + 2):
            task.put(rng.sample(range(3000), 200), cid)
            task.remove(rng.sample(range(3000), 50))
            location, result = task.checkpoint(cid)
    return location, result.chain


def running(task: Subtask) -> Compaction | None:
    """The subtask's compaction now (a call, so that the type checker does not carry an earlier look)."""
    return task.log.compaction


def due_for_compaction(task: Subtask) -> None:
    """A full snapshot of 1000 keys, then `MAX_DELTAS` checkpoints of a changed key each: the next
    checkpoint, `MAX_DELTAS + 2`, finds the chain due for a compaction."""
    task.put(range(1000), 0)
    task.checkpoint(1)
    for cid in range(2, MAX_DELTAS + 2):
        task.put([cid], cid)
        task.checkpoint(cid)


def until_compaction_planned(task: Subtask) -> int:
    """A full snapshot of 1000 keys, then checkpoints of a changed key each until one plans a
    compaction (the one after the `MAX_DELTAS`-th delta); returns the id of the next checkpoint."""
    task.put(range(1000), 0)
    task.checkpoint(1)
    cid = 2
    while task.log.compaction is None:
        task.put([cid], cid)
        task.checkpoint(cid)
        cid += 1
    assert cid == MAX_DELTAS + 3
    return cid


def test_the_compacted_file_restores_what_its_chain_restores(
    tmp_path: Path, new_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = Subtask(tmp_path, new_backend())
    location, chain = grown_chain(task, 10, random.Random(7), monkeypatch)
    assert len(chain) == 11
    out = tmp_path / "compacted.kv"
    with out.open("wb") as handle:
        batched = Batched(handle)
        compact([(f"file://{tmp_path}/shared/{f.name}", f.sha256) for f in chain], batched)
        batched.flush()
    frames = list(read_frames(f"file://{out}", None))
    assert all(not removed for _, _, _, removed in frames), "a full file removes nothing"
    keys = [key for _, _, entries, _ in frames for key in entries]
    assert len(keys) == len(set(keys)), "each key once"
    compacted = KeyedFile(out.name, out.stat().st_size, full=True, shared=False)
    assert restored(f"file://{tmp_path}", [compacted]) == restored(location, chain)


def test_a_compaction_stops_when_its_operator_closes_and_leaves_no_file(
    tmp_path: Path, new_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = Subtask(tmp_path, new_backend())
    _, chain = grown_chain(task, 2, random.Random(1), monkeypatch)
    with (tmp_path / "out.kv").open("wb") as handle, pytest.raises(Cancelled):
        compact(
            [(f"file://{tmp_path}/shared/{f.name}", f.sha256) for f in chain], Batched(handle), lambda: True
        )
    # Through the change log: a compaction whose process hangs is killed when its operator closes, and
    # what it had written is deleted. The process is stopped (SIGSTOP) as soon as it exists, as a hung
    # read of storage would leave it; a FIFO in the chain no longer hangs it (it is refused by type).
    job = Compaction([chain[-1]], checkpoint_id=99)
    task.log.compaction = job
    job.start(f"file://{tmp_path}/chk-99", "count-0")
    for _ in range(600):
        if job.child is not None:
            break
        time.sleep(0.01)
    assert job.child is not None, "the compaction process did not start"
    os.kill(job.child.pid, signal.SIGSTOP)
    output = tmp_path / "shared" / job.file_name("count-0")
    output.write_bytes(b"what the hung process had written")  # its output, partly written
    time.sleep(0.3)
    assert not job.finished, "a stopped compaction process cannot have finished"
    task.log.close()
    # Already when close() returns: a compaction left to end later wrote into the job's storage after
    # its task, and its job, had ended.
    assert job.wait(0), "close() returned before the compaction had ended"
    assert job.result is None and running(task) is None
    assert job.child.returncode is not None and job.child.returncode < 0
    assert not output.exists()


def test_checkpoints_stay_deltas_while_the_chain_is_compacted_and_then_extend_the_compacted_file(
    tmp_path: Path, new_backend: Any
) -> None:
    task = Subtask(tmp_path, new_backend())
    task.put(range(1000), 0)
    task.checkpoint(1)
    chains = []
    for cid in range(2, MAX_DELTAS + 3):
        task.put(range(cid * 10, cid * 10 + 10), cid)
        chains.append(task.checkpoint(cid, compacted=False)[1])
    planning = chains[-1]
    assert len(planning.chain) == MAX_DELTAS + 2, "the checkpoint that starts the compaction is a delta"
    assert not any(f.full for f in planning.chain[1:])
    job = task.log.compaction
    assert job is not None and job.wait(30) and job.result is not None
    assert planning.protected == [job.result.name], "its acknowledgement protects the file to come"
    task.put([5], 99)
    location, adopting = task.checkpoint(MAX_DELTAS + 3)
    assert adopting.chain[0] == job.result
    assert len(adopting.chain) == 3, "the compacted file, the delta of the planning checkpoint, a new one"
    assert adopting.protected == [job.result.name], "protected until a completed checkpoint refers to it"
    expected = dict.fromkeys(range(1000), 0) | {5: 99}
    for cid in range(2, MAX_DELTAS + 3):
        expected |= dict.fromkeys(range(cid * 10, cid * 10 + 10), cid)
    assert restored(location, adopting.chain) == expected
    assert task.log.compaction is None, "done once that checkpoint completed"
    _, after = task.checkpoint(MAX_DELTAS + 4)
    assert after.protected == [] and after.chain[:3] == adopting.chain


def test_a_compacted_file_is_not_adopted_before_it_is_finished(tmp_path: Path, new_backend: Any) -> None:
    task = Subtask(tmp_path, new_backend())
    cid = until_compaction_planned(task)
    job = task.log.compaction
    assert job is not None and job.result is not None
    job._done.clear()  # as if it were still running
    _, result = task.checkpoint(cid, compacted=False)
    assert result.chain[0] != job.result and result.protected == [job.file_name("count-0")]
    job._done.set()
    _, result = task.checkpoint(cid + 1)
    assert result.chain[0] == job.result


def test_a_compaction_whose_chain_was_cut_by_a_full_snapshot_is_dropped(
    tmp_path: Path, new_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = Subtask(tmp_path, new_backend())
    cid = until_compaction_planned(task)
    job = task.log.compaction
    assert job is not None and job.result is not None
    job._done.clear()
    monkeypatch.setattr(snapshots, "MAX_CHAIN", 2)  # compaction fell behind: a full snapshot cuts it
    _, full = task.checkpoint(cid, compacted=False)
    assert [f.full for f in full.chain] == [True]
    job._done.set()
    monkeypatch.setattr(snapshots, "MAX_CHAIN", 4 * MAX_DELTAS)
    task.put([1], 7)
    location, after = task.checkpoint(cid + 1)
    assert job.result not in after.chain and after.chain[0] == full.chain[0]
    assert after.protected == [] and task.log.compaction is None
    assert restored(location, after.chain)[1] == 7


def test_a_failed_compaction_is_dropped_and_the_chain_goes_on(tmp_path: Path, new_backend: Any) -> None:
    task = Subtask(tmp_path, new_backend())
    due_for_compaction(task)
    assert task.log.compaction is None
    (tmp_path / "shared" / task.log.confirmed[1].name).unlink()  # a file it reads is gone
    task.put([3], 3)
    _, planning = task.checkpoint(MAX_DELTAS + 2)
    job = running(task)
    assert planning.protected and job is not None and job.finished and job.result is None
    _, after = task.checkpoint(MAX_DELTAS + 3, compacted=False)
    assert after.chain[:-1] == planning.chain, "the chain goes on without it"
    assert running(task) is not job, "dropped, and the chain being due, another one starts"


def test_a_planned_compaction_whose_checkpoint_is_released_unwritten_never_starts(
    tmp_path: Path, new_backend: Any
) -> None:
    task = Subtask(tmp_path, new_backend())
    due_for_compaction(task)
    write = DeferredKeyed(task.log, task.backend.begin_snapshot()).plan(MAX_DELTAS + 2, False)
    assert write.starts is not None and running(task) is write.starts
    write.release()  # the task was cancelled before the checkpoint was written
    assert running(task) is None and not write.starts.started


def test_a_savepoint_neither_starts_a_compaction_nor_protects_one(tmp_path: Path, new_backend: Any) -> None:
    task = Subtask(tmp_path, new_backend())
    due_for_compaction(task)
    _, savepoint = task.checkpoint(MAX_DELTAS + 2, savepoint=True)
    assert task.log.compaction is None and savepoint.protected == []


def restarted(task: Subtask, location: str, chain: list[KeyedFile], job_dir: Path, backend: Any) -> Subtask:
    """A new subtask of the same key groups that restored `chain` whole, as after a failover."""
    again = Subtask(job_dir, backend)
    for frame in ChainShare(location, chain, None, 128).frames():
        again.backend.restore_frame(*frame)
    again.log.extend_restored(chain, location)
    return again


def test_after_a_failover_checkpoints_extend_the_restored_chain(tmp_path: Path, new_backend: Any) -> None:
    task = Subtask(tmp_path, new_backend())
    task.put(range(1000), 1)
    task.checkpoint(1)
    task.put([1, 2], 2)
    location, second = task.checkpoint(2)
    again = restarted(task, location, second.chain, tmp_path, new_backend())
    again.put([3], 3)
    location, third = again.checkpoint(3)
    assert third.chain[:-1] == second.chain and not third.chain[-1].full, "a delta on the restored chain"
    assert third.written < second.chain[0].size / 20
    assert restored(location, third.chain) == dict.fromkeys(range(1000), 1) | {1: 2, 2: 2, 3: 3}
    again.put([4], 4)
    location, fourth = again.checkpoint(4)
    assert fourth.chain[:-1] == third.chain
    assert restored(location, fourth.chain)[4] == 4


def test_a_job_started_from_another_jobs_checkpoint_writes_a_full_snapshot_of_its_own(
    tmp_path: Path, new_backend: Any
) -> None:
    """Its checkpoints live in another directory, and the files of the one it started from are not its
    own: its chain must not refer to them."""
    task = Subtask(tmp_path / "old", new_backend())
    task.put(range(100), 1)
    task.checkpoint(1)
    task.put([1], 2)
    location, second = task.checkpoint(2)
    again = restarted(task, location, second.chain, tmp_path / "new", new_backend())
    again.put([3], 3)
    new_location, third = again.checkpoint(3)
    assert [f.full for f in third.chain] == [True]
    assert restored(new_location, third.chain) == dict.fromkeys(range(100), 1) | {1: 2, 3: 3}
    again.put([4], 4)
    _, fourth = again.checkpoint(4)
    assert fourth.chain[:-1] == third.chain, "and then deltas on that one"


def test_when_most_keys_change_every_interval_the_checkpoint_writes_a_full_snapshot_itself(
    tmp_path: Path, new_backend: Any
) -> None:
    """Compacting would merge deltas each about as large as all state; a full snapshot costs the
    checkpoint no more than two deltas and restarts the chain at once."""
    task = Subtask(tmp_path, new_backend())
    task.put(range(100), 0)
    task.checkpoint(1)
    lengths = []
    for cid in range(2, 8):
        task.put(range(70), cid)
        location, result = task.checkpoint(cid)
        lengths.append(len(result.chain))
        expected = dict.fromkeys(range(100), 0) | dict.fromkeys(range(70), cid)
        assert restored(location, result.chain) == expected
    assert 1 in lengths and max(lengths) <= 3, "a full snapshot once the deltas outgrew the full one"
    assert running(task) is None, "and no compaction"
