"""The stored `job-result.json` is pinned: a result stored before the declarative codec is believed and read
with it, and what it writes is what the writer before it wrote.

`WRITTEN_BEFORE` is the result the hand-written writer stored (taken before the codec replaced it),
sealed with the test key; the codec writing the same bytes also shows the MAC's canonical form is
unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice._json import FormatError
from sluice._states import JobState
from sluice.coordinator.result_store import JobResult, read_result, write_result

from ._support import TEST_KEY

RESULT = JobResult(
    "job-1",
    JobState.FINISHED,
    1700000000999,
    last_savepoint="file:///sp/savepoint-job-1-7",
    stop_savepoint="file:///sp/savepoint-job-1-7",
    last_checkpoint="file:///chk/job-1/chk-6",
)

WRITTEN_BEFORE = """\
{
 "jobId": "job-1",
 "state": "FINISHED",
 "timestamp": 1700000000999,
 "lastSavepoint": "file:///sp/savepoint-job-1-7",
 "stopSavepoint": "file:///sp/savepoint-job-1-7",
 "lastCheckpoint": "file:///chk/job-1/chk-6",
 "error": null,
 "integrity": {
  "algorithm": "HMAC-SHA-256",
  "keyId": "9cbeed8730e4a186",
  "mac": "931204943ae754f6d40e0d7333252c3a468b3729c61725b86ab103d7cbed8678"
 }
}"""

FAILED_BEFORE = (
    '{"jobId": "job-2", "state": "FAILED", "timestamp": 5, "lastSavepoint": null, "stopSavepoint": null, '
    '"lastCheckpoint": null, "error": "boom"}'
)
"""An unsealed result with every optional field null but the error, as the writer before wrote it."""


def test_a_result_stored_before_the_codec_is_believed_and_read_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "job-result.json").write_text(WRITTEN_BEFORE)
    assert read_result(f"file://{tmp_path}", "job-1", TEST_KEY) == RESULT


def test_the_codec_stores_the_bytes_the_writer_before_it_stored(tmp_path: Path) -> None:
    write_result(f"file://{tmp_path}", RESULT, TEST_KEY)
    assert (tmp_path / "job-result.json").read_text() == WRITTEN_BEFORE


def test_a_failed_result_reads_and_writes_back_as_before() -> None:
    read = JobResult.parse(FAILED_BEFORE)
    assert read == JobResult("job-2", JobState.FAILED, 5, error="boom")
    assert json.dumps(read.to_json()) == FAILED_BEFORE  # the same keys in the same order


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"jobId": None}, "'jobId' must be a string, not null"),
        ({"state": "DONE"}, "'state' must be one of 'CREATED'"),
        ({"timestamp": "5"}, "'timestamp' must be an integer, not a string"),
        ({"timestamp": True}, "'timestamp' must be an integer, not a boolean"),
        ({"lastCheckpoint": 7}, "'lastCheckpoint' must be a string or null, not a number"),
        ({"error": ["x"]}, "'error' must be a string or null, not an array"),
    ],
)
def test_a_malformed_result_is_refused_naming_the_file_and_field(
    change: dict[str, object], problem: str
) -> None:
    payload = json.dumps({**json.loads(FAILED_BEFORE), **change})
    with pytest.raises(FormatError, match=r"^file:///chk/job-2/job-result\.json: ") as caught:
        JobResult.parse(payload, "file:///chk/job-2/job-result.json")
    assert problem in str(caught.value)


def test_a_result_lacking_a_field_it_must_have_is_refused() -> None:
    with pytest.raises(FormatError, match=r"^job-result\.json lacks the field 'timestamp'$"):
        JobResult.parse(json.dumps({"jobId": "job-2", "state": "FAILED"}))
