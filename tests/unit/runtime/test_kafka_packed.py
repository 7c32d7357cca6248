"""The exactly-once KafkaSink's copy of a transaction's records: packed per batch, read back in order."""

from __future__ import annotations

import pickle

import pytest

from sluice.connectors.kafka._packed import Encoded, PackedRecords, Record, pack, unpack


def test_a_batch_with_keys_and_timestamps_comes_back_record_by_record_in_order() -> None:
    encoded = Encoded([b"k1", b"", b"k3"], [b"one", b"two", b""], [10, 20, 30])
    assert unpack([pack(encoded)]) == [(b"k1", b"one", 10), (b"", b"two", 20), (b"k3", b"", 30)]


def test_tombstones_and_records_without_a_key_keep_their_none_apart_from_empty_bytes() -> None:
    encoded = Encoded([None, b"k", b""], [b"v", None, b""], None)
    packed = pack(encoded)
    assert list(packed.value_lengths) == [1, -1, 0]
    assert unpack([packed]) == [(None, b"v", None), (b"k", None, None), (b"", b"", None)]


def test_a_batch_without_keys_packs_no_key_column() -> None:
    packed = pack(Encoded(None, [b"a", b"bc"], None))
    assert packed.keys is None and packed.key_lengths is None and packed.stamps is None
    assert unpack([packed]) == [(None, b"a", None), (None, b"bc", None)]


def test_batches_and_records_of_earlier_checkpoints_are_read_in_the_order_given() -> None:
    """Checkpoints taken before the records were packed hold one tuple per record."""
    chunks: list[PackedRecords | Record] = [
        pack(Encoded(None, [b"1", b"2"], [1, 2])),
        (b"k", b"3", 3),
        pack(Encoded([b"x"], [b"4"], None)),
    ]
    assert unpack(chunks) == [(None, b"1", 1), (None, b"2", 2), (b"k", b"3", 3), (b"x", b"4", None)]


def test_a_packed_batch_survives_pickling_as_a_checkpoint_stores_it() -> None:
    packed = pack(Encoded([b"k", None], [b"v" * 1000, b"w"], [5, 6]))
    restored = pickle.loads(pickle.dumps(packed, protocol=5))
    assert unpack([restored]) == [(b"k", b"v" * 1000, 5), (None, b"w", 6)]


def test_rows_hand_the_producer_zero_for_a_missing_timestamp_and_none_for_a_missing_key() -> None:
    encoded = Encoded(None, [b"a", b"b"], None)
    assert list(encoded.rows()) == [(None, b"a", 0), (None, b"b", 0)]
    assert encoded.first() == (None, b"a", None)
    assert list(encoded.tail().rows()) == [(None, b"b", 0)]


@pytest.mark.parametrize(
    "damaged",
    [
        # lengths that add up to more or fewer bytes than are there
        lambda p: PackedRecords(p.keys, p.key_lengths, p.values + b"x", p.value_lengths, p.stamps),
        lambda p: PackedRecords(p.keys[:-1], p.key_lengths, p.values, p.value_lengths, p.stamps),
        # a timestamp column of another length than the values
        lambda p: PackedRecords(p.keys, p.key_lengths, p.values, p.value_lengths, p.stamps[:1]),
    ],
)
def test_packed_records_whose_columns_disagree_are_refused_not_read_as_other_records(damaged: object) -> None:
    packed = pack(Encoded([b"ka", b"kb"], [b"va", b"vb"], [1, 2]))
    with pytest.raises(ValueError, match="packed records hold"):
        unpack([damaged(packed)])  # type: ignore[operator]
