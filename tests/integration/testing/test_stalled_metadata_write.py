"""A `_metadata` write that outlasts the checkpoint timeout while the attempt ends.

The write may still land: the next attempt must not pick its restore point before it has, or it would
restore an older checkpoint while a newer one appears beside it (then restored by whoever looks next,
committing its transactions on top of the replayed ones). The stall is injected around the real write
(nothing else can hold a write on cue); everything else is the real job in one process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.checkpoint import coordinator as coordinator_module
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.state_key import StateKey
from sluice.checkpoint.storage import CheckpointStorage, write_metadata
from sluice.connectors import GeneratorSource
from sluice.testing import CollectingSink, FailingSource, run_job

N = 2_000
STALLED_TIMEOUTS = 2
"""How many checkpoint timeouts the stalled write outlasts: the job master warns once per timeout."""


class _NotSettled(logging.Handler):
    """Counts the job master's warnings that checkpoint storage has not settled yet."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        if "settle" in record.getMessage():
            with self.changed:
                self.count += 1
                self.changed.notify_all()

    def wait_for(self, count: int, timeout: float) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.count >= count, timeout)


def test_the_next_attempt_waits_for_a_stalled_metadata_write_and_restores_that_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = str(tmp_path / "stalled")
    warnings = _NotSettled()
    stalled: list[int] = []
    restored: list[str | None] = []

    def stalling_write(location: str, metadata: CheckpointMetadata, key: StateKey) -> None:
        if not stalled and metadata.checkpoint_id >= 2:
            stalled.append(metadata.checkpoint_id)
            Path(flag).touch()  # the source fails on its next record: the attempt ends meanwhile
            # Held past the checkpoint timeout, twice; without those warnings, until long after.
            warnings.wait_for(STALLED_TIMEOUTS, timeout=30)
        write_metadata(location, metadata, key)

    real_latest = CheckpointStorage.latest_completed

    def recorded_latest(self: CheckpointStorage) -> str | None:
        found = real_latest(self)
        restored.append(found)
        return found

    monkeypatch.setattr(coordinator_module, "write_metadata", stalling_write)
    monkeypatch.setattr(CheckpointStorage, "latest_completed", recorded_latest)
    logging.getLogger().addHandler(warnings)
    sink = CollectingSink()
    numbers = GeneratorSource(lambda i: i, splits=2, rate=4_000, count=N)
    failing = FailingSource(numbers, fail_on=lambda _: os.path.exists(flag), times=1)

    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(failing, uid="numbers").map(lambda n: n * n, uid="square").sink_to(sink, uid="sink")

    try:
        outcome: Any = run_job(
            build,
            "--parallelism",
            "2",
            "--checkpoint-interval",
            "50ms",
            "--checkpoint-timeout",
            "1s",
            "--restart-delay",
            "0s",
        )
    finally:
        logging.getLogger().removeHandler(warnings)

    assert outcome.state == "FINISHED", outcome
    assert failing.failures_left() == 0 and len(stalled) == 1
    # The first attempt starts empty; the second from the very checkpoint whose write was stalled.
    assert len(restored) == 2 and restored[0] is None
    assert restored[1] is not None and restored[1].endswith(f"/chk-{stalled[0]}"), (restored, stalled)
    assert warnings.count >= STALLED_TIMEOUTS
    counts = Counter(sink.records())
    assert sorted(counts) == [n * n for n in range(N)]
    assert set(counts.values()) == {1}, [value for value, times in counts.items() if times > 1][:10]
