"""Checkpoint, savepoint and result files on local storage: 0600 files, 0700 directories, no link followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sluice._fs import filesystem
from sluice._states import CheckpointKind, JobState
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.state_key import StateKey
from sluice.checkpoint.storage import CheckpointStorage, read_metadata, write_metadata, write_state_file
from sluice.coordinator.result_store import JobResult, read_result, write_result

KEY = StateKey(b"a state key of this test, 32 bytes")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def loose_umask() -> object:
    old = os.umask(0o000)  # the modes must not come from the umask
    yield
    os.umask(old)


@pytest.mark.usefixtures("loose_umask")
def test_a_checkpoint_on_local_storage_is_private(tmp_path: Path) -> None:
    storage = CheckpointStorage(f"file://{tmp_path}/chk", "job-1", KEY)
    location = storage.checkpoint_location(4)
    write_state_file(location, "op-0.state", b"pickled state")
    write_metadata(location, CheckpointMetadata(4, "job-1", CheckpointKind.CHECKPOINT, 0, None, ()), KEY)
    write_result(storage.job_dir, JobResult("job-1", JobState.FINISHED, 0), KEY)
    chk = tmp_path / "chk"
    for directory in (chk, chk / "job-1", chk / "job-1" / "chk-4"):
        assert mode(directory) == 0o700, directory
    for name in ("chk-4/op-0.state", "chk-4/_metadata", "job-result.json"):
        assert mode(chk / "job-1" / name) == 0o600, name
    assert read_metadata(location, KEY).checkpoint_id == 4
    result = read_result(storage.job_dir, "job-1", KEY)
    assert result is not None and result.state is JobState.FINISHED


@pytest.mark.usefixtures("loose_umask")
def test_a_savepoint_in_a_directory_of_the_users_keeps_that_directory_as_it_is(tmp_path: Path) -> None:
    # A directory that exists was chosen by the user (shared with a group, say): only what Sluice
    # makes below it is private.
    target = tmp_path / "savepoints"
    target.mkdir(mode=0o750)
    location = CheckpointStorage(str(tmp_path / "chk"), "job-1", KEY).savepoint_location(str(target), 7)
    write_state_file(location, "op-0.state", b"state")
    assert mode(target) == 0o750
    assert mode(Path(location.removeprefix("file://"))) == 0o700
    assert mode(Path(location.removeprefix("file://")) / "op-0.state") == 0o600


def test_an_existing_file_written_again_becomes_private(tmp_path: Path) -> None:
    (tmp_path / "old").write_bytes(b"before")
    os.chmod(tmp_path / "old", 0o644)
    fs, path = filesystem(str(tmp_path / "old"))
    with fs.open(path, "wb") as handle:
        handle.write(b"after")
    assert (tmp_path / "old").read_bytes() == b"after" and mode(tmp_path / "old") == 0o600


def test_a_link_planted_in_place_of_a_state_file_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"the victim's file")
    location = tmp_path / "chk" / "job-1" / "chk-1"
    location.mkdir(parents=True)
    (location / "op-0.state").symlink_to(victim)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        write_state_file(str(location), "op-0.state", b"state")
    assert victim.read_bytes() == b"the victim's file"


def test_directories_made_through_the_file_system_are_0700_at_every_level(tmp_path: Path) -> None:
    fs, path = filesystem(f"file://{tmp_path}/a/b/c")
    fs.makedirs(path, exist_ok=True)
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3
    with pytest.raises(FileExistsError):
        fs.makedirs(path)
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        fs.makedirs(str(tmp_path / "file"), exist_ok=True)


def test_writing_to_a_device_leaves_its_mode_alone(tmp_path: Path) -> None:
    before = mode(Path("/dev/null"))
    fs, path = filesystem("/dev/null")
    with fs.open(path, "ab") as handle:
        handle.write(b"nothing")
    assert mode(Path("/dev/null")) == before
