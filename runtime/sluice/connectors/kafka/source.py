"""KafkaSource: topics' partitions dealt into splits whose offsets are checkpointed by Sluice.

A split is a *slot*: slot k of n owns the partitions p of topic t with `slot_of(t, p, n) == k` and keeps
the next offset to read of each (one consumer reads all of a slot's partitions). At the first start there
is one slot per partition (n = the number of partitions then, unless `splits` says otherwise), so
"partitions are splits"; a partition created while the job runs belongs to the
slot the same rule names, and that slot's reader picks it up from its earliest offset. Slots are list
state: a restore at another parallelism deals them anew.

The broker's committed offsets of `group_id` are only for watching lag: when a checkpoint completes,
each slot commits the offsets that checkpoint holds. A restore never reads them; it takes the offsets
from Sluice's checkpoint.

A subtask reads all of its slots side by side (an unbounded slot never ends). For event time, give
`env.from_source` a `WatermarkStrategy`: each slot then keeps its own watermark (with one slot per
partition, the watermarks are per partition) and a slot without records for the idleness timeout stops
holding event time back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, cast

from sluice.connectors.base import Source, SplitReader
from sluice.connectors.kafka import _json as json_values
from sluice.connectors.kafka._common import (
    KafkaRecord,
    check_format,
    consumer_config,
    decode,
    slot_of,
)

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message

StartingOffsets = Literal["earliest", "latest", "committed"]
#: How long a split's reader waits for the broker when it asks for offsets or metadata.
_REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class KafkaSplit:
    slot: int
    slots: int
    offsets: tuple[tuple[str, int, int], ...]
    """(topic, partition, next offset to read) of every partition this slot owns and knows of."""
    ends: tuple[tuple[str, int, int], ...] | None = None
    """Bounded: (topic, partition, offset to stop before), fixed when the job first started."""


class KafkaSource(Source[KafkaSplit]):
    """Records of Kafka topics: decoded values, or `KafkaRecord`s with `with_metadata=True`.

    Transactions: only committed records are read (`isolation.level=read_committed`, which
    `properties` may override). See docs/connectors/kafka.md.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topics: list[str] | str,
        *,
        group_id: str | None = None,
        starting_offsets: StartingOffsets = "earliest",
        bounded: bool = False,
        value_format: Literal["bytes", "str", "json"] = "bytes",
        properties: dict[str, str] | None = None,
        with_metadata: bool = False,
        discovery_interval_ms: int = 10_000,
        splits: int | None = None,
    ) -> None:
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        if not self.topics:
            raise ValueError("KafkaSource: name at least one topic")
        if starting_offsets not in ("earliest", "latest", "committed"):
            raise ValueError(f"KafkaSource: unknown starting_offsets {starting_offsets!r}")
        if starting_offsets == "committed" and group_id is None:
            raise ValueError("KafkaSource: starting_offsets='committed' needs a group_id")
        check_format(value_format, "KafkaSource")
        self.bootstrap_servers, self.group_id = bootstrap_servers, group_id
        self.starting_offsets, self.bounded = starting_offsets, bounded
        self.value_format, self.with_metadata = value_format, with_metadata
        self.properties = dict(properties or {})
        self.discovery_interval_ms = discovery_interval_ms
        if splits is not None and splits < 1:
            raise ValueError(f"KafkaSource: splits must be at least 1, got {splits}")
        self.num_splits = splits

    def consumer(self) -> Consumer:
        from confluent_kafka import Consumer

        group = self.group_id or f"sluice-source-{uuid.uuid4().hex[:12]}"
        return Consumer(consumer_config(self.bootstrap_servers, group, self.properties))

    def partitions(self, consumer: Consumer) -> list[tuple[str, int]]:
        metadata = consumer.list_topics(timeout=_REQUEST_TIMEOUT_S)
        found: list[tuple[str, int]] = []
        for topic in self.topics:
            entry = metadata.topics.get(topic)
            if entry is None or entry.error is not None:
                raise RuntimeError(f"KafkaSource: topic {topic!r} is not readable: {entry and entry.error}")
            found.extend((topic, p) for p in sorted(entry.partitions))
        return found

    def splits(self) -> list[KafkaSplit]:
        from confluent_kafka import TopicPartition

        consumer = self.consumer()
        try:
            parts = self.partitions(consumer)
            marks = {
                tp: consumer.get_watermark_offsets(TopicPartition(*tp), _REQUEST_TIMEOUT_S, False)
                for tp in parts
            }
            committed: dict[tuple[str, int], int] = {}
            if self.starting_offsets == "committed":
                tps = consumer.committed([TopicPartition(*tp) for tp in parts], _REQUEST_TIMEOUT_S)
                committed = {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}
        finally:
            consumer.close()
        starts = {
            tp: high if self.starting_offsets == "latest" else committed.get(tp, low)
            for tp, (low, high) in marks.items()
        }
        slots = self.num_splits or max(1, len(parts))
        return [
            KafkaSplit(
                slot,
                slots,
                tuple((t, p, starts[(t, p)]) for t, p in parts if slot_of(t, p, slots) == slot),
                # The end is the last stable offset seen now: records after it are not part of the job.
                tuple((t, p, marks[(t, p)][1]) for t, p in parts if slot_of(t, p, slots) == slot)
                if self.bounded
                else None,
            )
            for slot in range(slots)
        ]

    def open_split(self, split: KafkaSplit) -> SplitReader[KafkaSplit]:
        return _KafkaReader(self, split)


