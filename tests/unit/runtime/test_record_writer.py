"""Hash partitioning: every record reaches the subtask that owns its key's key group, in order, with its
timestamp, whether the writer found the key's channel in its cache or hashed the key."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.engine.channels import OutputChannel
from sluice.engine.events import RecordBatch
from sluice.engine.writer import BATCH_SIZE, RecordWriter
from sluice.graph.transformations import Partitioning, PartitionKind
from sluice.state.keygroups import key_group_for, subtask_for_key_group

MAX_PARALLELISM = 128

keys = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=6),
    st.booleans(),
    st.floats(allow_nan=False),
    st.tuples(st.integers(min_value=0, max_value=9), st.text(max_size=2)),
)


def _writer(channels: int, key_cache_limit: int = 1 << 16) -> RecordWriter:
    partitioning = Partitioning(PartitionKind.HASH, key_selector=lambda record: record[0])
    return RecordWriter(
        partitioning, [OutputChannel() for _ in range(channels)], MAX_PARALLELISM, key_cache_limit
    )


def _received(writer: RecordWriter) -> list[list[tuple[Any, int | None]]]:
    """Per channel, the (record, timestamp) pairs of its sealed batches, in order."""
    per_channel = []
    for buffer in writer.buffers:
        buffer.seal()
        pairs: list[tuple[Any, int | None]] = []
        for batch in buffer.outbox:
            assert isinstance(batch, RecordBatch)
            stamps: list[int | None] = (
                list(batch.timestamps) if batch.timestamps is not None else [None] * len(batch.values)
            )
            pairs.extend(zip(batch.values, stamps, strict=True))
        per_channel.append(pairs)
    return per_channel


def _expected(batches: list[list[Any]], channels: int, timed: bool) -> list[list[tuple[Any, int | None]]]:
    per_channel: list[list[tuple[Any, int | None]]] = [[] for _ in range(channels)]
    position = 0
    for batch in batches:
        for key in batch:
            owner = subtask_for_key_group(key_group_for(key, MAX_PARALLELISM), MAX_PARALLELISM, channels)
            per_channel[owner].append(((key, position), position if timed else None))
            position += 1
    return per_channel


def _emit(writer: RecordWriter, batches: list[list[Any]], timed: bool) -> None:
    position = 0
    for batch in batches:
        records = [(key, position + i) for i, key in enumerate(batch)]
        stamps = [position + i for i in range(len(batch))] if timed else None
        position += len(batch)
        writer.emit(records, stamps)


@settings(max_examples=200)
@given(
    batches=st.lists(st.lists(keys, max_size=40), max_size=8),
    channels=st.integers(min_value=2, max_value=5),
    timed=st.booleans(),
)
def test_every_record_goes_to_the_owner_of_its_key_group_in_order(
    batches: list[list[Any]], channels: int, timed: bool
) -> None:
    writer = _writer(channels)
    _emit(writer, batches, timed)
    assert _received(writer) == _expected(batches, channels, timed)


def test_keys_equal_across_types_go_to_one_channel_whichever_came_first() -> None:
    # 1, True and 1.0 are one key (equal, and stable_hash agrees): a cached int must not send the bool
    # elsewhere, nor the other way round.
    for order in ([1, True, 1.0], [True, 1.0, 1], [1.0, 1, True]):
        writer = _writer(3)
        _emit(writer, [[key] for key in order] + [order], timed=False)
        assert sum(1 for records in _received(writer) if records) == 1


def test_more_distinct_keys_than_the_cache_holds_are_still_partitioned_by_their_hash() -> None:
    writer = _writer(2, key_cache_limit=16)
    batches = [list(range(start, start + 10)) for start in range(0, 200, 10)] + [[3, 150, "a", 7]]
    _emit(writer, batches, timed=True)
    assert _received(writer) == _expected(batches, 2, timed=True)


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3 * BATCH_SIZE), min_size=1, max_size=4),
    channels=st.integers(min_value=1, max_value=3),
    timed=st.booleans(),
)
def test_no_batch_on_a_channel_holds_more_than_batch_size_records(
    sizes: list[int], channels: int, timed: bool
) -> None:
    # A source reads several channel batches' worth at once (sluice.engine.task.SOURCE_BATCH).
    writer = _writer(channels)
    batches = [list(range(size)) for size in sizes]
    _emit(writer, batches, timed)
    assert _received(writer) == _expected(batches, channels, timed)
    sealed = [e for buffer in writer.buffers for e in buffer.outbox]
    assert all(isinstance(e, RecordBatch) and 0 < len(e.values) <= BATCH_SIZE for e in sealed)
    assert all(
        isinstance(e, RecordBatch) and (e.timestamps is None or len(e.timestamps) == len(e.values))
        for e in sealed
    )
