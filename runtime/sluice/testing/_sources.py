"""A source wrapper that fails the job on a chosen record, to test the failure and restart path."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sluice.connectors.base import Source, SplitReader

Split = TypeVar("Split")

_lock = threading.Lock()
# source id -> failures left; shared by the copies of one `FailingSource` in this process's TaskManagers.
_failures_left: dict[str, int] = {}


class InjectedFailure(RuntimeError):
    """The failure a `FailingSource` raises: the task fails, and the job restarts as for any other."""


class FailingSource(Source[Split], Generic[Split]):
    """Reads `source`; when a read brings a record for which `fail_on(record)` holds, fails instead.

    It fails `times` times in all (over every attempt of the job, counted in this process), then lets
    the record through: the job restarts from its latest checkpoint and, once the failures are used
    up, runs on. The records of the failing read are not emitted; the restart reads them again.
    """

    def __init__(self, source: Source[Split], fail_on: Callable[[Any], bool], times: int = 1) -> None:
        if times < 0:
            raise ValueError(f"FailingSource: times must not be negative, got {times}")
        self.source, self.fail_on = source, fail_on
        self.bounded = source.bounded
        self.source_id = uuid.uuid4().hex
        with _lock:
            _failures_left[self.source_id] = times

    def failures_left(self) -> int:
        with _lock:
            return _failures_left.get(self.source_id, 0)

    def splits(self) -> list[Split]:
        return self.source.splits()

    def open_split(self, split: Split) -> SplitReader[Split]:
        return _FailingReader(self.source.open_split(split), self.fail_on, self.source_id)

    def records_per_second(self) -> float | None:
        return self.source.records_per_second()


class _FailingReader(SplitReader[Split], Generic[Split]):
    def __init__(self, reader: SplitReader[Split], fail_on: Callable[[Any], bool], source_id: str) -> None:
        self.reader, self.fail_on, self.source_id = reader, fail_on, source_id

    def read(self, max_records: int) -> list[Any] | None:
        records = self.reader.read(max_records)
        if records:
            for record in records:
                if self.fail_on(record) and _take_failure(self.source_id):
                    raise InjectedFailure(f"FailingSource: injected failure at record {record!r}")
        return records

    def position(self) -> Split:
        return self.reader.position()

    def notify_checkpoint_complete(self, checkpoint_id: int, position: Split) -> None:
        self.reader.notify_checkpoint_complete(checkpoint_id, position)

    def close(self) -> None:
        self.reader.close()


def _take_failure(source_id: str) -> bool:
    with _lock:
        left = _failures_left.get(source_id, 0)
        if left <= 0:
            return False
        _failures_left[source_id] = left - 1
        return True
