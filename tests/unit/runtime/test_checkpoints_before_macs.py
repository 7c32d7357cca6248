"""Checkpoints an older Sluice wrote (`_metadata` version 2, no MAC), found after an upgrade.

They are refused like any checkpoint this deployment's key did not authenticate, and the refusal says
exactly how to restore them once the user vouches for them. A MAC stripped off a version 3 `_metadata`
is tampering, not an upgrade: it gets no such advice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.snapshot import OperatorSnapshot
from sluice.checkpoint.storage import CheckpointStorage, NoRestorableCheckpoint, read_metadata

from ._support import TEST_KEY, write_checkpoint


def checkpoint(directory: Path) -> str:
    return write_checkpoint(directory, "src", {0: OperatorSnapshot(lists={"offsets": [7]})}, 1).location


def rewrite_as_version_2(location: Path) -> None:
    """`_metadata` as Sluice wrote it before version 3: no MAC, no digests."""
    document: dict[str, Any] = json.loads((location / "_metadata").read_text())
    del document["integrity"]
    document["version"] = 2
    for operator in document["operators"]:
        for handle in operator["subtasks"]:
            handle.pop("sha256", None)
    (location / "_metadata").write_text(json.dumps(document))


def test_a_version_2_checkpoint_is_refused_saying_the_flags_that_restore_it(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path.as_uri(), "orders", TEST_KEY)
    location = checkpoint(tmp_path / "orders" / "chk-4")
    rewrite_as_version_2(tmp_path / "orders" / "chk-4")
    with pytest.raises(NoRestorableCheckpoint) as refused:
        storage.latest_completed()
    message = str(refused.value)
    assert "written by a Sluice from before checkpoints were authenticated" in message
    assert f"--job-id <a new id> --from-savepoint {location} --trust-savepoint" in message
    assert "spec.trustSavepoint: true" in message
    # Following the advice restores it: the new job reads it as a trusted savepoint.
    assert read_metadata(location, TEST_KEY, trust=True).operator("src") is not None


def test_the_newest_version_2_checkpoint_is_the_one_named(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path.as_uri(), "orders", TEST_KEY)
    for cid in (3, 4):
        checkpoint(tmp_path / "orders" / f"chk-{cid}")
        rewrite_as_version_2(tmp_path / "orders" / f"chk-{cid}")
    with pytest.raises(NoRestorableCheckpoint, match=r"chk-4 --trust-savepoint"):
        storage.latest_completed()


def test_a_version_3_checkpoint_stripped_of_its_mac_gets_no_advice_to_trust_it(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path.as_uri(), "orders", TEST_KEY)
    checkpoint(tmp_path / "orders" / "chk-4")
    metadata = tmp_path / "orders" / "chk-4" / "_metadata"
    document = json.loads(metadata.read_text())
    del document["integrity"]
    document["version"] = 3  # what this Sluice writes, whatever the helper recorded
    metadata.write_text(json.dumps(document))
    with pytest.raises(NoRestorableCheckpoint) as refused:
        storage.latest_completed()
    assert "--trust-savepoint" not in str(refused.value)
    assert "Resume it from a savepoint (--from-savepoint)" in str(refused.value)
