"""Who may write and delete a checkpoint directory, on real files: the attempt ending while a checkpoint's
`_metadata` is being written, discards, retention, and restoring around a damaged checkpoint."""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from sluice._states import CheckpointKind
from sluice.checkpoint import coordinator as coordinator_module
from sluice.checkpoint.coordinator import CheckpointCoordinator
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.state_key import StateKey
from sluice.checkpoint.storage import (
    CheckpointStorage,
    damage,
    discard,
    read_metadata,
    write_metadata,
    write_state_file,
)
from sluice.transport.messages import Complete, ToTaskManager
from sluice_contract.checkpoints import NoRestorableCheckpoint

from ._support import SOURCE_STATE, TEST_KEY, acknowledge_all, source_ack, source_coordinator


def attempt_ends_while_metadata_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> tuple[CheckpointCoordinator, list[ToTaskManager], str]:
    """The write is held until the attempt has ended and any discard it started has run: the order in
    which a loaded machine may run the two threads."""
    writing, release, discarded = threading.Event(), threading.Event(), threading.Event()

    def slow_write(location: str, metadata: CheckpointMetadata, key: StateKey) -> None:
        writing.set()
        release.wait(10)
        write_metadata(location, metadata, key)

    def recorded_discard(location: str) -> None:
        discard(location)
        discarded.set()

    monkeypatch.setattr(coordinator_module, "write_metadata", slow_write)
    monkeypatch.setattr(coordinator_module, "discard", recorded_discard)
    sent: list[ToTaskManager] = []

    async def scenario() -> tuple[CheckpointCoordinator, str]:
        coord = source_coordinator(tmp_path, sent)
        target = f"file://{tmp_path / 'sp'}" if kind == "savepoint" else None
        pending = coord.trigger(CheckpointKind(kind), target)
        for subtask in (0, 1):
            write_state_file(pending.location, f"src-{subtask}.state", SOURCE_STATE)
            coord.on_ack(source_ack(1, subtask))
        await asyncio.to_thread(writing.wait, 10)
        coord.abort_all("the job attempt ended")
        await asyncio.to_thread(discarded.wait, 0.5)
        release.set()
        await coord.settle()
        return coord, pending.location

    coord, location = asyncio.run(scenario())
    return coord, sent, location


def test_attempt_ending_while_metadata_is_written_leaves_a_complete_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coord, sent, location = attempt_ends_while_metadata_is_written(tmp_path, monkeypatch, "checkpoint")
    restored = coord.storage.latest_completed()
    assert restored == location
    assert damage(restored, TEST_KEY) is None
    assert coord.latest is not None and coord.latest.checkpoint_id == 1
    # The ending attempt's tasks are not told; the next attempt restores it and commits for them.
    assert Complete(1) not in sent


def test_a_savepoint_whose_attempt_ended_while_it_was_written_is_discarded_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coord, sent, location = attempt_ends_while_metadata_is_written(tmp_path, monkeypatch, "savepoint")
    assert not Path(location.removeprefix("file://")).exists()
    assert list((tmp_path / "sp").iterdir()) == []
    assert coord.latest_savepoint is None and coord.counts["failed"] == 1
    assert not [m for m in sent if isinstance(m, Complete)]


def test_a_checkpoint_failing_before_all_acks_is_discarded_and_settled(tmp_path: Path) -> None:
    sent: list[ToTaskManager] = []

    async def scenario() -> CheckpointCoordinator:
        coord = source_coordinator(tmp_path, sent)
        coord.trigger()
        write_state_file(coord.storage.checkpoint_location(1), "src-0.state", SOURCE_STATE)
        coord.on_ack(source_ack(1, 0))
        coord.abort_all("the job attempt ended")
        await coord.settle()
        return coord

    coord = asyncio.run(scenario())
    assert not (tmp_path / "chk" / "job" / "chk-1").exists()
    assert coord.latest is None and coord.counts["failed"] == 1


