"""The last line `sluice run` prints: how the job ended, never `None` for a cause, and how to go on."""

from __future__ import annotations

from sluice._runner import ending
from sluice._states import JobState
from sluice.coordinator.result_store import JobResult

CHK = "file:///data/chk/j1/chk-7"


def _result(state: JobState, error: str | None = None, last_checkpoint: str | None = None) -> JobResult:
    return JobResult("j1", state, 0, last_checkpoint=last_checkpoint, error=error)


def test_a_canceled_job_without_an_error_says_it_was_canceled_not_none() -> None:
    line = ending(_result(JobState.CANCELED))
    assert line == "job j1 CANCELED: canceled by request"
    assert "None" not in line


def test_a_failed_job_names_its_cause_and_the_last_retained_checkpoint() -> None:
    line = ending(_result(JobState.FAILED, "task count[0] failed: ZeroDivisionError", CHK))
    assert line.startswith("job j1 FAILED: task count[0] failed: ZeroDivisionError")
    assert f"last retained checkpoint is {CHK}" in line and f"--from-savepoint {CHK}" in line


def test_a_canceled_job_names_the_last_retained_checkpoint() -> None:
    line = ending(_result(JobState.CANCELED, "canceled by request", CHK))
    assert line.startswith("job j1 CANCELED: canceled by request;") and CHK in line


def test_a_job_whose_state_could_not_be_restored_has_not_ended_and_is_told_how_to_resume() -> None:
    reason = f"no retained checkpoint of job j1 can be restored ({CHK}: see the warnings above)"
    line = ending(_result(JobState.SUSPENDED, reason), restore_failure=reason)
    assert line.startswith(f"job j1 SUSPENDED: its state could not be restored: {reason}")
    assert "has not ended" in line and "--job-id j1 and the same --checkpoint-dir" in line
    assert "--from-savepoint" in line


def test_a_restore_failure_names_the_snapshot_a_new_job_could_start_from() -> None:
    savepoint = "file:///data/sp/savepoint-j1-5"
    result = JobResult("j1", JobState.SUSPENDED, 0, last_savepoint=savepoint, error="x")
    assert f"--from-savepoint {savepoint} and another --job-id" in ending(result, restore_failure="x")


def test_a_finished_job_names_the_savepoint_it_stopped_with() -> None:
    result = JobResult("j1", JobState.FINISHED, 0, stop_savepoint="file:///sp/savepoint-j1-3")
    assert ending(result) == "job j1 FINISHED; savepoint file:///sp/savepoint-j1-3"
