"""Retention while storage fails: the checkpoint that just completed stays completed, the failure is a
warning (not an error with a traceback), and the next completion discards what was left.

Found by tests/integration/runtime/test_storage_errors.py, which broke the job's directory while a
checkpoint was being finalized: listing the old checkpoints failed and "settling a checkpoint failed"
was logged with a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from sluice._states import CheckpointStatus
from sluice.checkpoint.storage import CheckpointStorage

from ._support import acknowledge_all, source_coordinator


def test_a_failed_retention_is_a_warning_and_the_next_completion_retries_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    listing = CheckpointStorage.completed_ids
    failing = [True]

    def unlistable(storage: CheckpointStorage) -> list[int]:
        if failing[0]:
            raise OSError(40, "Too many levels of symbolic links")
        return listing(storage)

    monkeypatch.setattr(CheckpointStorage, "completed_ids", unlistable)

    async def scenario() -> list[int]:
        coord = source_coordinator(tmp_path, [])
        for checkpoint in (1, 2):
            coord.trigger()
            acknowledge_all(coord, checkpoint)
            await coord.settle()
        assert [r.status for r in coord.history] == [CheckpointStatus.COMPLETED] * 2
        assert coord.latest is not None and coord.latest.checkpoint_id == 2
        failing[0] = False
        coord.trigger()
        acknowledge_all(coord, 3)
        await coord.settle()
        return listing(coord.storage)

    with caplog.at_level(logging.WARNING, logger="sluice.checkpoint.coordinator"):
        left = asyncio.run(scenario())
    assert left == [3]  # retained: 1; checkpoint 1, left by the failed retention, went with 3's
    failures = [r for r in caplog.records if "discarding checkpoints older than 2" in r.getMessage()]
    assert failures and failures[0].levelno == logging.WARNING and failures[0].exc_info is None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
