"""A bounded, deterministic source of consecutive integers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice.connectors.base import Source, SplitReader


@dataclass(frozen=True)
class SequenceSplit:
    split_id: int
    next: int
    end: int


class SequenceSource(Source[SequenceSplit]):
    """Emits `start, start+1, …, end-1`; split k covers one contiguous range and finishes on its own."""

    bounded = True

    def __init__(self, start: int, end: int, splits: int = 1) -> None:
        if end < start:
            raise ValueError(f"SequenceSource: end ({end}) must not be below start ({start})")
        if splits < 1:
            raise ValueError(f"SequenceSource: splits must be at least 1, got {splits}")
        self.start, self.end, self.num_splits = start, end, splits

    def splits(self) -> list[SequenceSplit]:
        total = self.end - self.start
        bounds = [self.start + total * k // self.num_splits for k in range(self.num_splits + 1)]
        return [SequenceSplit(k, bounds[k], bounds[k + 1]) for k in range(self.num_splits)]

    def open_split(self, split: SequenceSplit) -> SplitReader[SequenceSplit]:
        return _SequenceReader(split)


class _SequenceReader(SplitReader[SequenceSplit]):
    def __init__(self, split: SequenceSplit) -> None:
        self.split_id, self.next, self.end = split.split_id, split.next, split.end

    def read(self, max_records: int) -> list[Any] | None:
        if self.next >= self.end:
            return None
        upto = min(self.next + max_records, self.end)
        batch = list(range(self.next, upto))
        self.next = upto
        return batch

    def position(self) -> SequenceSplit:
        return SequenceSplit(self.split_id, self.next, self.end)
