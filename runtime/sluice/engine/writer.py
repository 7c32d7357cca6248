"""The output side of a subtask: partitions records over the channels of each outgoing edge.

Records are appended to per-channel buffers synchronously while operators run; `flush` then sends the
sealed batches and waits where a channel is full (backpressure). A control event (watermark, barrier,
end of data) first seals the records buffered before it, so per-channel order is kept.
"""

from __future__ import annotations

from itertools import compress
from operator import not_
from typing import Any

from sluice.engine._task_metrics import WaitClock
from sluice.engine.channels import OutputChannel
from sluice.engine.events import Event, RecordBatch
from sluice.graph.transformations import Partitioning, PartitionKind
from sluice.state.keygroups import INT_HASH_FACTOR, MASK64, channel_table, stable_hash

BATCH_SIZE = 1024
"""Records in one batch on a channel, at most: a barrier or a watermark queued behind a batch waits for
all of it, however slow the subtask that takes it."""

KEY_CACHE_LIMIT = 1 << 16
"""Keys whose channel a writer remembers; past that many distinct keys it hashes every record."""

_CACHED_KEY_TYPES = frozenset((int, str))
"""Keys cached by value: equal ints, and equal strs, always hash alike (sluice.state.keygroups). Other
types go through `stable_hash` each time, whatever their own `__eq__` and `__hash__` say."""


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
        values, timestamps = self.values, self.timestamps
        if not values:
            return
        if len(values) <= BATCH_SIZE:
            self.outbox.append(RecordBatch(values, timestamps))
        else:
            for start in range(0, len(values), BATCH_SIZE):
                end = start + BATCH_SIZE
                self.outbox.append(
                    RecordBatch(values[start:end], None if timestamps is None else timestamps[start:end])
                )
        self.values, self.timestamps = [], None

    def event(self, event: Event) -> None:
        self.seal()
        self.outbox.append(event)


class RecordWriter:
    """Writes to the channels of one outgoing edge."""

    def __init__(
        self,
        partitioning: Partitioning,
        channels: list[OutputChannel],
        max_parallelism: int,
        key_cache_limit: int = KEY_CACHE_LIMIT,
    ) -> None:
        self.partitioning = partitioning
        self.buffers = [_ChannelBuffer(c) for c in channels]
        self._key = partitioning.key_selector
        self._table = channel_table(max_parallelism, len(channels))
        self._max_parallelism = max_parallelism
        self._round_robin = 0
        # Hashing a key costs more than the rest of partitioning its record; most jobs see the same keys
        # again and again, so a key's channel is remembered (hash partitioning only).
        self._channels_of: dict[Any, int] | None = {} if partitioning.kind is PartitionKind.HASH else None
        self._key_cache_limit = key_cache_limit

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
        key_of = self._key
        assert key_of is not None
        targets = self._targets([key_of(v) for v in values])
        if len(self.buffers) == 2:
            # The channel numbers are the masks: 1 picks the second channel's records, not 1 the first's.
            inverse = list(map(not_, targets))
            for buffer, mask in ((self.buffers[0], inverse), (self.buffers[1], targets)):
                chosen = list(compress(values, mask))
                if chosen:
                    buffer.add(chosen, None if timestamps is None else list(compress(timestamps, mask)))
            return
        for index, buffer in enumerate(self.buffers):
            mask = [t == index for t in targets]
            chosen = list(compress(values, mask))
            if chosen:
                buffer.add(chosen, None if timestamps is None else list(compress(timestamps, mask)))

    def _targets(self, keys: list[Any]) -> list[int]:
        """The channel of each key: from the cache of keys seen before where it can, else hashed."""
        cache = self._channels_of
        if cache is not None and set(map(type, keys)) <= _CACHED_KEY_TYPES:
            try:
                return list(map(cache.__getitem__, keys))
            except KeyError:
                pass
            missing = set(keys).difference(cache)
            if len(cache) + len(missing) <= self._key_cache_limit:
                for key in missing:
                    cache[key] = self._channel_of(key)
                return list(map(cache.__getitem__, keys))
            # More distinct keys than the cache holds: hashing each record again is cheaper than a cache
            # that keeps missing, and memory stays bounded.
            self._channels_of = None
        table, mp, hash_of, factor, mask64 = (
            self._table,
            self._max_parallelism,
            stable_hash,
            INT_HASH_FACTOR,
            MASK64,
        )
        # The int case of stable_hash inlined: most keys are ints and this loop runs once per record.
        return [table[((((k * factor) & mask64) >> 32) if type(k) is int else hash_of(k)) % mp] for k in keys]

    def _channel_of(self, key: Any) -> int:
        return self._table[stable_hash(key) % self._max_parallelism]

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
                await buffer.channel.send_many(outbox)

    async def close(self) -> None:
        for buffer in self.buffers:
            await buffer.channel.close()
