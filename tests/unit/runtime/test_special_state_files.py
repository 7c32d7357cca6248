"""A FIFO, socket or directory planted where a checkpoint keeps a file: refused, never waited on.

Opening a FIFO for reading waits for a writer that never comes; a restore that opened one hung for
good (issue 23). Each test runs the read on a thread it waits for with a bound, and on failure opens
the FIFO's other end itself so that the thread, and pytest, can end.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.integrity import IntegrityError
from sluice.checkpoint.restore import restored_share
from sluice.checkpoint.snapshot import OperatorSnapshot
from sluice.checkpoint.storage import CheckpointStorage, damage, read_metadata, read_state_file

from ._support import TEST_KEY, write_checkpoint

BOUND_S = 10.0
"""Far more than a refusal takes; a hung open never ends."""


def within_bound(fifo: Path, call: Callable[[], Any]) -> Any:
    """`call()`'s result or exception, or a test failure when it is still waiting after BOUND_S."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as err:  # handed to the test thread
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND_S)
    if thread.is_alive():
        # Release the reader blocked in open(): a writer appears, then goes.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(BOUND_S)
        pytest.fail(f"reading past the FIFO {fifo} was still waiting after {BOUND_S:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def checkpoint(directory: Path) -> str:
    return write_checkpoint(directory, "src", {0: OperatorSnapshot(lists={"offsets": [1, 2, 3]})}, 1).location


def replace_with_fifo(path: Path) -> Path:
    path.unlink()
    os.mkfifo(path, 0o600)
    return path


def test_a_fifo_as_the_newest_metadata_is_damage_and_the_restore_takes_the_one_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = CheckpointStorage(tmp_path.as_uri(), "job", TEST_KEY)
    older = checkpoint(tmp_path / "job" / "chk-1")
    checkpoint(tmp_path / "job" / "chk-2")
    fifo = replace_with_fifo(tmp_path / "job" / "chk-2" / "_metadata")
    assert within_bound(fifo, storage.latest_completed) == older
    assert f"{fifo} is a FIFO (named pipe), not a regular file" in caplog.text


def test_a_savepoint_whose_metadata_is_a_fifo_is_refused_naming_it(tmp_path: Path) -> None:
    location = checkpoint(tmp_path / "savepoint-1")
    fifo = replace_with_fifo(tmp_path / "savepoint-1" / "_metadata")
    with pytest.raises(IntegrityError, match=f"{fifo} is a FIFO"):
        within_bound(fifo, lambda: read_metadata(location, TEST_KEY, trust=True))


def test_a_state_file_swapped_for_a_fifo_after_the_coordinators_check_is_refused(tmp_path: Path) -> None:
    location = checkpoint(tmp_path / "chk-1")
    metadata = read_metadata(location, TEST_KEY)  # the coordinator's check passed
    fifo = replace_with_fifo(tmp_path / "chk-1" / "src-0.state")
    # A TaskManager reading its share now: refused, whatever the digest would have said.
    with pytest.raises(IntegrityError, match=r"src-0\.state is a FIFO"):
        within_bound(fifo, lambda: restored_share(metadata, "src", 0, 1, 128))


def test_a_fifo_as_a_state_file_is_damage_named_as_such(tmp_path: Path) -> None:
    location = checkpoint(tmp_path / "chk-1")
    fifo = replace_with_fifo(tmp_path / "chk-1" / "src-0.state")
    assert within_bound(fifo, lambda: damage(location, TEST_KEY)) == (
        "state file src-0.state of operator 'src' is not a regular file"
    )


def test_a_socket_or_a_directory_as_a_state_file_is_refused_naming_it(tmp_path: Path) -> None:
    location = checkpoint(tmp_path / "chk-1")
    state_file = tmp_path / "chk-1" / "src-0.state"
    state_file.unlink()
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(state_file))
        with pytest.raises(IntegrityError, match=r"src-0\.state cannot be opened"):
            read_state_file(location, "src-0.state", None)
    state_file.unlink()
    state_file.mkdir()
    with pytest.raises(IntegrityError, match=r"src-0\.state is a directory"):
        read_state_file(location, "src-0.state", None)