def test_discard_removes_metadata_before_the_state_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = f"file://{tmp_path / 'chk-1'}"
    write_state_file(location, "src-0.state", SOURCE_STATE)
    write_metadata(location, CheckpointMetadata(1, "job", CheckpointKind.CHECKPOINT, 0, None, ()), TEST_KEY)

    def interrupted(path: str, *args: Any, **kwargs: Any) -> None:
        # The process dies while deleting the directory tree (state files and all, in any order).
        raise OSError("interrupted")

    monkeypatch.setattr(shutil, "rmtree", interrupted)
    with pytest.raises(OSError, match="interrupted"):
        discard(location)
    assert not (tmp_path / "chk-1" / "_metadata").exists()


def test_restore_falls_back_to_the_previous_checkpoint_when_a_state_file_is_missing_or_short(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[ToTaskManager] = []

    async def two_checkpoints() -> CheckpointCoordinator:
        coord = source_coordinator(tmp_path, sent)
        coord.config.retained = 2
        for checkpoint in (1, 2):
            coord.trigger()
            acknowledge_all(coord, checkpoint)
            await coord.settle()
        return coord

    coord = asyncio.run(two_checkpoints())
    storage = coord.storage
    newest = tmp_path / "chk" / "job" / "chk-2"
    assert storage.latest_completed() == storage.checkpoint_location(2)

    (newest / "src-1.state").write_bytes(SOURCE_STATE[:4])
    with caplog.at_level(logging.WARNING):
        assert storage.latest_completed() == storage.checkpoint_location(1)
    assert "src-1.state of operator 'src' has 4 bytes, 10 were written" in caplog.text
    assert f"restoring {storage.checkpoint_location(1)} instead of the newer" in caplog.text

    (newest / "src-1.state").unlink()
    assert storage.latest_completed() == storage.checkpoint_location(1)
    assert "src-1.state of operator 'src' is missing" in caplog.text
    assert read_metadata(storage.checkpoint_location(1), TEST_KEY).checkpoint_id == 1


def test_a_job_whose_retained_checkpoints_are_all_damaged_is_not_started_again_from_scratch(
    tmp_path: Path,
) -> None:
    sent: list[ToTaskManager] = []

    async def one_checkpoint() -> CheckpointCoordinator:
        coord = source_coordinator(tmp_path, sent)
        coord.trigger()
        acknowledge_all(coord, 1)
        await coord.settle()
        return coord

    storage = asyncio.run(one_checkpoint()).storage
    (tmp_path / "chk" / "job" / "chk-1" / "src-0.state").unlink()
    # Running the job from its start would commit its sinks' output a second time.
    with pytest.raises(
        NoRestorableCheckpoint,
        match=r"no retained checkpoint of job job can be restored .*Resume it from a savepoint \(--from-sav",
    ):
        storage.latest_completed()


def test_retention_keeps_the_newest_checkpoints_only(tmp_path: Path) -> None:
    sent: list[ToTaskManager] = []

    async def three_checkpoints() -> CheckpointCoordinator:
        coord = source_coordinator(tmp_path, sent)
        for checkpoint in (1, 2, 3):
            coord.trigger()
            acknowledge_all(coord, checkpoint)
            await coord.settle()
        return coord

    coord = asyncio.run(three_checkpoints())
    assert coord.storage.completed_ids() == [3]


def test_savepoints_of_jobs_whose_ids_share_a_prefix_get_their_own_directories(tmp_path: Path) -> None:
    first = CheckpointStorage(str(tmp_path), "abcdef0000", TEST_KEY)
    second = CheckpointStorage(str(tmp_path), "abcdef1111", TEST_KEY)
    target = f"file://{tmp_path / 'sp'}"
    assert first.savepoint_location(target, 3) != second.savepoint_location(target, 3)
    assert first.savepoint_location(target, 3).endswith("/savepoint-abcdef0000-3")
