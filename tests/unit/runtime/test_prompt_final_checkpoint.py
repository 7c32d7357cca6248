"""The job master takes the finishing steps as the reports that allow them arrive, not at its next tick:
the final checkpoint is triggered when the last subtask reaches end of data, or when the checkpoint that
was pending then completes. A failed final checkpoint waits for the tick to be tried again, so a store
that fails at once is not asked in a loop. The tick is pushed out to an hour here: only the reports can
move the job master."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest

from sluice._states import CheckpointKind, SubtaskState
from sluice.checkpoint.finishing import Phase
from sluice.coordinator import jobmaster
from sluice.coordinator._attempt_tasks import AttemptTasks
from sluice.coordinator.jobmaster import JobConfig, JobMaster
from sluice.engine.wiring import placement
from sluice.hosts.base import TaskManagerHost
from sluice.transport.messages import TaskReport

from ._graphs import graph
from ._support import TEST_KEY, acknowledge_all


def _running_job(tmp_path: Path) -> JobMaster:
    """A source of two subtasks, as `_support.acknowledge_all` acknowledges it, running (no periodic
    checkpoints: the test triggers what it needs)."""
    g = graph([(["src"], 2)], [])
    config = JobConfig(checkpoint_dir=f"file://{tmp_path / 'chk'}", job_id="job", state_key=TEST_KEY)
    config.checkpoints.interval_s = None
    job = JobMaster(g, config, cast(TaskManagerHost, None))
    job._tasks = AttemptTasks(g, None)
    job.placement = placement(g, 1)  # on one TaskManager, which has not registered: no link
    job.checkpoints.accept_triggers()
    job.finishing.attempt_started(time.monotonic())
    return job


def _drive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: Callable[[JobMaster], Awaitable[None]]
) -> None:
    monkeypatch.setattr(jobmaster, "TICK_S", 3600.0)

    async def main() -> None:
        job = _running_job(tmp_path)
        lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        drive = asyncio.ensure_future(job._drive(lost))
        try:
            await _settle()
            assert not drive.done()
            await steps(job)
        finally:
            drive.cancel()
            lost.cancel()
            await asyncio.gather(drive, return_exceptions=True)

    asyncio.run(main())


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _phase(job: JobMaster) -> Phase:
    return job.finishing.phase  # read through a call: each read may see a new phase


def _end_of_data(job: JobMaster, subtask: int) -> None:
    job._on_task_state(TaskReport(vertex=0, subtask=subtask, state=SubtaskState.END_OF_DATA, drain=True))


def test_the_final_checkpoint_is_triggered_when_the_last_subtask_reaches_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def steps(job: JobMaster) -> None:
        _end_of_data(job, 0)
        await _settle()
        assert _phase(job) is Phase.RUNNING, "triggered before every subtask had ended"
        assert not job.checkpoints.pending
        _end_of_data(job, 1)
        await _settle()
        assert _phase(job) is Phase.FINAL_CHECKPOINT_PENDING
        assert len(job.checkpoints.pending) == 1

    _drive(tmp_path, monkeypatch, steps)


def test_a_final_checkpoint_held_back_by_a_pending_one_is_triggered_when_that_one_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def steps(job: JobMaster) -> None:
        done = job._trigger(CheckpointKind.CHECKPOINT)
        (earlier,) = job.checkpoints.pending
        _end_of_data(job, 0)
        _end_of_data(job, 1)
        await _settle()
        assert _phase(job) is Phase.FINAL_CHECKPOINT_DUE, "one checkpoint at a time"
        acknowledge_all(job.checkpoints, earlier)
        await asyncio.wait_for(asyncio.shield(done), 30)
        await _settle()
        assert _phase(job) is Phase.FINAL_CHECKPOINT_PENDING
        (final,) = job.checkpoints.pending
        assert final > earlier

    _drive(tmp_path, monkeypatch, steps)


def test_a_failed_final_checkpoint_waits_for_the_tick_to_be_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def steps(job: JobMaster) -> None:
        _end_of_data(job, 0)
        _end_of_data(job, 1)
        await _settle()
        (pending,) = job.checkpoints.pending.values()
        job.checkpoints.fail(pending, "the store refused it")
        await _settle()
        assert _phase(job) is Phase.FINAL_CHECKPOINT_DUE
        assert not job.checkpoints.pending, "tried again at once: a store failing at once would spin"

    _drive(tmp_path, monkeypatch, steps)
