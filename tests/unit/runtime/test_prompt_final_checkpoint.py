"""The job master acts on a report as it arrives, not at its next tick: when the last subtask reaches end
of data the final checkpoint is triggered at once, and when that checkpoint settles the next step is
taken at once too. The periodic tick is pushed out to an hour here, so only the reports can move it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import cast

import pytest

from sluice._states import SubtaskState
from sluice.checkpoint.finishing import Phase
from sluice.coordinator import jobmaster
from sluice.coordinator._attempt_tasks import AttemptTasks
from sluice.coordinator.jobmaster import JobConfig, JobMaster
from sluice.engine.wiring import placement
from sluice.graph.transformations import PartitionKind
from sluice.hosts.base import TaskManagerHost
from sluice.transport.messages import TaskReport

from ._graphs import graph


def _running_job(tmp_path: Path) -> JobMaster:
    g = graph([(["src"], 2), (["sink"], 1)], [(0, 1, PartitionKind.HASH)])
    config = JobConfig(checkpoint_dir=tmp_path.as_uri(), job_id="j")
    job = JobMaster(g, config, cast(TaskManagerHost, None))
    job._tasks = AttemptTasks(g, None)
    job.placement = placement(g, 1)  # on one TaskManager, which has not registered: no link
    job.checkpoints.accept_triggers()
    job.finishing.attempt_started(time.monotonic())  # the periodic interval starts now
    return job


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _phase(job: JobMaster) -> Phase:
    return job.finishing.phase  # read through a call: each read may see a new phase


def _report(job: JobMaster, vertex: int, subtask: int, state: SubtaskState) -> None:
    job._on_task_state(TaskReport(vertex=vertex, subtask=subtask, state=state, drain=True))


def test_the_final_checkpoint_is_triggered_when_the_last_subtask_reaches_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobmaster, "TICK_S", 3600.0)
    asyncio.run(_ends_and_checkpoints(_running_job(tmp_path)))


async def _ends_and_checkpoints(job: JobMaster) -> None:
    lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    drive = asyncio.ensure_future(job._drive(lost))
    try:
        await _settle()
        assert not drive.done()
        _report(job, 0, 0, SubtaskState.END_OF_DATA)
        _report(job, 0, 1, SubtaskState.END_OF_DATA)
        await _settle()
        assert _phase(job) is Phase.RUNNING, "triggered before every subtask had ended"
        assert not job.checkpoints.pending

        _report(job, 1, 0, SubtaskState.END_OF_DATA)
        await _settle()
        assert _phase(job) is Phase.FINAL_CHECKPOINT_PENDING
        (pending,) = job.checkpoints.pending.values()

        # The checkpoint settles (here it fails, which needs no acknowledgements): the rules are read
        # again at once and the final checkpoint is triggered again, not an hour later.
        job.checkpoints.fail(pending, "a test fails it")
        await _settle()
        assert pending.checkpoint_id not in job.checkpoints.pending
        assert _phase(job) is Phase.FINAL_CHECKPOINT_PENDING
        (retried,) = job.checkpoints.pending.values()
        assert retried.checkpoint_id > pending.checkpoint_id
    finally:
        drive.cancel()
        lost.cancel()
        await asyncio.gather(drive, return_exceptions=True)
