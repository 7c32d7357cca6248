"""`LocalJob.wait_checkpoints` says what a job that stopped completing checkpoints is stuck on.

A checkpoint that never completes fails no sooner than its timeout (600 s by default), so a test that
waits for checkpoints times out first, and the log says only that the checkpoint failed as the test
cancelled the job. The timeout's message names the pending checkpoint and the subtasks it still waits
for: the place to look. The subtask here is held on cue: its sink's start blocks its TaskManager's thread
until the test lets it go, before the task takes any checkpoint.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import sluice
from sluice.connectors import GeneratorSource
from sluice.connectors.base import TransactionContext
from sluice.testing import CollectingSink, start_job

_released = threading.Event()


class HeldSink(CollectingSink):
    """A `CollectingSink` whose subtasks start only once the test releases them."""

    def recover(self, ctx: TransactionContext, committed: list[Any], restored_checkpoint: int) -> None:
        _released.wait()
        super().recover(ctx, committed, restored_checkpoint)


def _build(sink: CollectingSink) -> Any:
    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(GeneratorSource(lambda i: i), uid="numbers").sink_to(sink, uid="sink")

    return build


def test_a_checkpoint_wait_that_times_out_names_the_subtask_the_checkpoint_waits_for() -> None:
    _released.clear()
    with start_job(_build(HeldSink()), "--checkpoint-interval", "20ms") as job:
        master = job.background.job
        try:
            deadline = time.monotonic() + 60
            while not master.checkpoints.pending:
                assert time.monotonic() < deadline, "no checkpoint was triggered"
                time.sleep(0.01)
            with pytest.raises(TimeoutError) as timed_out:
                job.wait_checkpoints(1, timeout=0.2)
        finally:
            _released.set()
    message = str(timed_out.value)
    assert "not within 0.2s (0 completed; checkpoint 1 (triggered " in message, message
    assert message.endswith("s ago) waits for numbers -> sink[0])"), message