class _KafkaReader(SplitReader[KafkaSplit]):
    def __init__(self, source: KafkaSource, split: KafkaSplit) -> None:
        self.source, self.split = source, split
        self.next: dict[tuple[str, int], int] = {(t, p): o for t, p, o in split.offsets}
        self.ends = {(t, p): e for t, p, e in split.ends} if split.ends is not None else None
        self.done: set[tuple[str, int]] = set()
        self._consumer: Consumer | None = None
        self._next_discovery = 0.0

    def _open(self) -> Consumer:
        from confluent_kafka import TopicPartition

        if self._consumer is None:
            self._consumer = self.source.consumer()
            self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in self.next.items()])
        return self._consumer

    def _discover(self, consumer: Consumer) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self._next_discovery = time.monotonic() + self.source.discovery_interval_ms / 1000
        new = [
            tp
            for tp in self.source.partitions(consumer)
            if tp not in self.next and slot_of(*tp, self.split.slots) == self.split.slot
        ]
        if new:
            consumer.incremental_assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in new])
            for tp in new:
                # Not a position yet: the first record read (or a snapshot) turns it into one.
                self.next[tp] = -1

    def read(self, max_records: int) -> list[Any] | None:
        consumer = self._open()
        if self.ends is None and time.monotonic() >= self._next_discovery:
            self._discover(consumer)
        if self.ends is not None and self._bounded_done(consumer):
            return None
        messages = consumer.consume(max_records, 0)
        if not self._take_whole(messages):
            messages = self._take_checked(messages)
        return self._values(messages)

    def _take_whole(self, messages: list[Message]) -> bool:
        """The common batch, checked per partition instead of per record: if it holds no error event and
        no record at or past its partition's end, records the next offsets and says so.

        A batch holds each partition's records in offset order, so its last record of a partition is
        the one to check against the end and to take the next offset from.
        """
        last = self._last_per_partition(messages)
        if last is None:
            return False
        ends, next_offsets = self.ends, {}
        for message in last:
            # Only error events lack these; records always have them.
            tp = (cast(str, message.topic()), cast(int, message.partition()))
            offset = cast(int, message.offset())
            if ends is not None and offset >= ends[tp]:
                return False
            next_offsets[tp] = offset + 1
        self.next.update(next_offsets)
        return True

    def _last_per_partition(self, messages: list[Message]) -> Iterable[Message] | None:
        """Each partition's last record in the batch; None if the batch holds an error event."""
        if len(self.next) == 1:
            # One partition assigned (partitions are splits): every record is its, the last one counts.
            # A scan for error events alone costs 70 ns a record against 175 with the bookkeeping below.
            for message in messages:
                if message.error() is not None:
                    return None
            return messages[-1:]
        last: dict[Any, Message] = {}
        if len(self.source.topics) == 1:
            for message in messages:
                if message.error() is not None:
                    return None
                last[message.partition()] = message
        else:
            for message in messages:
                if message.error() is not None:
                    return None
                last[(message.topic(), message.partition())] = message
        return last.values()

    def _take_checked(self, messages: list[Message]) -> list[Message]:
        """Record by record: skips what is past a partition's end, raises on a fatal error event."""
        from confluent_kafka import KafkaError, KafkaException

        taken: list[Message] = []
        ends, next_offsets = self.ends, self.next
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF or error.retriable():
                    continue
                raise KafkaException(error)
            tp = (cast(str, message.topic()), cast(int, message.partition()))
            offset = cast(int, message.offset())
            if ends is not None and offset >= ends[tp]:
                continue
            next_offsets[tp] = offset + 1
            taken.append(message)
        return taken

    def _values(self, messages: list[Message]) -> list[Any]:
        # Decoded a batch at a time: JSON is most of a Kafka job's cost (see _json.py).
        fmt = self.source.value_format
        raw = [m.value() for m in messages]
        values = json_values.decode_all(raw) if fmt == "json" else [decode(v, fmt) for v in raw]
        if not self.source.with_metadata:
            return values
        records = []
        for message, value in zip(messages, values, strict=True):
            kind, stamp = message.timestamp()
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            records.append(
                KafkaRecord(
                    cast(str, topic), cast(int, partition), cast(int, offset), stamp if kind else None,
                    message.key(), value,
                )
            )  # fmt: skip
        return records

    def _bounded_done(self, consumer: Consumer) -> bool:
        from confluent_kafka import TopicPartition

        assert self.ends is not None
        open_parts = [tp for tp in self.ends if tp not in self.done]
        if not open_parts:
            return True
        # The consumer's position passes commit/abort markers, which are never handed out as records.
        positions = consumer.position([TopicPartition(t, p) for t, p in open_parts])
        for tp in positions:
            key = (tp.topic, tp.partition)
            if max(self.next.get(key, 0), tp.offset) >= self.ends[key]:
                self.done.add(key)
                consumer.pause([TopicPartition(*key)])
        return len(self.done) == len(self.ends)

    def position(self) -> KafkaSplit:
        offsets = self._resolved()
        return replace(self.split, offsets=tuple((t, p, o) for (t, p), o in sorted(offsets.items())))

    def _resolved(self) -> dict[tuple[str, int], int]:
        """Next offsets; a discovered partition not read from yet is pinned to its position, or to its
        earliest offset, so a restore does not take a later 'earliest' (after retention) for it."""
        from confluent_kafka import TopicPartition

        unresolved = [tp for tp, o in self.next.items() if o < 0]
        if unresolved and self._consumer is not None:
            for tp in self._consumer.position([TopicPartition(t, p) for t, p in unresolved]):
                if tp.offset >= 0:
                    self.next[(tp.topic, tp.partition)] = tp.offset
            for t, p in unresolved:
                if self.next[(t, p)] < 0:
                    low, _ = self._consumer.get_watermark_offsets(TopicPartition(t, p), _REQUEST_TIMEOUT_S)
                    self.next[(t, p)] = low
        return dict(self.next)

    def notify_checkpoint_complete(self, checkpoint_id: int, position: KafkaSplit) -> None:
        """For lag monitoring only: the group's committed offsets become those of the completed
        checkpoint. Asynchronous, and a failure is only logged by the client: nothing depends on it."""
        from confluent_kafka import TopicPartition

        if self.source.group_id is None or self._consumer is None:
            return
        tps = [TopicPartition(t, p, o) for t, p, o in position.offsets if o >= 0]
        if tps:
            self._consumer.commit(offsets=tps, asynchronous=True)

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()
