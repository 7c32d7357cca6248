"""Input queues sized from a subtask's rate (`sluice.engine._queue_sizing`), and the gate that applies it."""

from __future__ import annotations

import asyncio

from sluice.engine._queue_sizing import (
    MAX_CAPACITY,
    MIN_CAPACITY,
    TARGET_S,
    WINDOW_S,
    QueueSizer,
    capacity_for,
)
from sluice.engine.channels import DEFAULT_CAPACITY, InputChannel, InputGate
from sluice.engine.events import RecordBatch


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_gates_queues_together_hold_the_target_time_of_its_rate() -> None:
    # 160 events/s over 2 channels: 8 events in all take TARGET_S = 50 ms.
    assert capacity_for(4 / TARGET_S / 1, 1) == 4
    assert capacity_for(8 / TARGET_S, 2) == 4
    assert capacity_for(12 / TARGET_S, 3) == 4


def test_capacity_stays_within_its_bounds() -> None:
    assert capacity_for(0.0, 2) == MIN_CAPACITY, "a sender always has room for one more event"
    assert capacity_for(1e9, 2) == MAX_CAPACITY
    assert capacity_for(1e9, 0) == MAX_CAPACITY, "a gate whose channels all closed still has a size"


def test_the_sizer_answers_once_a_window_has_passed() -> None:
    clock = _Clock()
    sizer = QueueSizer(clock)
    answers = []
    for _ in range(10):
        clock.now += WINDOW_S / 20
        answers.append(sizer.consumed(1))
    assert answers[:-1] == [None] * 9
    assert answers[-1] is None  # half a window: still nothing
    for _ in range(11):  # to just past the window's end
        clock.now += WINDOW_S / 20
        answers.append(sizer.consumed(1))
    assert [a for a in answers if a is not None] == [capacity_for(20 / WINDOW_S, 1)]


def test_one_slow_window_does_not_shrink_the_queues_to_their_least() -> None:
    clock = _Clock()
    sizer = QueueSizer(clock)
    fast = 4 * MAX_CAPACITY / TARGET_S  # events/s that keep every queue at its largest
    answers: list[int] = []
    for _ in range(int(3 * fast * WINDOW_S)):
        clock.now += 1 / fast
        if (size := sizer.consumed(1)) is not None:
            answers.append(size)
    stalls = []
    for _ in range(8):
        clock.now += 5 * WINDOW_S  # a stall: one event in a long window
        stalls.append(sizer.consumed(1))
    assert answers and set(answers) == {MAX_CAPACITY}
    assert stalls[0] is not None and stalls[0] > MIN_CAPACITY, "smoothed: one stall is not the rate"
    assert stalls[-1] == MIN_CAPACITY, "a rate that stays low shrinks them to their least"


def test_a_slow_subtasks_gate_shrinks_its_queues_and_a_sender_waits_at_the_new_size() -> None:
    async def scenario() -> tuple[int, int, int]:
        clock = _Clock()
        channels = [InputChannel(0, 0), InputChannel(1, 0)]
        gate = InputGate(channels, QueueSizer(clock))
        for channel in channels:
            for i in range(DEFAULT_CAPACITY):
                channel.put_nowait(RecordBatch([i], None))
        # The subtask takes 10 events a second, far below what fills its queues' target time.
        for _ in range(2 * DEFAULT_CAPACITY - 1):
            clock.now += 0.1
            assert gate.poll() is not None
        shrunk = channels[0].capacity
        while gate.poll() is not None:
            pass
        sent = 0

        async def sender() -> None:
            nonlocal sent
            for i in range(DEFAULT_CAPACITY):
                await channels[0].put(RecordBatch([i], None))
                sent += 1

        task = asyncio.create_task(sender())
        await asyncio.sleep(0.05)
        waited_at = sent
        channels[0].resize(DEFAULT_CAPACITY)  # the subtask sped up: the waiting sender goes on
        await asyncio.wait_for(task, 5)
        return shrunk, waited_at, sent

    shrunk, waited_at, sent = asyncio.run(scenario())
    assert shrunk == MIN_CAPACITY
    assert waited_at == MIN_CAPACITY
    assert sent == DEFAULT_CAPACITY


def test_a_fast_subtasks_queues_keep_their_full_size() -> None:
    clock = _Clock()
    channels = [InputChannel(0, 0), InputChannel(1, 0)]
    gate = InputGate(channels, QueueSizer(clock))
    for _ in range(int(2 * WINDOW_S * 10_000)):
        for channel in channels:
            if not len(channel):
                channel.put_nowait(RecordBatch([0], None))
        clock.now += 1 / 10_000  # 10,000 events a second
        assert gate.poll() is not None
    assert [c.capacity for c in channels] == [MAX_CAPACITY, MAX_CAPACITY]
