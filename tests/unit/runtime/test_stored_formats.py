"""`_metadata`, job results and acknowledgements come from storage or the network: a malformed one is
refused with the field that is wrong, and a good one reads back as it was written."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sluice._json import FormatError
from sluice._states import CheckpointKind, JobState, StopMode
from sluice.checkpoint.acknowledgement import AckedOperator, Acknowledgement
from sluice.checkpoint.integrity import seal
from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry, PendingCommit, SubtaskHandle
from sluice.checkpoint.storage import damage, read_metadata, write_metadata
from sluice.coordinator.result_store import JobResult, read_result, result_uri
from sluice.state.chain_files import KeyedFile

from ._support import TEST_KEY

HANDLE = {"index": 0, "path": "a-0.state", "size": 3, "keyGroups": [0, 63], "operatorState": True}
ENTRY = {
    "uid": "a",
    "parallelism": 2,
    "maxParallelism": 128,
    "fullyFinished": False,
    "finishedSubtasks": [1],
    "subtasks": [HANDLE],
}
METADATA = {
    "version": 2,
    "checkpointId": 4,
    "jobId": "job",
    "kind": "savepoint",
    "timestamp": 17,
    "stopMode": "no-drain",
    "operators": [ENTRY],
}


def with_field(path: tuple[Any, ...], value: Any) -> str:
    """METADATA with the field at `path` (keys and list positions) set to `value`, or removed."""
    doc = json.loads(json.dumps(METADATA))
    target = doc
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(doc)


def test_metadata_reads_as_written() -> None:
    metadata = CheckpointMetadata.parse(json.dumps(METADATA), "file:///sp/savepoint-job-4")
    assert metadata.kind is CheckpointKind.SAVEPOINT and metadata.stop_mode is StopMode.SUSPEND
    assert metadata.location == "file:///sp/savepoint-job-4"
    assert metadata.operators[0].subtasks[0] == SubtaskHandle(0, "a-0.state", 3, (0, 63), True, False)
    # Fields a version 1 file may lack take the meaning they had then.
    assert metadata.to_json()["operators"][0]["subtasks"][0] == {**HANDLE, "union": False}


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (("checkpointId",), KeyError, "lacks the field 'checkpointId'"),
        (("checkpointId",), "4", "'checkpointId' must be an integer, not a string"),
        (("version",), 4, "format version 4; this Sluice reads versions 1, 2, 3"),
        (("kind",), "backup", "'kind' must be one of 'checkpoint', 'savepoint'"),
        (("stopMode",), "terminate", "'stopMode' must be null, 'drain' or 'no-drain', not a string"),
        (("operators",), {}, "'operators' must be an array, not an object"),
        (("operators", 0), [], "'operators[0]' must be an object, not an array"),
        (("operators", 0, "fullyFinished"), 1, "'fullyFinished' must be true or false"),
        (("operators", 0, "parallelism"), 0, "'parallelism' must be at least 1"),
        (("operators", 0, "finishedSubtasks"), [-1], "'finishedSubtasks[0]' must be at least 0"),
        (("operators", 0, "subtasks", 0, "path"), "../../etc/passwd", "must be a plain file name"),
        (("operators", 0, "subtasks", 0, "path"), "..", "must be a plain file name"),
        (("operators", 0, "subtasks", 0, "size"), True, "'size' must be an integer, not a boolean"),
        (("operators", 0, "subtasks", 0, "keyGroups"), [5, 2], "'keyGroups' must be null or [first, last]"),
        (("operators", 0, "subtasks", 0, "keyedFiles"), [{"name": "/x", "size": 1}], "not a plain file"),
        (("operators", 0, "subtasks", 0, "protectedFiles"), ["../chk-3/_metadata"], "not a plain file"),
        (("operators", 0, "subtasks", 0, "protectedFiles"), [7], "not a plain file"),
        (("operators", 0, "subtasks", 0, "protectedFiles"), ["a.kv"] * 65, "at most 64"),
        (("operators", 0, "subtasks", 0, "protectedFiles"), "a.kv", "'protectedFiles' must be an array"),
        (("operators", 0, "subtasks", 0, "sha256"), "AB" * 32, "'sha256' must be 64 lowercase hexadecimal"),
        (("operators", 0, "subtasks", 0, "index"), -1, "subtasks[0]: 'index' must be at least 0"),
        (("operators", 0, "subtasks", 0, "size"), KeyError, "subtasks[0] lacks the field 'size'"),
        (("operators", 0, "subtasks"), KeyError, "operators[0] lacks the field 'subtasks'"),
        (("operators", 0, "finishedSubtasks"), KeyError, "operators[0] lacks the field 'finishedSubtasks'"),
        (("operators", 0, "pendingCommits"), [{"index": 0, "path": None, "size": 1}], "'path' must be a"),
        (("operators", 0, "pendingCommits"), [{"index": 0, "path": "a/b", "size": 1}], "plain file name"),
        (("operators", 0, "finishedInputs"), [True], "'finishedInputs[0]' must be an integer"),
        (("version",), "3", "'version' must be an integer, not a string"),
        (("version",), KeyError, "lacks the field 'version'"),
        (("stopMode",), 5, "'stopMode' must be null, 'drain' or 'no-drain', not a number"),
    ],
)
def test_malformed_metadata_is_refused_naming_the_field(
    path: tuple[Any, ...], value: Any, problem: str
) -> None:
    with pytest.raises(FormatError) as caught:
        CheckpointMetadata.parse(with_field(path, value), "file:///chk/job/chk-4")
    assert problem in str(caught.value)
    assert "file:///chk/job/chk-4/_metadata" in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("path", "../" * 100_000, 'plain file name, not a string ("../../'),
        ("keyGroups", [0] * 100_000, "'keyGroups' must be null or [first, last], not an array ([0, 0"),
        ("protectedFiles", ["/" * 100_000], "protected file name '///"),
        ("sha256", "f" * 100_000, "'sha256' must be 64 lowercase hexadecimal digits, not a string"),
    ],
    ids=["path", "keyGroups", "protectedFiles", "sha256"],
)
def test_a_huge_malformed_field_gets_a_short_answer(field: str, value: Any, problem: str) -> None:
    with pytest.raises(FormatError) as caught:
        CheckpointMetadata.parse(
            with_field(("operators", 0, "subtasks", 0, field), value), "file:///chk/j/chk-4"
        )
    assert problem in str(caught.value) and len(str(caught.value)) < 300


@pytest.mark.parametrize("payload", [b"\x80\x04K\x01.", b"[]", b'{"version": 2', b"[" * 100_000])
def test_metadata_that_is_no_json_object_is_refused(payload: bytes) -> None:
    with pytest.raises(FormatError, match=r"not JSON|must be a JSON object"):
        CheckpointMetadata.parse(payload)


def test_a_malformed_stored_metadata_is_damage_not_a_crash(tmp_path: Path) -> None:
    location = f"file://{tmp_path / 'chk-4'}"
    (tmp_path / "chk-4").mkdir()
    # Sealed with the deployment's key: malformed as the coordinator wrote it, not tampered with.
    sealed = seal(json.loads(with_field(("jobId",), None)), TEST_KEY)
    (tmp_path / "chk-4" / "_metadata").write_text(json.dumps(sealed))
    problem = damage(location, TEST_KEY)
    assert problem is not None and "'jobId' must be a string, not null" in problem
    with pytest.raises(FormatError):
        read_metadata(location, TEST_KEY)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"size": -1}, "keyedFiles[0]: 'size' must be at least 0"),
        ({"size": "9"}, "keyedFiles[0]: 'size' must be an integer, not a string"),
        ({"sha256": "xyz"}, "keyedFiles[0]: 'sha256' must be 64 lowercase hexadecimal digits"),
        ({"full": "yes"}, "keyedFiles[0]: 'full' must be true or false"),
        ({"name": "..kv/x"}, "keyedFiles[0]: keyed state file name '..kv/x' is not a plain file name"),
    ],
)
def test_a_malformed_keyed_file_entry_is_refused_naming_it(entry: dict[str, Any], problem: str) -> None:
    good = {"name": "a-0-4-5f.kv", "size": 9, "full": True, "shared": True, "sha256": "ab" * 32}
    payload = with_field(("operators", 0, "subtasks", 0, "keyedFiles"), [good | entry])
    with pytest.raises(FormatError) as caught:
        CheckpointMetadata.parse(payload, "file:///chk/job/chk-4")
    assert f"file:///chk/job/chk-4/_metadata operators[0] subtasks[0] {problem}" in str(caught.value)


def test_written_metadata_reads_back_equal(tmp_path: Path) -> None:
    chain = (KeyedFile("b-0-3-ab.kv", 9, True, True, "ab" * 32),)
    metadata = CheckpointMetadata(
        4,
        "job",
        CheckpointKind.SAVEPOINT,
        17,
        StopMode.TERMINATE,
        (
            OperatorEntry(
                "a", 2, 128, False, (1,), (SubtaskHandle(0, None, 0, (0, 63), False, False, chain),)
            ),
            OperatorEntry(
                "sink", 2, 128, True, pending_commits=(PendingCommit(0, "sink-0.state", 5, "cd" * 32),)
            ),
        ),
    )
    location = f"file://{tmp_path / 'sp'}"
    write_metadata(location, metadata, TEST_KEY)
    assert json.loads((tmp_path / "sp" / "_metadata").read_text())["stopMode"] == "drain"
    read = read_metadata(location, TEST_KEY)
    assert read == replace(metadata, location=location, digest=read.digest)


def test_a_malformed_job_result_names_the_file_and_field(tmp_path: Path) -> None:
    job_dir = f"file://{tmp_path}"
    good = JobResult("job", JobState.FINISHED, 5, stop_savepoint="file:///sp/savepoint-job-9")
    (tmp_path / "job-result.json").write_text(json.dumps(seal(good.to_json(), TEST_KEY)))
    assert read_result(job_dir, "job", TEST_KEY) == good
    # Authenticated, yet malformed: only a Sluice that wrote it wrong makes one, and it is not run past.
    bad = seal({**good.to_json(), "state": "DONE"}, TEST_KEY)
    (tmp_path / "job-result.json").write_text(json.dumps(bad))
    with pytest.raises(FormatError) as caught:
        read_result(job_dir, "job", TEST_KEY)
    assert result_uri(job_dir) in str(caught.value) and "'state' must be one of 'CREATED'" in str(
        caught.value
    )


def test_a_job_result_keeps_the_request_id_of_its_stop_and_an_older_one_reads_without(tmp_path: Path) -> None:
    job_dir = f"file://{tmp_path}"
    stopped = JobResult(
        "job", JobState.FINISHED, 5, stop_savepoint="file:///sp/savepoint-job-9", stop_request_id="uid-1.0"
    )
    (tmp_path / "job-result.json").write_text(json.dumps(seal(stopped.to_json(), TEST_KEY)))
    assert read_result(job_dir, "job", TEST_KEY) == stopped
    # Stored by a Sluice from before stops carried request ids: the field is not there at all.
    older = {k: v for k, v in stopped.to_json().items() if k != "stopRequestId"}
    (tmp_path / "job-result.json").write_text(json.dumps(seal(older, TEST_KEY)))
    assert read_result(job_dir, "job", TEST_KEY) == replace(stopped, stop_request_id=None)


def ack_message(**operator: Any) -> dict[str, Any]:
    op = AckedOperator("a", finished=False, path="a-0.state", size=3).to_json() | operator
    return {"type": "ack", "checkpoint": 4, "vertex": 0, "subtask": 1, "endOfData": False, "operators": [op]}


def test_an_acknowledgement_reads_as_sent() -> None:
    sent = Acknowledgement(4, 0, 1, (AckedOperator("a", False, "a-0.state", 3, (0, 9)),), True, 1.5, 2.0)
    assert Acknowledgement.from_json(json.loads(json.dumps(sent.to_json()))) == sent
    protecting = AckedOperator("a", False, None, 0, (0, 9), protected_files=("a-0-4-5f1c2a9e0b7d.kv",))
    sent = Acknowledgement(4, 0, 1, (protecting,), False)
    received = Acknowledgement.from_json(json.loads(json.dumps(sent.to_json())))
    assert received == sent and received.operators[0].handle(1).protected_files == protecting.protected_files


@pytest.mark.parametrize(
    ("operator", "problem"),
    [
        ({"uid": 7}, "'uid' must be a string"),
        ({"path": "../chk-3/a-0.state"}, "must be a plain file name"),
        ({"finished": None}, "'finished' must be true or false"),
        ({"keyedFiles": "all"}, "'keyedFiles' must be an array"),
        ({"protectedFiles": ["x/../../etc"]}, "not a plain file name"),
        ({"protectedFiles": "a.kv"}, "'protectedFiles' must be an array"),
    ],
)
def test_a_malformed_acknowledgement_is_refused(operator: dict[str, Any], problem: str) -> None:
    with pytest.raises(FormatError, match="acknowledgement of checkpoint 4") as caught:
        Acknowledgement.from_json(ack_message(**operator))
    assert problem in str(caught.value)


def test_cost_figures_that_are_not_numbers_count_as_nothing() -> None:
    message = ack_message(bytesWritten="many", stateSize=-4) | {"syncMs": float("nan"), "asyncMs": None}
    ack = Acknowledgement.from_json(message)
    assert (ack.sync_ms, ack.async_ms, ack.operators[0].bytes_written, ack.operators[0].state_size) == (
        0,
        0,
        0,
        0,
    )
