"""The contract's JSON documents: what the coordinator writes the operator reads back, field for field,
and a document of the wrong shape is refused with the field named."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sluice._states import CheckpointKind, CheckpointStatus, StopMode
from sluice.checkpoint.pending import CheckpointRecord, SnapshotStats
from sluice_contract.codec import Document
from sluice_contract.rest import (
    CheckpointsSummary,
    CheckpointSummary,
    DocumentError,
    JobRates,
    JobSummary,
    SavepointProgress,
    SavepointTrigger,
    SubtaskCounts,
)


def test_a_checkpoint_the_coordinator_shows_is_read_back_as_it_was() -> None:
    completed = CheckpointRecord(
        7, CheckpointKind.CHECKPOINT, CheckpointStatus.COMPLETED, 100, 160, "file:///c/7", None, ["src"], 2,
        SnapshotStats(1.5, 2.0, 30, 40, 0.25, 3.0),
    )  # fmt: skip
    failed = CheckpointRecord(8, CheckpointKind.SAVEPOINT, CheckpointStatus.FAILED, 200, 260, None, "boom")
    sent = {"latest": completed.as_json(), "history": [failed.as_json(), completed.as_json()]}
    read = CheckpointsSummary.from_json(sent)
    assert read.latest == completed.summary()
    assert read.latest is not None and read.latest.duration_ms == 60 and read.latest.sync_ms == 1.5
    assert read.history == (failed.summary(), completed.summary())
    # Only a completed checkpoint says what it cost.
    assert "durationMs" not in failed.as_json() and failed.as_json()["error"] == "boom"
    assert read.to_json() == sent


def test_the_job_summary_round_trips_and_a_reader_ignores_fields_it_does_not_know() -> None:
    summary = JobSummary("j1", "RUNNING", 1000, None, 2, None, SubtaskCounts(3, 2, 1), JobRates(10.0, None))
    sent = {**summary.to_json(), "vertices": [], "name": "a newer coordinator's field"}
    assert JobSummary.from_json(sent) == summary
    # An older coordinator left some out: they take their defaults.
    assert JobSummary.from_json({"jobId": "j1", "state": "RUNNING"}).subtasks == SubtaskCounts()


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ([], r"^JobSummary must be a JSON object, not an array \(\[\]\)$"),
        ({"state": "RUNNING"}, r"^JobSummary lacks the field 'jobId'$"),
        ({"jobId": 3, "state": "RUNNING"}, r"^JobSummary: 'jobId' must be a string, not a number \(3\)$"),
        (
            {"jobId": "j", "state": "RUNNING", "restarts": True},
            r"^JobSummary: 'restarts' must be an integer or null, not a boolean \(true\)$",
        ),
        (
            {"jobId": "j", "state": "RUNNING", "restarts": 1.5},
            r"^JobSummary: 'restarts' must be an integer or null, not a number \(1.5\)$",
        ),
        (
            {"jobId": "j", "state": "RUNNING", "subtasks": {"total": "3"}},
            r"^JobSummary subtasks: 'total' must be an integer, not a string",
        ),
        (
            {"jobId": "j", "state": "RUNNING", "rates": None},
            r"^JobSummary: 'rates' must be an object, not null \(null\)$",
        ),
    ],
)
def test_a_malformed_job_document_is_refused_with_the_field_named(data: object, named: str) -> None:
    with pytest.raises(DocumentError, match=named):
        JobSummary.from_json(data)


def test_list_items_and_enumerations_are_checked_and_named() -> None:
    record = {"id": 1, "kind": "checkpoint", "status": "COMPLETED", "triggerTime": 1}
    with pytest.raises(
        DocumentError,
        match=r"^CheckpointsSummary history\[1\]: 'kind' must be one of 'checkpoint', 'savepoint'",
    ):
        CheckpointsSummary.from_json({"history": [record, {**record, "kind": "snapshot"}]})
    with pytest.raises(
        DocumentError, match=r"^CheckpointsSummary: 'history' must be an array, not an object \(\{\}\)$"
    ):
        CheckpointsSummary.from_json({"history": {}})
    with pytest.raises(
        DocumentError,
        match=r"^SavepointProgress: 'stop' must be one of 'terminate', 'suspend' or null, not a string",
    ):
        SavepointProgress.from_json({"status": "COMPLETED", "stop": "drain"})
    assert SavepointProgress.from_json({"status": "IN_PROGRESS", "stop": "suspend"}).stop is StopMode.SUSPEND
    assert CheckpointSummary.from_json({**record, "syncMs": 2}).sync_ms == 2.0


@dataclass(frozen=True)
class _Strict(Document):
    refuse_unknown = True
    name: str


def test_a_document_that_refuses_unknown_fields_names_the_first() -> None:
    with pytest.raises(DocumentError, match=r"^_Strict: 'extra' is not a field of _Strict$"):
        _Strict.from_json({"name": "a", "other": 2, "extra": 1})
    assert _Strict.from_json({"name": "a"}) == _Strict("a")


def test_a_savepoint_trigger_is_written_as_the_coordinator_reads_it() -> None:
    sent = SavepointTrigger(StopMode.SUSPEND, "s3://b/sp", "0b7c5a6e-1f2d-4c3b-9a8e-7d6c5b4a3f21.3")
    body = sent.to_json()
    assert body == {"stop": "suspend", "targetDirectory": "s3://b/sp", "requestId": sent.request_id}
    assert SavepointTrigger.from_json(body) == sent
    # No stop is `false` on the wire, and fields without a value are left out.
    assert SavepointTrigger().to_json() == {"stop": False}
    assert SavepointTrigger.from_json({}) == SavepointTrigger.from_json({"stop": None}) == SavepointTrigger()
    with pytest.raises(
        DocumentError, match=r"^SavepointTrigger: 'triggerId' is not a field of SavepointTrigger$"
    ):
        SavepointTrigger.from_json({"triggerId": "abc"})
