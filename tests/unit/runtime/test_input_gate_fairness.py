"""The input gate serves its channels in turn, so no input runs ahead of another while both have data.

It used to stay on the channel it last read while that channel had events. A sender that refills its
channel as fast as the task reads it (W7's left source, say) was then served alone: the other input
starved, the two-input operator's watermark (the minimum of both) waited for it, and the interval
join buffered, scanned and checkpointed the whole lead (bench/README.md, W7).
"""

from __future__ import annotations

from sluice.engine.channels import InputChannel, InputGate
from sluice.engine.events import RecordBatch


def test_channels_that_always_have_events_are_served_in_turn() -> None:
    channels = [InputChannel(0, 0), InputChannel(1, 0), InputChannel(2, 1)]
    gate = InputGate(channels)
    served = []
    for n in range(12):
        for channel in channels:  # every sender keeps its channel topped up, as a fast source does
            while not channel.is_full():
                channel.put_nowait(RecordBatch([n], None))
        polled = gate.poll()
        assert polled is not None
        served.append(polled[0])
    assert served == [0, 1, 2] * 4


def test_a_blocked_or_empty_channel_is_passed_over_and_the_turn_goes_on() -> None:
    channels = [InputChannel(0, 0), InputChannel(1, 0), InputChannel(2, 1)]
    gate = InputGate(channels)
    for channel in (channels[0], channels[2]):
        for n in range(3):
            channel.put_nowait(RecordBatch([n], None))
    gate.blocked.add(2)  # aligning a barrier: nothing more from it until released
    assert [gate.poll()[0] for _ in range(3)] == [0, 0, 0]  # type: ignore[index]
    assert gate.poll() is None
    gate.blocked.clear()
    channels[0].put_nowait(RecordBatch(["late"], None))
    assert [gate.poll()[0] for _ in range(4)] == [2, 0, 2, 2]  # type: ignore[index]
