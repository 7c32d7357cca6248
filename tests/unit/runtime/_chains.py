"""Keyed state subtasks for tests of snapshots and chains, on either backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.state.backends import create_backend
from sluice.state.chain_files import KeyedFile
from sluice.state.descriptors import ValueStateDescriptor
from sluice.state.keyed import BACKENDS, KeyedStateBackend
from sluice.state.snapshots import ChainShare, ChangeLog, DeferredKeyed, KeyedWrite


@pytest.fixture(params=BACKENDS)
def new_backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """Makes backends of one kind; the disk backend's files go under the test's directory."""
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    made: list[KeyedStateBackend] = []

    def make() -> KeyedStateBackend:
        made.append(create_backend(request.param, 128, "test"))
        return made[-1]

    yield make
    for backend in made:
        backend.close()
    leftovers = list((tmp_path / "local-state").glob("*")) if (tmp_path / "local-state").exists() else []
    assert leftovers == [], "a closed backend leaves no files behind"


class Subtask:
    """One keyed subtask's backend and change log, checkpointing into a job directory as a task does."""

    def __init__(self, job_dir: Path, backend: KeyedStateBackend) -> None:
        self.job_dir = job_dir
        self.backend = backend
        self.count = self.backend.value_state(ValueStateDescriptor("count", default=0))
        self.log = ChangeLog()

    def put(self, keys: range | list[int], value: int) -> None:
        for key in keys:
            self.backend.current_key = key
            self.count.update(value)

    def remove(self, keys: list[int]) -> None:
        for key in keys:
            self.backend.current_key = key
            self.count.clear()

    def checkpoint(
        self,
        cid: int,
        savepoint: bool = False,
        complete: bool = True,
        completed_before: int = 0,
        compacted: bool = True,
    ) -> tuple[str, KeyedWrite]:
        """`completed_before`: the newest completed checkpoint when this one was triggered (its barrier
        says so); `complete`: this one completes and the subtask hears of it at once; `compacted`: a
        compaction it starts has finished when it returns."""
        location = (self.job_dir / (f"savepoint-{cid}" if savepoint else f"chk-{cid}")).as_uri()
        deferred = DeferredKeyed(self.log, self.backend.begin_snapshot(view=False))  # as the operator
        write = deferred.plan(cid, savepoint, completed_before)
        result = write.write(location, "count-0")
        write.written(result)
        write.release()
        if compacted and write.starts is not None:
            assert write.starts.wait(30), "the compaction this checkpoint started finishes"
        if complete:
            self.log.confirm(cid)
        return location, result


def restored(location: str, chain: list[KeyedFile], groups: range | None = None) -> dict[Any, Any]:
    """The 'count' entries a subtask owning key groups `groups` restores from `chain`."""
    entries: dict[Any, Any] = {}
    for name, _, upserts, removed in ChainShare(location, chain, groups, 128).frames():
        assert name == "count"
        entries.update(upserts)
        for key in removed:
            entries.pop(key, None)
    return entries
