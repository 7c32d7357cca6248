"""Channels between subtasks and the bounded buffers that give backpressure.

Every channel ends in an `InputChannel` of the receiving subtask: a queue of at most `capacity` events,
a capacity its `InputGate` sizes from the subtask's rate (`sluice.engine._queue_sizing`).
A sender that finds it full waits, so a slow consumer slows its producers instead of filling memory.
Local senders put into the queue directly; remote senders send against credit for its free places
(`on_room`, `sluice.engine.network`), so a remote channel holds no more than a local one.

How long a sender waits for room is its backpressured time (`sluice.engine._task_metrics`): an output
channel times its waits on the `clock` its subtask gives it; a send that finds room is not timed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from sluice._waiting import wait_event
from sluice.engine._queue_sizing import MAX_CAPACITY, QueueSizer
from sluice.engine._task_metrics import WaitClock
from sluice.engine.events import Event

DEFAULT_CAPACITY = MAX_CAPACITY


class InputChannel:
    __slots__ = ("_gate", "_queue", "_space", "capacity", "index", "input_index", "on_room", "peak")

    def __init__(self, index: int, input_index: int, capacity: int = DEFAULT_CAPACITY) -> None:
        self.index = index
        self.input_index = input_index
        self.capacity = capacity
        self._queue: deque[Event] = deque()
        self._space = asyncio.Event()
        self._space.set()
        self._gate: InputGate | None = None
        self.on_room: Callable[[], None] | None = None
        """Called when the queue may have room it had not (an event taken, a larger capacity): a remote
        channel grants its sender credit (`sluice.engine.network`)."""
        self.peak = 0
        """The most events queued since the gate last sampled its fill (`InputGate.fill`)."""

    async def put(self, event: Event) -> None:
        while len(self._queue) >= self.capacity:
            self._space.clear()
            await self._space.wait()
        self._queue.append(event)
        self.peak = max(self.peak, len(self._queue))
        if self._gate is not None:
            self._gate.notify()

    def put_nowait(self, event: Event) -> None:
        self._queue.append(event)
        self.peak = max(self.peak, len(self._queue))
        if self._gate is not None:
            self._gate.notify()

    def poll(self) -> Event | None:
        if not self._queue:
            return None
        event = self._queue.popleft()
        if len(self._queue) < self.capacity:
            self._space.set()
        if self.on_room is not None:
            self.on_room()
        return event

    def __len__(self) -> int:
        return len(self._queue)

    def is_full(self) -> bool:
        return len(self._queue) >= self.capacity

    def resize(self, capacity: int) -> None:
        """Hold at most `capacity` events from now on; a sender waiting for room it now has goes on."""
        self.capacity = capacity
        if len(self._queue) < capacity:
            self._space.set()
            if self.on_room is not None:
                self.on_room()


class InputGate:
    """All input channels of one subtask; hands out events round-robin from channels not blocked: one
    event per channel with events in turn, as Flink's input gate serves its channels with data."""

    def __init__(self, channels: list[InputChannel], sizer: QueueSizer | None = None) -> None:
        self.channels = channels
        self.blocked: set[int] = set()
        self.closed: set[int] = set()
        self._available = asyncio.Event()
        self._next = 0
        self._sizer = sizer if sizer is not None else QueueSizer()
        for channel in channels:
            channel._gate = self

    def notify(self) -> None:
        self._available.set()

    def poll(self) -> tuple[int, Event] | None:
        channels, count = self.channels, len(self.channels)
        for step in range(count):
            i = (self._next + step) % count
            if i in self.blocked:
                continue
            event = channels[i].poll()
            if event is not None:
                # The next poll starts at the next channel: a channel whose sender refills it as fast
                # as it is read would otherwise be served alone, starving the others. A two-input
                # operator then sees one input run ahead; its watermark (the minimum) waits for the
                # starved one, and an interval join buffers, scans and checkpoints the whole lead.
                self._next = i + 1 if i + 1 < count else 0
                capacity = self._sizer.consumed(count - len(self.closed))
                if capacity is not None:
                    for channel in channels:
                        channel.resize(capacity)
                return i, event
        return None

    async def wait(self, timeout: float | None) -> None:
        self._available.clear()
        if self.poll_ready():
            return
        await wait_event(self._available, timeout)

    def poll_ready(self) -> bool:
        return any(len(c) and i not in self.blocked for i, c in enumerate(self.channels))

    def fill(self) -> tuple[int, int]:
        """The most events queued in each channel still open since the previous call, and their
        capacity: how far upstream got ahead, for the heartbeat.

        The fullest, not the current count: a sample taken at one moment of a backpressured subtask
        whose queues hold a batch or two (rate-sized) mostly finds one place free, the one its task just
        took to work on, while its sender waits to fill it again.
        """
        queued = capacity = 0
        for i, channel in enumerate(self.channels):
            if i not in self.closed:
                queued += min(channel.peak, channel.capacity)
                capacity += channel.capacity
            channel.peak = len(channel)
        return queued, capacity


class OutputChannel:
    """Where one subtask sends events to one downstream subtask."""

    clock: WaitClock | None = None
    """Times the sender's waits for room (its backpressure), when the sending subtask measures them."""

    async def send(self, event: Event) -> None:
        raise NotImplementedError

    async def send_many(self, events: list[Event]) -> None:
        """Sends `events` in order: what a writer's flush found sealed for this channel."""
        for event in events:
            await self.send(event)

    async def close(self) -> None:
        pass


class LocalOutputChannel(OutputChannel):
    def __init__(self, target: InputChannel) -> None:
        self.target = target

    async def send(self, event: Event) -> None:
        target, clock = self.target, self.clock
        if clock is None or not target.is_full():
            await target.put(event)
            return
        clock.start()
        try:
            await target.put(event)
        finally:
            clock.stop()
