"""The records a KafkaSink hands to the producer, as columns, and packed for a transaction's committable.

The exactly-once sink keeps a copy of every record of a transaction until the checkpoint that holds it
completes, and pickles that copy into the checkpoint. Kept as a tuple per record, that copy cost more
than the transaction itself in W5: every tuple was allocated, scanned by the young-generation garbage
collector, and memoized one by one when the checkpoint pickled it. A `PackedRecords` holds one
written batch in five objects instead: the keys and the values each joined into one bytes object with
their lengths beside them (-1 for None), and the timestamps in an array.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat

Record = tuple[bytes | None, bytes | None, int | None]
"""(key, value, timestamp in ms) as they go to Kafka."""

Column = list[bytes | None]


@dataclass(frozen=True)
class Encoded:
    """One written batch as Kafka gets it: a value per record, and keys and timestamps if there are any."""

    keys: Column | None
    values: Column
    stamps: list[int] | None

    def __len__(self) -> int:
        return len(self.values)

    def rows(self) -> Iterator[Record]:
        """(key, value, timestamp or 0) per record; zip hands out one tuple it reuses, not one each."""
        keys: Iterable[bytes | None] = self.keys if self.keys is not None else repeat(None)
        stamps: Iterable[int] = self.stamps if self.stamps is not None else repeat(0)
        return zip(keys, self.values, stamps, strict=False)  # `repeat` never ends

    def tail(self) -> Encoded:
        """Every record but the first."""
        return Encoded(
            self.keys[1:] if self.keys is not None else None,
            self.values[1:],
            self.stamps[1:] if self.stamps is not None else None,
        )

    def first(self) -> Record:
        return (
            self.keys[0] if self.keys is not None else None,
            self.values[0],
            self.stamps[0] if self.stamps is not None else None,
        )


@dataclass(frozen=True)
class PackedRecords:
    """A written batch of records, packed: see the module's docstring."""

    keys: bytes | None
    key_lengths: array[int] | None
    values: bytes
    value_lengths: array[int]
    stamps: array[int] | None

    def __len__(self) -> int:
        return len(self.value_lengths)


def pack(encoded: Encoded) -> PackedRecords:
    values, value_lengths = _joined(encoded.values)
    keys, key_lengths = _joined(encoded.keys) if encoded.keys is not None else (None, None)
    stamps = array("q", encoded.stamps) if encoded.stamps is not None else None
    return PackedRecords(keys, key_lengths, values, value_lengths, stamps)


def _joined(column: Column) -> tuple[bytes, array[int]]:
    try:
        # C loops both: the common case, a column without None.
        return b"".join(column), array("q", map(len, column))  # type: ignore[arg-type]
    except TypeError:
        lengths = array("q", (-1 if item is None else len(item) for item in column))
        return b"".join(item for item in column if item is not None), lengths


def unpack(chunks: Iterable[PackedRecords | Record]) -> list[Record]:
    """The records of `chunks` in order. A chunk may also be a single `Record`: checkpoints taken before
    records were packed hold them so, and a restore from one settles them the same way."""
    records: list[Record] = []
    for chunk in chunks:
        if isinstance(chunk, tuple):
            records.append(chunk)
            continue
        values = _split(chunk.values, chunk.value_lengths)
        keys = (
            _split(chunk.keys, chunk.key_lengths)
            if chunk.keys is not None and chunk.key_lengths is not None
            else repeat(None)
        )
        stamps = chunk.stamps if chunk.stamps is not None else repeat(None)
        for column in (chunk.key_lengths, chunk.stamps):
            if column is not None and len(column) != len(values):
                raise ValueError(
                    f"KafkaSink: packed records hold {len(values)} values, {len(column)} keys or timestamps"
                )
        records.extend(zip(keys, values, stamps, strict=False))  # `repeat` never ends
    return records


def _split(joined: bytes, lengths: array[int]) -> Column:
    column: Column = []
    at = 0
    for length in lengths:
        if length < 0:
            column.append(None)
        else:
            column.append(joined[at : at + length])
            at += length
    if at != len(joined):
        raise ValueError(f"KafkaSink: packed records hold {len(joined)} bytes, their lengths add up to {at}")
    return column
