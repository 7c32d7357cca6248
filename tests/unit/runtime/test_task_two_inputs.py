"""A task whose head has two inputs: each channel's records go to the input its edge feeds, and
`end_input(i)` comes once every channel of input i has ended, while the other input runs on."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from sluice.engine.channels import InputChannel, InputGate
from sluice.engine.context import Metrics
from sluice.engine.events import EndOfData, RecordBatch
from sluice.engine.task import StreamTask
from sluice.transport.messages import Message

from .test_task_finishing_inputs import _Chain


class _TwoInputHead:
    two_inputs = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def process_input(self, input_index: int, values: list[Any], timestamps: list[int] | None) -> None:
        self.calls.append((f"input {input_index}", values))

    def process_watermark(self, timestamp: int) -> None:
        pass

    def process_idle(self, idle: bool) -> None:
        pass

    def end_input(self, input_index: int) -> None:
        self.calls.append(("end", input_index))


def test_records_reach_their_input_and_an_input_ends_when_all_its_channels_did() -> None:
    async def scenario() -> None:
        # Edge 0 feeds input 0; edges 1 and 2 (a union) feed input 1; one channel per edge.
        channels = [InputChannel(i, i) for i in range(3)]
        chain = _Chain()
        chain.vertex = SimpleNamespace(
            name="co",
            id=2,
            inputs=[SimpleNamespace(side=0), SimpleNamespace(side=1), SimpleNamespace(side=1)],
        )
        head = _TwoInputHead()
        chain.head = head  # type: ignore[assignment]
        reports: list[Message] = []
        task = StreamTask(chain, 0, InputGate(channels), [0, 1, 2], reports.append, Metrics())  # type: ignore[arg-type]
        running = asyncio.create_task(task.run())
        await channels[0].put(RecordBatch(["a"], None))
        await channels[2].put(RecordBatch(["c"], None))
        await channels[1].put(EndOfData(drain=True))
        await channels[2].put(EndOfData(drain=True))
        await channels[0].put(RecordBatch(["after"], None))
        for _ in range(200):
            if ("input 0", ["after"]) in head.calls:
                break
            await asyncio.sleep(0.01)
        running.cancel()
        # Channels are polled in turn: only the order within one channel is fixed.
        calls = head.calls
        assert sorted(calls, key=repr) == sorted(
            [("input 0", ["a"]), ("input 1", ["c"]), ("end", 1), ("input 0", ["after"])], key=repr
        )
        assert calls.index(("input 1", ["c"])) < calls.index(("end", 1))
        assert calls.index(("input 0", ["a"])) < calls.index(("input 0", ["after"]))
        assert not task.end_of_data, "the task runs on while its first input goes on"

    asyncio.run(scenario())
