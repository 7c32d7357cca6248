"""`job-result.json` as both sides read it (`sluice_contract.results`): believed only under the
deployment's MAC and for its own job, and then read field by field."""

from __future__ import annotations

import json

import pytest

from sluice_contract.codec import DocumentError
from sluice_contract.integrity import key_id, seal
from sluice_contract.results import Disbelieved, JobResult, believed
from sluice_contract.states import JobState

KEY = b"the deployment's state key, 32 b"
STOPPED = JobResult(
    "job-1",
    JobState.FINISHED,
    1_700_000_000_999,
    last_savepoint="s3://b/sp/savepoint-job-1-7",
    stop_savepoint="s3://b/sp/savepoint-job-1-7",
    stop_request_id="uid.0",
)


def _stored(document: dict[str, object]) -> bytes:
    return json.dumps(document).encode()


def test_a_result_sealed_with_the_key_for_its_job_is_read_as_written() -> None:
    assert believed(_stored(seal(STOPPED.to_json(), KEY)), "job-1", KEY) == STOPPED


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b'{"jobId": "job-1", "sta', "is not JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (_stored(STOPPED.to_json()), "carries no MAC"),
        (_stored(seal(STOPPED.to_json(), b"another deployment's key, 32 by")), "with another key"),
        (
            _stored({**seal(STOPPED.to_json(), KEY), "stopSavepoint": "s3://planter/sp"}),
            "does not match its MAC",
        ),
        (_stored(seal({**STOPPED.to_json(), "jobId": "job-2"}, KEY)), "is the result of job 'job-2'"),
    ],
    ids=["cut short", "an array", "unsigned", "another key", "edited", "another job's"],
)
def test_a_result_not_sealed_for_this_job_is_not_believed_and_says_why(payload: bytes, why: str) -> None:
    found = believed(payload, "job-1", KEY)
    assert isinstance(found, Disbelieved)
    assert why in found.why


def test_the_other_key_is_named_by_its_id_only() -> None:
    found = believed(_stored(seal(STOPPED.to_json(), b"another deployment's key, 32 by")), "job-1", KEY)
    assert isinstance(found, Disbelieved) and key_id(KEY) in found.why


def test_a_sealed_result_with_a_malformed_field_is_refused_naming_it() -> None:
    # Authentic, so Sluice itself wrote it wrong: an error, not a result quietly taken as absent.
    document = seal({**STOPPED.to_json(), "state": "DONE"}, KEY)
    with pytest.raises(DocumentError, match=r"^s3://b/chk/job-1/job-result\.json: 'state' must be one of"):
        believed(_stored(document), "job-1", KEY, "s3://b/chk/job-1/job-result.json")


def test_a_result_without_a_stop_request_leaves_the_field_out() -> None:
    plain = JobResult("job-1", JobState.FAILED, 5, error="boom")
    assert "stopRequestId" not in plain.to_json()
    assert JobResult.from_json(plain.to_json()) == plain
    assert STOPPED.to_json()["stopRequestId"] == "uid.0"
