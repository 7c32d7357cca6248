"""The Kafka connector's pure parts: slots, transactional ids, formats, and a reader's offset bookkeeping.

The reader is driven by a stand-in consumer that hands out given records (what a broker does is covered
by tests/integration/connectors/); here only what the reader does with them is under test.
"""

from __future__ import annotations

import collections
import os
import pickle
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from sluice.connectors.kafka import KafkaRecord, KafkaSource, KafkaSplit
from sluice.connectors.kafka._common import (
    TRANSACTIONAL_ID_POOL,
    consumer_config,
    decode,
    default_transactional_id_prefix,
    encode,
    encode_key,
    free_slot,
    slot_of,
    transactional_id,
)
from sluice.connectors.kafka.source import _KafkaReader


def test_at_the_first_start_each_partition_of_a_topic_has_a_slot_of_its_own() -> None:
    for partitions in (1, 2, 5, 12):
        assert sorted(slot_of("orders", p, partitions) for p in range(partitions)) == list(range(partitions))


def test_partitions_added_later_spread_over_the_existing_slots() -> None:
    owners = collections.Counter(slot_of("orders", p, 4) for p in range(4, 40))
    assert sorted(owners) == [0, 1, 2, 3] and set(owners.values()) == {9}


def test_slots_do_not_depend_on_the_process() -> None:
    # Every subtask, in whatever process and under whatever PYTHONHASHSEED, must name the same owner.
    code = (
        "from sluice.connectors.kafka._common import slot_of\n"
        "print([slot_of(f't{i}', i, 7) for i in range(50)])"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert seen == {f"{[slot_of(f't{i}', i, 7) for i in range(50)]}\n"}


def test_transactional_ids_are_per_job_sink_and_subtask_and_a_fixed_pool() -> None:
    a = default_transactional_id_prefix("job-1", "sink")
    b = default_transactional_id_prefix("job-2", "sink")
    c = default_transactional_id_prefix("job-1", "other sink")
    assert len({a, b, c}) == 3
    assert " " not in c
    ids = {
        transactional_id(a, subtask, slot) for subtask in range(3) for slot in range(TRANSACTIONAL_ID_POOL)
    }
    assert len(ids) == 3 * TRANSACTIONAL_ID_POOL
    # A later attempt (or a restore) of subtask 1 names exactly the same ids: it can fence them.
    assert transactional_id(a, 1, 0) == transactional_id(a, 1, 0)


def test_free_slot_takes_the_lowest_and_refuses_when_all_are_waiting() -> None:
    assert free_slot(set()) == 0
    assert free_slot({0, 1, 3}) == 2
    with pytest.raises(RuntimeError, match="waiting for their checkpoint"):
        free_slot(set(range(TRANSACTIONAL_ID_POOL)))


def test_value_formats_round_trip() -> None:
    assert decode(encode({"a": [1, 2]}, "json"), "json") == {"a": [1, 2]}
    assert decode(encode("héllo", "str"), "str") == "héllo"
    assert decode(encode(b"\x00\x01", "bytes"), "bytes") == b"\x00\x01"
    assert encode(None, "json") is None and decode(None, "json") is None
    assert encode(5, "str") == b"5"
    with pytest.raises(TypeError):
        encode(5, "bytes")
    assert encode_key(3) == b"3" and encode_key("k") == b"k" and encode_key(None) is None


class _Message:
    def __init__(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self._tp, self._offset, self._value = (topic, partition), offset, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._tp[0]

    def partition(self) -> int:
        return self._tp[1]

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000 + self._offset)


class _Consumer:
    """Hands out `log[tp][offset:]` from the assigned offsets; position is what was handed out."""

    def __init__(self, log: dict[tuple[str, int], list[bytes]], skip_to: dict[tuple[str, int], int]) -> None:
        self.log, self.skip_to = log, skip_to
        self.at: dict[tuple[str, int], int] = {}
        self.paused: set[tuple[str, int]] = set()

    def assign(self, tps: list[TopicPartition]) -> None:
        self.at = {(tp.topic, tp.partition): tp.offset for tp in tps}

    def consume(self, n: int, timeout: float) -> list[Any]:
        out: list[Any] = []
        for tp, start in self.at.items():
            offset = start
            while offset < len(self.log[tp]) and len(out) < n and tp not in self.paused:
                out.append(_Message(*tp, offset, self.log[tp][offset]))
                offset += 1
            # A commit marker after the records: the position moves past it, no record comes out.
            self.at[tp] = max(offset, self.skip_to.get(tp, 0)) if offset >= len(self.log[tp]) else offset
        return out

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.at[(tp.topic, tp.partition)]) for tp in tps]

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused.update((tp.topic, tp.partition) for tp in tps)

    def close(self) -> None:
        pass


def _reader(split: KafkaSplit, consumer: _Consumer, **options: Any) -> _KafkaReader:
    source = KafkaSource("127.0.0.1:1", "t", value_format="str", **options)
    reader = _KafkaReader(source, split)
    reader._consumer = consumer  # type: ignore[assignment]
    consumer.assign([TopicPartition(t, p, o) for t, p, o in split.offsets])
    return reader


def _drain(reader: _KafkaReader, rounds: int = 20) -> list[Any]:
    out: list[Any] = []
    for _ in range(rounds):
        batch = reader.read(3)
        if batch is None:
            return out
        out.extend(batch)
    raise AssertionError(f"the reader did not end; read {out}")


