"""A TaskManager that cannot read the state it restores because the store fails ends the job as the
coordinator does when it cannot read a checkpoint: restarts retry it, then the job is SUSPENDED (exit 3)
with no job result stored, and the same job id resumes once the store answers again. A damaged state
file, and an error of the code that restores, stay ordinary failures.

The store is an in-memory file system whose reads of state files fail while `FlakyStore.failing` is
set: a read error after a listing that works is what an object store answering 500s gives, and a local
file system cannot be made to do it."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import sluice
from sluice.connectors import SequenceSource
from sluice.connectors.base import SplitReader
from sluice.connectors.sequence import SequenceSplit
from sluice.testing import CollectingSink, run_job, start_job

N = 10_000


class FlakyStore(MemoryFileSystem):  # type: ignore[misc]
    protocol = "flakystore"
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]
    failing = threading.Event()

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        # `_metadata` stays readable: the coordinator reads it, and can; the TaskManagers cannot.
        if "r" in mode and self.failing.is_set() and path.endswith(".state"):
            raise OSError(errno.EIO, f"injected read error on {path}")
        return super()._open(path, mode, **kwargs)


@pytest.fixture
def store() -> Iterator[str]:
    fsspec.register_implementation(FlakyStore.protocol, FlakyStore, clobber=True)
    FlakyStore.store.clear()
    FlakyStore.failing.clear()
    yield f"{FlakyStore.protocol}://checkpoints"
    FlakyStore.failing.clear()
    FlakyStore.store.clear()


HELD = threading.Event()
"""While set, each split of the source stops short of its last record (it reads nothing for now): the
first job cannot reach its end before the test cancels it, however slowly its checkpoints come. Its
checkpoints go on meanwhile, since the source still takes barriers."""


class _HeldSequence(SequenceSource):
    def open_split(self, split: SequenceSplit) -> SplitReader[SequenceSplit]:
        return _HeldReader(super().open_split(split))


class _HeldReader(SplitReader[SequenceSplit]):
    def __init__(self, reader: SplitReader[SequenceSplit]) -> None:
        self.reader = reader

    def read(self, max_records: int) -> list[Any] | None:
        position = self.reader.position()
        if HELD.is_set() and position.end - position.next <= max_records:
            return []  # the split's last batch waits
        return self.reader.read(max_records)

    def position(self) -> SequenceSplit:
        return self.reader.position()


def _slow(i: int) -> int:
    time.sleep(0.0005)
    return i


def _pipeline(sink: CollectingSink) -> Any:
    def build(env: sluice.StreamEnvironment) -> None:
        (
            env.from_source(_HeldSequence(0, N, splits=2), uid="numbers")
            .map(_slow, uid="slow")
            .key_by(lambda i: i % 10)
            .reduce(lambda a, b: b, uid="latest")  # keyed state too
            .sink_to(sink, uid="sink")
        )

    return build


def test_a_store_failing_under_a_taskmanagers_restore_suspends_the_job(store: str) -> None:
    sink = CollectingSink()
    options = ("--checkpoint-dir", store, "--checkpoint-interval", "100ms")
    HELD.set()
    try:
        with start_job(_pipeline(sink), *options) as first:
            first.wait_checkpoints(2)
            first.cancel()
            ended = first.wait()
    finally:
        HELD.clear()
    assert ended.state == "CANCELED" and ended.last_checkpoint is not None, ended
    FlakyStore.failing.set()
    resume = ("--checkpoint-dir", store, "--from-savepoint", ended.last_checkpoint, "--job-id", "resumed")
    outcome = run_job(_pipeline(sink), *resume, "--max-restarts", "1", "--restart-delay", "10ms")
    assert (outcome.state, outcome.exit_code) == ("SUSPENDED", 3), outcome
    assert outcome.error is not None and "injected read error" in outcome.error, outcome
    assert not fsspec.filesystem(FlakyStore.protocol).exists("/checkpoints/resumed/job-result.json")
    # The store answers again: the same job id resumes from the checkpoint; every record is there once.
    FlakyStore.failing.clear()
    again = run_job(_pipeline(sink), *resume)
    assert again.state == "FINISHED", again
    assert sorted(sink.records()) == list(range(N))
