"""What a pending checkpoint is said to wait for (`CheckpointCoordinator.describe_pending`): the
subtasks that have not acknowledged it, then, once all have, the write of its `_metadata`."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from sluice.checkpoint.storage import write_state_file

from ._support import SOURCE_STATE, source_ack, source_coordinator


def test_a_pending_checkpoint_is_described_by_what_it_still_waits_for(tmp_path: Path) -> None:
    async def scenario() -> None:
        coord = source_coordinator(tmp_path, [])
        assert coord.describe_pending() == []
        coord.trigger()
        [both] = coord.describe_pending()
        described = r"checkpoint 1 \(triggered \d+\.\ds ago\) waits for src\[0\], src\[1\]"
        assert re.fullmatch(described, both), both

        location = coord.storage.checkpoint_location(1)
        write_state_file(location, "src-0.state", SOURCE_STATE)
        coord.on_ack(source_ack(1, 0))
        [one] = coord.describe_pending()
        assert one.endswith(" waits for src[1]"), one

        write_state_file(location, "src-1.state", SOURCE_STATE)
        coord.on_ack(source_ack(1, 1))
        [writing] = coord.describe_pending()  # every acknowledgement is in; the finalizer has not run
        assert writing.endswith(" waits for its _metadata to be written"), writing

        await coord.settle()
        assert coord.describe_pending() == []
        assert coord.counts["completed"] == 1

    asyncio.run(scenario())
