"""Attacks on stored state: a planted or edited file is refused before anything of it is unpickled.

Each test plays someone who can write the checkpoint or savepoint directory but does not hold the
deployment's state key (`docs/security.md`, integrity of stored state)."""

from __future__ import annotations

import json
import logging
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from sluice._json import FormatError
from sluice.checkpoint.integrity import IntegrityError, seal
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.restore import restored_share
from sluice.checkpoint.snapshot import OperatorSnapshot
from sluice.checkpoint.state_key import StateKey
from sluice.checkpoint.storage import (
    CheckpointStorage,
    read_metadata,
    read_pinned_metadata,
    write_metadata,
)
from sluice.state.chain_files import Batched, KeyedFile, dump, header
from sluice.state.snapshots import ChainShare
from sluice.state.stored_files import DigestingWriter
from sluice_contract.checkpoints import NoRestorableCheckpoint

from ._support import TEST_KEY, write_checkpoint

OTHER_KEY = StateKey(b"another deployment's key, 32 bytes")


class _Planted:
    """Unpickling it creates the directory `marker`: proof that a planted pickle ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (str(self.marker),))


def plant_same_size(state_file: Path, marker: Path) -> None:
    payload = pickle.dumps(_Planted(marker))
    size = state_file.stat().st_size
    assert len(payload) <= size
    state_file.write_bytes(payload + b"\0" * (size - len(payload)))  # pickle stops at its STOP opcode


def operator_checkpoint(tmp_path: Path) -> CheckpointMetadata:
    snapshot = OperatorSnapshot(lists={"offsets": list(range(40))})
    return write_checkpoint(tmp_path / "chk-1", "src", {0: snapshot}, 1)


def test_a_pickle_swapped_into_a_state_file_is_refused_naming_it_and_never_runs(tmp_path: Path) -> None:
    metadata = operator_checkpoint(tmp_path)
    marker = tmp_path / "planted-pickle-ran"
    plant_same_size(tmp_path / "chk-1" / "src-0.state", marker)
    with pytest.raises(IntegrityError, match=r"src-0\.state does not match the SHA-256"):
        restored_share(metadata, "src", 0, 1, 128)
    assert not marker.exists()


def keyed_file(directory: Path, name: str) -> KeyedFile:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / name).open("wb") as handle:
        digesting = DigestingWriter(handle)
        out = Batched(digesting)
        size = dump(out, header(True)) + dump(out, ("count", "value", {k: k for k in range(50)}, []))
        out.flush()
    return KeyedFile(name, size, full=True, shared=False, sha256=digesting.hexdigest())


def test_a_pickle_swapped_into_a_keyed_state_file_is_refused_and_never_runs(tmp_path: Path) -> None:
    ref = keyed_file(tmp_path / "sp", "count-0.kv")
    share = ChainShare((tmp_path / "sp").as_uri(), [ref], None, 128)
    assert sum(len(entries) for _, _, entries, _ in share.frames()) == 50
    marker = tmp_path / "planted-pickle-ran"
    plant_same_size(tmp_path / "sp" / "count-0.kv", marker)
    with pytest.raises(IntegrityError, match=r"count-0\.kv does not match the SHA-256"):
        next(share.frames())
    assert not marker.exists()


def test_a_state_file_replaced_by_a_symlink_to_a_file_outside_is_refused(tmp_path: Path) -> None:
    metadata = operator_checkpoint(tmp_path)
    state_file = tmp_path / "chk-1" / "src-0.state"
    outside = tmp_path / "elsewhere"
    outside.write_bytes(state_file.read_bytes())  # even the very bytes recorded: a link is refused
    state_file.unlink()
    state_file.symlink_to(outside)
    with pytest.raises(IntegrityError, match=r"src-0\.state is a symbolic link"):
        restored_share(metadata, "src", 0, 1, 128)


def stored(location: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((location / "_metadata").read_text())
    return data


def test_an_edited_metadata_is_refused(tmp_path: Path) -> None:
    operator_checkpoint(tmp_path)
    document = stored(tmp_path / "chk-1")
    document["operators"][0]["subtasks"][0]["sha256"] = "0" * 64  # would vouch for a planted file
    (tmp_path / "chk-1" / "_metadata").write_text(json.dumps(document))
    with pytest.raises(IntegrityError, match="changed after it was written"):
        read_metadata((tmp_path / "chk-1").as_uri(), TEST_KEY)


def test_a_metadata_stripped_of_its_mac_is_refused(tmp_path: Path) -> None:
    operator_checkpoint(tmp_path)
    document = stored(tmp_path / "chk-1")
    del document["integrity"]
    (tmp_path / "chk-1" / "_metadata").write_text(json.dumps(document))
    with pytest.raises(IntegrityError, match="carries no MAC"):
        read_metadata((tmp_path / "chk-1").as_uri(), TEST_KEY)


@pytest.mark.parametrize("path", ["../chk-0/src-0.state", "/etc/shadow", "..", "sub/../../x.state"])
def test_a_path_leaving_the_directory_is_refused_even_when_authenticated(tmp_path: Path, path: str) -> None:
    operator_checkpoint(tmp_path)
    document = stored(tmp_path / "chk-1")
    document["operators"][0]["subtasks"][0]["path"] = path
    # Sealed with the key: a path that leaves the directory is refused by the format itself.
    (tmp_path / "chk-1" / "_metadata").write_text(json.dumps(seal(document, TEST_KEY)))
    with pytest.raises(FormatError, match="must be a plain file name"):
        read_metadata((tmp_path / "chk-1").as_uri(), TEST_KEY)


def test_a_savepoint_of_another_key_is_refused_unless_trusted_and_then_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    metadata = operator_checkpoint(tmp_path)
    location = (tmp_path / "chk-1").as_uri()
    write_metadata(location, metadata, OTHER_KEY)
    with pytest.raises(IntegrityError, match=r"another key .*--trust-savepoint"):
        read_metadata(location, TEST_KEY)
    with caplog.at_level(logging.WARNING, "sluice.checkpoint.storage"):
        trusted = read_metadata(location, TEST_KEY, trust=True)
    assert "--trust-savepoint" in caplog.text and location in caplog.text
    # Trusted, its files are still checked against the digests it records.
    plant_same_size(tmp_path / "chk-1" / "src-0.state", tmp_path / "marker")
    with pytest.raises(IntegrityError, match=r"src-0\.state"):
        restored_share(trusted, "src", 0, 1, 128)
    assert not (tmp_path / "marker").exists()


def test_a_checkpoint_of_the_jobs_own_directory_without_a_valid_mac_is_never_restored(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path.as_uri(), "job", TEST_KEY)
    metadata = write_checkpoint(tmp_path / "job" / "chk-1", "src", {0: OperatorSnapshot(lists={"a": [1]})}, 1)
    assert storage.latest_completed() == metadata.location
    write_metadata(metadata.location, metadata, OTHER_KEY)
    with pytest.raises(NoRestorableCheckpoint):
        storage.latest_completed()


def test_a_taskmanager_reads_only_the_metadata_the_coordinator_checked(tmp_path: Path) -> None:
    metadata = operator_checkpoint(tmp_path)
    assert read_pinned_metadata(metadata.location, metadata.digest).operators == metadata.operators
    write_metadata(metadata.location, metadata, OTHER_KEY)  # swapped after the coordinator read it
    with pytest.raises(IntegrityError, match="_metadata does not match"):
        read_pinned_metadata(metadata.location, metadata.digest)


def test_a_metadata_symlinked_elsewhere_is_refused(tmp_path: Path) -> None:
    operator_checkpoint(tmp_path)
    real = tmp_path / "real-metadata"
    (tmp_path / "chk-1" / "_metadata").rename(real)
    (tmp_path / "chk-1" / "_metadata").symlink_to(real)
    with pytest.raises(IntegrityError, match="symbolic link"):
        read_metadata((tmp_path / "chk-1").as_uri(), TEST_KEY)
