"""When the checkpoint coordinator accepts a trigger: only while an attempt's tasks are deployed.

Found by the chaos harness (seed 1, run 142): a savepoint requested through REST while an attempt was
ending (its storage probe slowed by injected S3 errors) was triggered after `abort_all`, into
TaskManagers that were going away. Nobody acknowledged it, it stayed pending, and the next attempt
triggered no checkpoint behind it, not even the bounded job's final one: the job hung.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sluice._states import CheckpointKind
from sluice.checkpoint.coordinator import CheckpointDeclined
from sluice.transport.messages import ToTaskManager, Trigger

from ._support import source_coordinator


def test_no_trigger_between_the_end_of_an_attempt_and_the_deployment_of_the_next(tmp_path: Path) -> None:
    async def scenario() -> None:
        sent: list[ToTaskManager] = []
        coord = source_coordinator(tmp_path, sent)
        coord.trigger()
        coord.abort_all("the job attempt ended")
        sent.clear()

        with pytest.raises(CheckpointDeclined, match="the job attempt ended"):
            coord.trigger(CheckpointKind.SAVEPOINT, str(tmp_path / "sp"))
        assert sent == []  # nothing went to the TaskManagers that are going away
        assert coord.pending == {}  # nothing left to hold back the next attempt's checkpoints
        assert coord.history[-1].status == "FAILED"
        assert "the job attempt ended" in (coord.history[-1].error or "")

        coord.accept_triggers()
        pending = coord.trigger()
        assert [type(m) for m in sent] == [Trigger]
        assert list(coord.pending) == [pending.checkpoint_id]
        await coord.settle()

    asyncio.run(scenario())


def test_a_new_coordinator_accepts_triggers(tmp_path: Path) -> None:
    async def scenario() -> None:
        sent: list[ToTaskManager] = []
        coord = source_coordinator(tmp_path, sent)
        coord.trigger()
        assert [type(m) for m in sent] == [Trigger]

    asyncio.run(scenario())


def test_checkpoint_ids_continue_after_the_restored_one_and_never_go_back(tmp_path: Path) -> None:
    async def scenario() -> None:
        coord = source_coordinator(tmp_path, [])
        assert coord.trigger().checkpoint_id == 1
        coord.continue_after(41)  # an attempt restores checkpoint 41
        assert coord.trigger().checkpoint_id == 42
        coord.continue_after(7)  # an older one (a savepoint the job started from): no id is used twice
        assert coord.trigger().checkpoint_id == 43
        coord.abort_all("the test ended")
        await coord.settle()

    asyncio.run(scenario())
