"""The stored `_metadata` format is pinned: checkpoints and savepoints written before the declarative
codec restore with it, and what it writes restores with the Sluice before it.

`WRITTEN_BEFORE` is the `_metadata` the hand-written writer made (taken before the codec replaced it),
sealed with the test key. Its MAC is over the canonical JSON of every other field, so the codec writing
the very same bytes also shows that the form the MAC is computed over did not change: a checkpoint
written before is not refused as tampered with.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sluice._json import FormatError
from sluice._states import CheckpointKind, StopMode
from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry, PendingCommit, SubtaskHandle
from sluice.checkpoint.storage import read_metadata, write_metadata
from sluice.state.chain_files import KeyedFile

from ._support import TEST_KEY

D1, D2, D3, D4 = "ab" * 32, "cd" * 32, "ef" * 32, "01" * 32
CHAIN = (
    KeyedFile("win-0-6-5f1c.kv", 100, True, True, D3),
    KeyedFile("win-0-7-9a2b.kv", 40, False, True, D4),
)
METADATA = CheckpointMetadata(
    7,
    "job-1",
    CheckpointKind.SAVEPOINT,
    1700000000123,
    StopMode.TERMINATE,
    (
        OperatorEntry(
            "src", 2, 128, False, (1,), (SubtaskHandle(0, "src-0.state", 12, None, True, True, sha256=D1),)
        ),
        OperatorEntry(
            "win",
            2,
            128,
            False,
            (),
            (
                SubtaskHandle(0, None, 0, (0, 63), False, False, CHAIN, ("win-0-8-77aa.kv",)),
                SubtaskHandle(1, "win-1.state", 5, (64, 127), True, False, (), (), D2),
            ),
            finished_inputs=(0,),
        ),
        OperatorEntry(
            "sink",
            2,
            128,
            True,
            (0, 1),
            (),
            (PendingCommit(0, "sink-0.state", 9, D1), PendingCommit(1, "sink-1.state", 3, D2)),
        ),
    ),
)
"""Every field of the format set at least once, and every one that may be left out left out once."""

WRITTEN_BEFORE = """\
{
 "checkpointId": 7,
 "integrity": {
  "algorithm": "HMAC-SHA-256",
  "keyId": "9cbeed8730e4a186",
  "mac": "d442cf09ed1f66e0b351de0d5d6c845ac0e597322b11f0002b932ecf7b6f4a4c"
 },
 "jobId": "job-1",
 "kind": "savepoint",
 "operators": [
  {
   "finishedSubtasks": [
    1
   ],
   "fullyFinished": false,
   "maxParallelism": 128,
   "parallelism": 2,
   "subtasks": [
    {
     "index": 0,
     "keyGroups": null,
     "operatorState": true,
     "path": "src-0.state",
     "sha256": "abababababababababababababababababababababababababababababababab",
     "size": 12,
     "union": true
    }
   ],
   "uid": "src"
  },
  {
   "finishedInputs": [
    0
   ],
   "finishedSubtasks": [],
   "fullyFinished": false,
   "maxParallelism": 128,
   "parallelism": 2,
   "subtasks": [
    {
     "index": 0,
     "keyGroups": [
      0,
      63
     ],
     "keyedFiles": [
      {
       "full": true,
       "name": "win-0-6-5f1c.kv",
       "sha256": "efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef",
       "shared": true,
       "size": 100
      },
      {
       "full": false,
       "name": "win-0-7-9a2b.kv",
       "sha256": "0101010101010101010101010101010101010101010101010101010101010101",
       "shared": true,
       "size": 40
      }
     ],
     "operatorState": false,
     "path": null,
     "protectedFiles": [
      "win-0-8-77aa.kv"
     ],
     "size": 0,
     "union": false
    },
    {
     "index": 1,
     "keyGroups": [
      64,
      127
     ],
     "operatorState": true,
     "path": "win-1.state",
     "sha256": "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
     "size": 5,
     "union": false
    }
   ],
   "uid": "win"
  },
  {
   "finishedSubtasks": [
    0,
    1
   ],
   "fullyFinished": true,
   "maxParallelism": 128,
   "parallelism": 2,
   "pendingCommits": [
    {
     "index": 0,
     "path": "sink-0.state",
     "sha256": "abababababababababababababababababababababababababababababababab",
     "size": 9
    },
    {
     "index": 1,
     "path": "sink-1.state",
     "sha256": "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
     "size": 3
    }
   ],
   "subtasks": [],
   "uid": "sink"
  }
 ],
 "stopMode": "drain",
 "timestamp": 1700000000123,
 "version": 3
}"""

VERSION_2_BEFORE: dict[str, Any] = {
    "version": 2,
    "checkpointId": 2,
    "jobId": "job-1",
    "kind": "checkpoint",
    "timestamp": 17,
    "stopMode": None,
    "operators": [
        {
            "uid": "a",
            "parallelism": 1,
            "maxParallelism": 128,
            "fullyFinished": False,
            "finishedSubtasks": [],
            "subtasks": [
                {
                    "index": 0,
                    "path": "a-0.state",
                    "size": 3,
                    "keyGroups": None,
                    "operatorState": True,
                    "union": False,
                }
            ],
        }
    ],
}
"""A version 2 `_metadata` (no digests, no MAC), as the writer before the codec wrote it."""


def test_a_metadata_written_before_the_codec_restores_as_it_was_written(tmp_path: Path) -> None:
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "_metadata").write_text(WRITTEN_BEFORE)
    location = f"file://{tmp_path / 'sp'}"
    read = read_metadata(location, TEST_KEY)  # its MAC checked: refused if the codec read it otherwise
    assert read == replace(METADATA, location=location, digest=read.digest)


def test_the_codec_writes_the_bytes_the_writer_before_it_wrote(tmp_path: Path) -> None:
    location = f"file://{tmp_path / 'sp'}"
    write_metadata(location, METADATA, TEST_KEY)
    # The same bytes, MAC included: the canonical form the MAC covers did not change either.
    assert (tmp_path / "sp" / "_metadata").read_text() == WRITTEN_BEFORE


def test_a_version_2_metadata_written_before_the_codec_reads_and_writes_back_the_same() -> None:
    read = CheckpointMetadata.parse(json.dumps(VERSION_2_BEFORE), "file:///sp/savepoint-job-1-2")
    assert read.version == 2 and read.stop_mode is None and read.operators[0].subtasks[0].path == "a-0.state"
    # Compared as parsed JSON: a handle's keys now come in its fields' order (the file sorts them).
    assert read.to_json() == VERSION_2_BEFORE


def test_fields_that_are_not_part_of_the_file_are_not_taken_from_it() -> None:
    planted = {**VERSION_2_BEFORE, "location": "s3://elsewhere", "digest": "ab" * 32}
    read = CheckpointMetadata.parse(json.dumps(planted), "file:///sp/savepoint-job-1-2")
    assert (read.location, read.digest) == ("file:///sp/savepoint-job-1-2", "")
    assert "location" not in read.to_json() and "digest" not in read.to_json()


def test_fields_a_version_1_file_may_lack_take_the_meaning_they_had_then() -> None:
    bare = {k: v for k, v in VERSION_2_BEFORE.items() if k != "stopMode"} | {"version": 1}
    handle = {"index": 0, "size": 0}
    bare["operators"] = [{**VERSION_2_BEFORE["operators"][0], "subtasks": [handle]}]
    read = CheckpointMetadata.parse(json.dumps(bare))
    assert read.stop_mode is None
    assert read.operators[0].subtasks[0] == SubtaskHandle(0, None, 0, None, True, False)


def test_a_version_3_metadata_naming_a_file_without_its_digest_is_refused() -> None:
    document = json.loads(WRITTEN_BEFORE)
    del document["operators"][1]["subtasks"][0]["keyedFiles"][1]["sha256"]
    with pytest.raises(FormatError, match=r"a/_metadata: state file win-0-7-9a2b.kv has no 'sha256'"):
        CheckpointMetadata.parse(json.dumps(document))
