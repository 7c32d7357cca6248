"""A `job-result.json` someone else put in the job's directory does not end the job.

A stored result stops a job id for good (a result saying FINISHED is not run again), so it is believed
only with a MAC made with the deployment's state key and only for the job it names. Each test plays
someone who can write the checkpoint directory but does not hold the key.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from sluice._states import JobState
from sluice.checkpoint.integrity import seal
from sluice.checkpoint.state_key import StateKey
from sluice.coordinator.result_store import JobResult, read_result, write_result

from ._support import TEST_KEY

OTHER_KEY = StateKey(b"another deployment's key, 32 bytes")
ENDED = JobResult("orders", JobState.FINISHED, 1_700_000_000_000, last_checkpoint="file:///chk/orders/chk-9")


def plant(tmp_path: Path, document: dict[str, Any] | str) -> str:
    text = document if isinstance(document, str) else json.dumps(document)
    (tmp_path / "orders").mkdir(exist_ok=True)
    (tmp_path / "orders" / "job-result.json").write_text(text)
    return (tmp_path / "orders").as_uri()


def disbelieved(caplog: pytest.LogCaptureFixture, job_dir: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "sluice.coordinator.result_store"
        and "is not believed" in r.getMessage()
        and f"{job_dir}/job-result.json" in r.getMessage()
    ]


@pytest.fixture(autouse=True)
def _warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "sluice.coordinator.result_store")


def test_a_result_the_job_wrote_is_believed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    job_dir = (tmp_path / "orders").as_uri()
    write_result(job_dir, ENDED, TEST_KEY)
    assert read_result(job_dir, "orders", TEST_KEY) == ENDED
    assert json.loads((tmp_path / "orders" / "job-result.json").read_text())["integrity"]["keyId"] == (
        TEST_KEY.key_id
    )
    assert not disbelieved(caplog, job_dir)


def test_a_planted_result_without_a_mac_is_not_believed_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job_dir = plant(tmp_path, ENDED.to_json())  # also what a Sluice before MACs wrote
    assert read_result(job_dir, "orders", TEST_KEY) is None
    assert read_result(job_dir, "orders", TEST_KEY) is None  # the runner reads it, then the job master
    (line,) = disbelieved(caplog, job_dir)
    assert "carries no MAC" in line and "job orders runs as if it had not ended" in line
    assert f"stop it and delete {job_dir}/job-result.json" in line


def test_a_result_with_a_wrong_mac_is_not_believed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sealed = seal(ENDED.to_json(), TEST_KEY)
    sealed["integrity"]["mac"] = "0" * 64
    job_dir = plant(tmp_path, sealed)
    assert read_result(job_dir, "orders", TEST_KEY) is None
    (line,) = disbelieved(caplog, job_dir)
    assert "does not match its MAC" in line


def test_an_authentic_result_edited_to_say_finished_is_not_believed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sealed = seal(JobResult("orders", JobState.FAILED, 5, error="boom").to_json(), TEST_KEY)
    job_dir = plant(tmp_path, {**sealed, "state": "FINISHED", "error": None})
    assert read_result(job_dir, "orders", TEST_KEY) is None
    assert "does not match its MAC" in disbelieved(caplog, job_dir)[0]


def test_a_result_made_with_another_key_is_not_believed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job_dir = plant(tmp_path, seal(ENDED.to_json(), OTHER_KEY))
    assert read_result(job_dir, "orders", TEST_KEY) is None
    assert "another key" in disbelieved(caplog, job_dir)[0]


def test_another_jobs_authentic_result_copied_here_is_not_believed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = JobResult("payments", JobState.FINISHED, 1)
    job_dir = plant(tmp_path, seal(other.to_json(), TEST_KEY))
    assert read_result(job_dir, "orders", TEST_KEY) is None
    assert "is the result of job 'payments'" in disbelieved(caplog, job_dir)[0]


@pytest.mark.parametrize("text", ["{ not json", "[1, 2]", ""])
def test_a_result_that_is_no_json_object_is_not_believed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    job_dir = plant(tmp_path, text)
    assert read_result(job_dir, "orders", TEST_KEY) is None
    assert disbelieved(caplog, job_dir)
