"""A source that emits `fn(i)` for i = 0, 1, 2, …, bounded by `count` or not, optionally rate-limited."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice.connectors.base import Source, SplitReader


@dataclass(frozen=True)
class GeneratorSplit:
    split_id: int
    next: int
    """The next `i` this split emits; the split covers every `i` with `i % splits == split_id`."""


class GeneratorSource(Source[GeneratorSplit]):
    def __init__(
        self,
        fn: Callable[[int], Any],
        splits: int = 1,
        rate: float | None = None,
        count: int | None = None,
    ) -> None:
        if splits < 1:
            raise ValueError(f"GeneratorSource: splits must be at least 1, got {splits}")
        if rate is not None and rate <= 0:
            raise ValueError(f"GeneratorSource: rate must be positive records per second, got {rate}")
        if count is not None and count < 0:
            raise ValueError(f"GeneratorSource: count must not be negative, got {count}")
        self.fn, self.num_splits, self.rate, self.count = fn, splits, rate, count
        self.bounded = count is not None

    def splits(self) -> list[GeneratorSplit]:
        return [GeneratorSplit(s, s) for s in range(self.num_splits)]

    def open_split(self, split: GeneratorSplit) -> SplitReader[GeneratorSplit]:
        return _GeneratorReader(self, split)

    def records_per_second(self) -> float | None:
        return self.rate


class _GeneratorReader(SplitReader[GeneratorSplit]):
    def __init__(self, source: GeneratorSource, split: GeneratorSplit) -> None:
        self.fn, self.step, self.count = source.fn, source.num_splits, source.count
        self.split_id, self.next = split.split_id, split.next

    def read(self, max_records: int) -> list[Any] | None:
        stop = self.next + max_records * self.step
        if self.count is not None:
            if self.next >= self.count:
                return None
            stop = min(stop, self.count)
        fn = self.fn
        batch = [fn(i) for i in range(self.next, stop, self.step)]
        self.next += len(batch) * self.step
        return batch

    def position(self) -> GeneratorSplit:
        return GeneratorSplit(self.split_id, self.next)