def test_a_bounded_split_ends_at_its_end_offsets_even_behind_a_commit_marker() -> None:
    log = {("t", 0): [b"a", b"b", b"c", b"d"], ("t", 1): [b"x", b"y"]}
    split = KafkaSplit(0, 1, (("t", 0, 1), ("t", 1, 0)), (("t", 0, 3), ("t", 1, 3)))
    # Partition 1's end (3) is past its last record (offset 1): the marker at offset 2 ends it.
    reader = _reader(split, _Consumer(log, {("t", 1): 3}), bounded=True)
    assert sorted(_drain(reader)) == ["b", "c", "x", "y"]
    assert reader.position().offsets == (("t", 0, 3), ("t", 1, 2))


def test_position_is_the_next_offset_after_what_was_handed_out_and_survives_pickling() -> None:
    log = {("t", 0): [b"a", b"b", b"c", b"d", b"e"]}
    split = KafkaSplit(2, 5, (("t", 0, 0),))
    reader = _reader(split, _Consumer(log, {}), with_metadata=True, discovery_interval_ms=10**9)
    reader._next_discovery = float("inf")
    first = reader.read(2)
    assert first == [KafkaRecord("t", 0, 0, 1000, None, "a"), KafkaRecord("t", 0, 1, 1001, None, "b")]
    position = reader.position()
    assert position == KafkaSplit(2, 5, (("t", 0, 2),))
    assert pickle.loads(pickle.dumps(position)) == position
    restored = _reader(position, _Consumer(log, {}), discovery_interval_ms=10**9)
    restored._next_discovery = float("inf")
    assert restored.read(10) == ["c", "d", "e"]


def test_a_consumer_keeps_fetching_while_it_reads_a_backlog_unless_told_otherwise() -> None:
    # librdkafka's default pauses a partition's fetching for 1 s whenever its local queue is full.
    assert consumer_config("b:9092", "g", None)["fetch.queue.backoff.ms"] == 10
    assert (
        consumer_config("b:9092", "g", {"fetch.queue.backoff.ms": "500"})["fetch.queue.backoff.ms"] == "500"
    )


class _ErrorEvent:
    """What librdkafka puts among records for a broker or partition error."""

    def __init__(self, error: KafkaError) -> None:
        self._error = error

    def error(self) -> KafkaError:
        return self._error


class _Batches:
    """Hands out the given batches, one per consume call, as they are."""

    def __init__(self, batches: list[list[Any]]) -> None:
        self.batches = batches

    def consume(self, n: int, timeout: float) -> list[Any]:
        return self.batches.pop(0) if self.batches else []

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 0) for tp in tps]


def _batch_reader(split: KafkaSplit, batches: list[list[Any]], topics: list[str]) -> _KafkaReader:
    source = KafkaSource("127.0.0.1:1", topics, value_format="str", discovery_interval_ms=10**9)
    reader = _KafkaReader(source, split)
    reader._consumer = _Batches(batches)  # type: ignore[assignment]
    reader._next_discovery = float("inf")
    return reader


def test_a_batch_is_cut_at_each_partitions_end_wherever_the_end_falls_in_it() -> None:
    split = KafkaSplit(0, 1, (("t", 0, 0), ("t", 1, 0)), (("t", 0, 2), ("t", 1, 9)))
    batch = [_Message("t", 0, o, b"a%d" % o) for o in range(4)] + [_Message("t", 1, 0, b"b0")]
    reader = _batch_reader(split, [batch], ["t"])
    assert reader.read(10) == ["a0", "a1", "b0"]  # offsets 2 and 3 of partition 0 are past its end
    assert reader.next == {("t", 0): 2, ("t", 1): 1}


def test_a_retriable_error_event_in_a_batch_is_skipped_and_the_records_around_it_are_kept() -> None:
    split = KafkaSplit(0, 1, (("t", 0, 5),))
    error = _ErrorEvent(KafkaError(KafkaError._TRANSPORT, "broker went away", retriable=True))
    batch = [_Message("t", 0, 5, b"x"), error, _Message("t", 0, 6, b"y")]
    reader = _batch_reader(split, [batch], ["t"])
    assert reader.read(10) == ["x", "y"]
    assert reader.next == {("t", 0): 7}


def test_a_fatal_error_event_in_a_batch_fails_the_read() -> None:
    split = KafkaSplit(0, 1, (("t", 0, 0),))
    error = _ErrorEvent(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed"))
    reader = _batch_reader(split, [[_Message("t", 0, 0, b"x"), error]], ["t"])
    with pytest.raises(KafkaException, match="not allowed"):
        reader.read(10)


def test_positions_of_the_same_partition_number_in_two_topics_are_kept_apart() -> None:
    split = KafkaSplit(0, 1, (("a", 0, 0), ("b", 0, 10)))
    batch = [_Message("a", 0, 0, b"a0"), _Message("b", 0, 10, b"b10"), _Message("a", 0, 1, b"a1")]
    reader = _batch_reader(split, [batch], ["a", "b"])
    assert reader.read(10) == ["a0", "b10", "a1"]
    assert reader.next == {("a", 0): 2, ("b", 0): 11}


def test_a_split_of_one_partition_is_cut_at_its_end_and_resumes_after_its_last_record() -> None:
    split = KafkaSplit(0, 1, (("t", 0, 0),), (("t", 0, 3),))
    first = [_Message("t", 0, o, b"a%d" % o) for o in range(2)]
    second = [_Message("t", 0, o, b"a%d" % o) for o in range(2, 5)]
    reader = _batch_reader(split, [first, second], ["t"])
    assert reader.read(10) == ["a0", "a1"]
    assert reader.next == {("t", 0): 2}
    assert reader.read(10) == ["a2"]  # offsets 3 and 4 are past the end
    assert reader.next == {("t", 0): 3}
