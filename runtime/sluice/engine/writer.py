"""The output side of a subtask: partitions records over the channels of each outgoing edge.

Records are appended to per-channel buffers synchronously while operators run; `flush` then sends the
sealed batches and waits where a channel is full (backpressure). A control event (watermark, barrier,
end of data) first seals the records buffered before it, so per-channel order is kept.
"""

from __future__ import annotations

from itertools import compress
from typing import Any

from sluice.engine._task_metrics import WaitClock
from sluice.engine.channels import OutputChannel
from sluice.engine.events import Event, RecordBatch
from sluice.graph.transformations import Partitioning, PartitionKind
from sluice.state.keygroups import INT_HASH_FACTOR, MASK64, channel_table, stable_hash

BATCH_SIZE = 1024


class _ChannelBuffer:
    __slots__ = ("channel", "outbox", "timestamps", "values")

    def __init__(self, channel: OutputChannel) -> None:
        self.channel = channel
        self.values: list[Any] = []
        self.timestamps: list[int] | None = None
        self.outbox: list[Event] = []

    def add(self, values: list[Any], timestamps: list[int] | None) -> None:
        if timestamps is None:
            if self.values and self.timestamps is not None:
                self.seal()
            self.values.extend(values)
        else:
            if self.values and self.timestamps is None:
                self.seal()
            if self.timestamps is None:
                self.timestamps = []
            self.values.extend(values)
            self.timestamps.extend(timestamps)
        if len(self.values) >= BATCH_SIZE:
            self.seal()

    def seal(self) -> None:
        if self.values:
            self.outbox.append(RecordBatch(self.values, self.timestamps))
            self.values, self.timestamps = [], None

    def event(self, event: Event) -> None:
        self.seal()
        self.outbox.append(event)


class RecordWriter:
    """Writes to the channels of one outgoing edge."""

    def __init__(
        self, partitioning: Partitioning, channels: list[OutputChannel], max_parallelism: int
    ) -> None:
        self.partitioning = partitioning
        self.buffers = [_ChannelBuffer(c) for c in channels]
        self._key = partitioning.key_selector
        self._table = channel_table(max_parallelism, len(channels))
        self._max_parallelism = max_parallelism
        self._round_robin = 0

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        kind = self.partitioning.kind
        buffers = self.buffers
        if len(buffers) == 1 or kind is PartitionKind.FORWARD:
            buffers[0].add(values, timestamps)
        elif kind is PartitionKind.HASH:
            self._emit_hashed(values, timestamps)
        elif kind is PartitionKind.BROADCAST:
            for buffer in buffers:
                buffer.add(values, timestamps)
        else:
            # Rebalance a batch at a time: cheaper than per record and as even over time.
            buffers[self._round_robin].add(values, timestamps)
            self._round_robin = (self._round_robin + 1) % len(buffers)

    def _emit_hashed(self, values: list[Any], timestamps: list[int] | None) -> None:
        key_of, table, mp, hash_of = self._key, self._table, self._max_parallelism, stable_hash
        factor, mask64 = INT_HASH_FACTOR, MASK64
        assert key_of is not None
        keys = [key_of(v) for v in values]
        # The int case of stable_hash inlined: most keys are ints and this loop runs once per record.
        targets = [
            table[((((k * factor) & mask64) >> 32) if type(k) is int else hash_of(k)) % mp] for k in keys
        ]
        if len(self.buffers) == 2:
            mask = [t == 0 for t in targets]
            first = list(compress(values, mask))
            inverse = [not m for m in mask]
            second = list(compress(values, inverse))
            if timestamps is None:
                if first:
                    self.buffers[0].add(first, None)
                if second:
                    self.buffers[1].add(second, None)
            else:
                if first:
                    self.buffers[0].add(first, list(compress(timestamps, mask)))
                if second:
                    self.buffers[1].add(second, list(compress(timestamps, inverse)))
            return
        for index, buffer in enumerate(self.buffers):
            mask = [t == index for t in targets]
            chosen = list(compress(values, mask))
            if chosen:
                buffer.add(chosen, None if timestamps is None else list(compress(timestamps, mask)))

    def broadcast_event(self, event: Event) -> None:
        for buffer in self.buffers:
            buffer.event(event)

    def time_waits(self, clock: WaitClock) -> None:
        """Every wait for room in one of this edge's channels counts on `clock` (backpressure)."""
        for buffer in self.buffers:
            buffer.channel.clock = clock

    def has_full_batches(self) -> bool:
        return any(b.outbox for b in self.buffers)

    async def flush(self, partial: bool) -> None:
        for buffer in self.buffers:
            if partial:
                buffer.seal()
            if buffer.outbox:
                outbox, buffer.outbox = buffer.outbox, []
                for event in outbox:
                    await buffer.channel.send(event)

    async def close(self) -> None:
        for buffer in self.buffers:
            await buffer.channel.close()
