"""A savepoint request is refused, taken or failed by the job master's Savepoints and its finishing state
machine; the REST API only maps a refusal to 400 or 409 (sluice.coordinator.savepoints)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sluice._states import CheckpointKind, JobState, StopMode
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointDeclined
from sluice.checkpoint.decider import Progress
from sluice.checkpoint.finishing import Finishing, Phase
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.storage import CheckpointStorage
from sluice.coordinator._attempt_events import (
    AttemptEvent,
    AttemptFailed,
    EndRequested,
    TasksFinished,
    stop_failure,
)
from sluice.coordinator.savepoints import Refusal, Savepoint, SavepointRefused, Savepoints
from sluice.transport.messages import Stop

from ._support import TEST_KEY

ENDED = Progress(pending=False, last_completion=0.0, all_reached_end=True, all_finished=False)
"""Every task has reached end of data."""


class _Job:
    """What Savepoints and the finishing state machine are given by the job master, recorded."""

    def __init__(self, tmp_path: Path, default_dir: str | None = None) -> None:
        self.state = JobState.RUNNING
        self.declined = False
        self.triggered: list[tuple[CheckpointKind, str | None, StopMode | None]] = []
        self.futures: list[asyncio.Future[CheckpointMetadata]] = []
        self.broadcast: list[Stop] = []
        self.failed: list[str] = []
        self.finishing = Finishing(
            CheckpointConfig(interval_s=None),
            trigger=self._trigger,
            broadcast=self.broadcast.append,
            fail_attempt=self.failed.append,
        )
        self.finishing.attempt_started(0.0)
        self.savepoints = Savepoints(
            storage=CheckpointStorage(f"file://{tmp_path / 'chk'}", "job", TEST_KEY),
            trigger=self._trigger,
            finishing=self.finishing,
            job_state=lambda: self.state,
            default_dir=default_dir,
        )

    def _trigger(
        self, kind: CheckpointKind, target: str | None, stop_mode: StopMode | None
    ) -> asyncio.Future[CheckpointMetadata]:
        if self.declined:
            raise CheckpointDeclined("no task is running")
        self.triggered.append((kind, target, stop_mode))
        self.futures.append(asyncio.get_running_loop().create_future())
        return self.futures[-1]


def _completed(checkpoint_id: int, location: str) -> CheckpointMetadata:
    return CheckpointMetadata(checkpoint_id, "job", CheckpointKind.SAVEPOINT, 0, None, (), location=location)


def test_refusals_name_what_is_missing(tmp_path: Path) -> None:
    job = _Job(tmp_path)
    with pytest.raises(SavepointRefused, match="--savepoint-dir") as refused:
        job.savepoints.check(None)
    assert refused.value.refusal is Refusal.NO_DIRECTORY
    job.state = JobState.RESTARTING
    with pytest.raises(SavepointRefused, match="the job is RESTARTING") as refused:
        job.savepoints.check("file:///sp")
    assert refused.value.refusal is Refusal.NOT_RUNNING


def test_the_default_directory_is_the_target_when_none_is_given(tmp_path: Path) -> None:
    job = _Job(tmp_path, default_dir="file:///default-sp")
    assert job.savepoints.check(None) == "file:///default-sp"
    assert job.savepoints.check("file:///other") == "file:///other"


def test_a_savepoint_returns_its_checkpoint_id_and_path(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = _Job(tmp_path)
        target = f"file://{tmp_path / 'sp'}"
        taking = asyncio.create_task(job.savepoints.take(target))
        while not job.futures:
            await asyncio.sleep(0.01)
        assert job.triggered == [(CheckpointKind.SAVEPOINT, target, None)]
        job.futures[0].set_result(_completed(12, f"{target}/savepoint-job-12"))
        assert await taking == Savepoint(12, f"{target}/savepoint-job-12")
        assert job.savepoints.last == f"{target}/savepoint-job-12"
        assert job.savepoints.stopped_with is None

    asyncio.run(scenario())


def test_a_stop_refuses_a_second_stop_and_takes_its_savepoint_when_told(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = _Job(tmp_path)
        target = f"file://{tmp_path / 'sp'}"
        stopping = asyncio.create_task(job.savepoints.stop(StopMode.SUSPEND, target))
        while not job.broadcast:
            await asyncio.sleep(0.01)
        assert job.broadcast == [Stop(StopMode.SUSPEND)]
        phases = [job.finishing.phase]
        with pytest.raises(SavepointRefused, match="stop-with-savepoint is in progress") as refused:
            job.savepoints.check(target)
        assert refused.value.refusal is Refusal.STOPPING
        job.finishing.tick(1.0, Progress(False, 0.0, all_reached_end=False, all_finished=False))
        assert job.triggered == []  # not before every task reached end of data

        job.finishing.tick(2.0, ENDED)
        phases.append(job.finishing.phase)
        assert job.triggered == [(CheckpointKind.SAVEPOINT, target, StopMode.SUSPEND)]
        job.futures[0].set_result(_completed(3, f"{target}/savepoint-job-3"))
        assert await stopping == Savepoint(3, f"{target}/savepoint-job-3")
        assert job.savepoints.last == job.savepoints.stopped_with == f"{target}/savepoint-job-3"
        phases.append(job.finishing.phase)
        assert phases == [Phase.SUSPENDING, Phase.STOP_SAVEPOINT_PENDING, Phase.CLOSING]
        assert job.failed == []

    asyncio.run(scenario())


def test_a_declined_stop_savepoint_fails_the_stop_and_the_attempt(tmp_path: Path) -> None:
    async def scenario() -> None:
        job = _Job(tmp_path)
        stopping = asyncio.create_task(job.savepoints.stop(StopMode.TERMINATE, f"file://{tmp_path / 'sp'}"))
        while not job.broadcast:
            await asyncio.sleep(0.01)
        job.declined = True
        job.finishing.tick(1.0, ENDED)
        with pytest.raises(RuntimeError, match="stop-with-savepoint failed: declined"):
            await stopping
        # The sources stopped: the job master restarts from the latest checkpoint.
        assert job.failed == ["stop-with-savepoint failed (declined); resuming"]
        assert job.savepoints.stopped_with is None

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (TasksFinished(), "the job finished before the savepoint completed: every task reached the end"),
        (
            AttemptFailed("task map[0] failed: boom"),
            "the job attempt failed before the savepoint completed: ",
        ),
        (EndRequested(JobState.CANCELED, "canceled by request"), "the job was canceled before the savepoint"),
    ],
)
def test_a_stop_whose_attempt_ends_first_fails_saying_why_and_fails_nothing_over(
    tmp_path: Path, event: AttemptEvent, reason: str
) -> None:
    async def scenario() -> None:
        job = _Job(tmp_path)
        stopping = asyncio.create_task(job.savepoints.stop(StopMode.TERMINATE, f"file://{tmp_path / 'sp'}"))
        while not job.broadcast:
            await asyncio.sleep(0.01)
        job.finishing.attempt_ended(isinstance(event, TasksFinished), stop_failure(event))
        with pytest.raises(RuntimeError, match=f"^stop-with-savepoint failed: {reason}"):
            await stopping
        # The attempt's end decides the job's (FINISHED for TasksFinished): the stop adds no failure.
        assert job.failed == []
        assert not job.finishing.stopping and job.savepoints.stopped_with is None

    asyncio.run(scenario())
