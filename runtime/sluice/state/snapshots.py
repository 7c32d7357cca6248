"""Keyed state in checkpoint files: full and incremental snapshots of a keyed state backend.

A keyed operator subtask's backend state is a chain of files: one full snapshot, then deltas that each
hold the entries changed (or removed) since the previous file. A checkpoint writes one new file and
references the chain it extends, so it writes what changed, not all state. The files of checkpoints live
under `<checkpoint-dir>/<job-id>/shared/`, shared by the checkpoints that reference them; the
coordinator deletes one only when no retained checkpoint refers to it (`sluice.checkpoint.storage`).

A chain grows until its deltas add up to more than its full snapshot, or to `MAX_DELTAS` files; the
next checkpoint then writes a full snapshot (restoring reads the whole chain, so it is kept short).
Savepoints always write a full snapshot of their own, so a savepoint stays self-contained.

The chain a checkpoint extends is that of the last checkpoint this subtask knows completed: a delta is
taken against it and holds the keys changed since then, including those of later checkpoints that did
not complete (their files are deleted with them).

A table that changed since the chain's checkpoint but is absent from a delta's snapshot is gone (a
window operator drops a window's table when it fires, `sluice.state.windows`): the delta writes its
changed keys as removed.

A file is a sequence of pickle frames, each small enough that the serializing thread gives the task's
thread the GIL often: a header, then `(state name, kind, {key: value}, [removed keys])` chunks.
"""

from __future__ import annotations

import itertools
import operator
import pickle
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from sluice._fs import filesystem, join, make_dirs
from sluice.state.keyed import DELETED, BackendSnapshot
from sluice.state.keygroups import key_group_for

FORMAT = "sluice-keyed-state"
SHARED_DIR = "shared"
MAX_DELTAS = 16
_CHUNK = 16_384
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class KeyedFile:
    """One file of a chain. `shared` files are named under the job's shared directory; the others
    (a savepoint's) relative to the directory of `_metadata`."""

    name: str
    size: int
    full: bool
    shared: bool

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "full": self.full, "shared": self.shared}

    @staticmethod
    def from_json(data: Any) -> KeyedFile:
        """Checks what a TaskManager or a stored `_metadata` says: a plain file name, a size."""
        if not isinstance(data, dict):
            raise ValueError(f"a keyed state file entry must be an object, not {data!r}")
        name, size = data.get("name"), data.get("size")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"keyed state file name {name!r} is not a plain file name")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"keyed state file {name} has no valid size: {size!r}")
        return KeyedFile(name, size, bool(data.get("full")), bool(data.get("shared")))


def shared_location(checkpoint_location: str) -> str:
    """`<checkpoint-dir>/<job-id>/shared` for the location `<checkpoint-dir>/<job-id>/chk-<n>`."""
    return join(checkpoint_location.rstrip("/").rsplit("/", 1)[0], SHARED_DIR)


def file_uri(location: str, ref: KeyedFile) -> str:
    return join(shared_location(location), ref.name) if ref.shared else join(location, ref.name)


@dataclass
class KeyedWrite:
    """What one subtask's keyed state added to a checkpoint."""

    chain: list[KeyedFile]
    written: int

    @property
    def state_size(self) -> int:
        return sum(f.size for f in self.chain)


Changes = tuple[set[Any] | dict[Any, Any], frozenset[Any] | set[Any]]
"""A table's `FrozenTable.changed` and `FrozenTable.removed` in one snapshot."""


@dataclass
class ChangeLog:
    """Per backend: the chain of the last completed checkpoint and the keys changed since."""

    confirmed: list[KeyedFile] = field(default_factory=list)
    changes: dict[int, dict[str, Changes]] = field(default_factory=dict)
    """Keys changed per snapshot not yet covered by a completed checkpoint: checkpoint id -> name -> keys."""
    written: dict[int, list[KeyedFile]] = field(default_factory=dict)

    def plan(self, snapshot: BackendSnapshot, checkpoint_id: int, savepoint: bool) -> SnapshotWrite:
        self.changes[checkpoint_id] = {t.name: (t.changed, t.removed) for t in snapshot.tables}
        chain = self.confirmed
        deltas = sum(f.size for f in chain if not f.full)
        full = savepoint or not chain or len(chain) > MAX_DELTAS or deltas > chain[0].size
        changed: dict[str, list[Changes]] = {}
        if not full:
            for cid, by_name in self.changes.items():
                if cid <= checkpoint_id:
                    for name, keys in by_name.items():
                        changed.setdefault(name, []).append(keys)
        return SnapshotWrite(self, snapshot, checkpoint_id, savepoint, None if full else list(chain), changed)

    def written_for(self, checkpoint_id: int, chain: list[KeyedFile]) -> None:
        self.written[checkpoint_id] = chain

    def confirm(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` completed: later deltas extend its chain."""
        chain = self.written.pop(checkpoint_id, None)
        if chain is None:
            return  # not one of ours (a savepoint, or written by no snapshot of this backend)
        self.confirmed = chain
        self.written = {c: f for c, f in self.written.items() if c > checkpoint_id}
        self.changes = {c: k for c, k in self.changes.items() if c > checkpoint_id}


class SnapshotWrite:
    """A planned snapshot of one backend: `write` runs in a thread, `release` on the task's thread."""

    def __init__(
        self,
        log: ChangeLog,
        snapshot: BackendSnapshot,
        checkpoint_id: int,
        savepoint: bool,
        base: list[KeyedFile] | None,
        changed: dict[str, list[Changes]],
    ) -> None:
        self.log = log
        self.snapshot = snapshot
        self.checkpoint_id = checkpoint_id
        self.savepoint = savepoint
        self.base = base
        self.changed = changed
        self._lock = threading.Lock()
        self._writing = False
        self._released = False

    @property
    def incremental(self) -> bool:
        return self.base is not None

    def write(self, location: str, stem: str) -> KeyedWrite:
        with self._lock:
            if self._released:
                raise RuntimeError("the snapshot was released before it was written")
            self._writing = True
        try:
            return self._write(location, stem)
        finally:
            if self._done_writing():
                # The task let go while this thread was writing (it was cancelled): release now that
                # nothing reads the frozen view any more.
                self.snapshot.release()

    def _done_writing(self) -> bool:
        """Whether the snapshot was released while this thread wrote it."""
        with self._lock:
            self._writing = False
            return self._released

    def _write(self, location: str, stem: str) -> KeyedWrite:
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).lstrip(".")
        shared = not self.savepoint
        name = f"{stem}-{self.checkpoint_id}-{uuid.uuid4().hex[:12]}.kv" if shared else f"{stem}.kv"
        ref_dir = shared_location(location) if shared else location
        fs, path = filesystem(ref_dir)
        make_dirs(fs, path)
        with fs.open(f"{path}/{name}", "wb") as handle:
            batched = _Batched(handle)
            size = self._write_frames(batched)
            batched.flush()
        new = KeyedFile(name, size, full=self.base is None, shared=shared)
        return KeyedWrite([*(self.base or []), new], size)

    def _write_frames(self, out: _Batched) -> int:
        size = _dump(out, {"format": FORMAT, "version": 1, "full": self.base is None})
        for table in self.snapshot.tables:
            entries = table.entries
            if self.base is None:
                items = iter(entries.items())
                while chunk := dict(itertools.islice(items, _CHUNK)):
                    size += _dump(out, (table.name, table.kind, chunk, []))
                continue
            changes = self.changed.get(table.name, [])
            if all(type(changed) is dict for changed, _ in changes):
                size += _dump_known(out, table.name, table.kind, changes, table.decode)
                continue
            keys = _keys_of(changes)
            if type(entries) is dict:
                size += _dump_delta(out, table.name, table.kind, entries, keys)
                continue
            ordered = iter(keys)
            while batch := list(itertools.islice(ordered, _CHUNK)):
                upserts, removed = {}, []
                for key in batch:
                    value = entries.get(key, DELETED)
                    if value is DELETED:
                        removed.append(key)
                    else:
                        upserts[key] = value
                size += _dump(out, (table.name, table.kind, upserts, removed))
        if self.base is not None:
            size += self._write_dropped_tables(out)
        return size

    def _write_dropped_tables(self, out: _Batched) -> int:
        """A table changed since the chain's checkpoint but absent now is gone (a fired window): its
        changed keys are written as removed. (A keyed state backend never drops a table.)"""
        present = {table.name for table in self.snapshot.tables}
        size = 0
        for name, changes in self.changed.items():
            if name in present:
                continue
            gone = list(_keys_of(changes))
            for start in range(0, len(gone), _CHUNK):
                size += _dump(out, (name, "value", {}, gone[start : start + _CHUNK]))
        return size

    def written(self, result: KeyedWrite) -> None:
        """On the task's thread, before the acknowledgement: the chain this checkpoint references."""
        if not self.savepoint:
            self.log.written_for(self.checkpoint_id, result.chain)

    def release(self) -> None:
        """On the task's thread once written; while a (cancelled) write still runs, that thread does it."""
        with self._lock:
            if self._released:
                return
            self._released = True
            if self._writing:
                return
        self.snapshot.release()


def _keys_of(changes: list[Changes]) -> set[Any]:
    keys: set[Any] = set()
    for changed, removed in changes:
        keys.update(changed)
        keys |= removed
    return keys


def _dump_known(
    out: _Batched, name: str, kind: str, changes: list[Changes], decode: Callable[[Any], Any] | None
) -> int:
    """A delta from changes that carry their values: merged oldest first, so the newest value wins."""
    upserts: dict[Any, Any] = {}
    removed: set[Any] = set()
    if len(changes) == 1 and isinstance(changes[0][0], dict):
        upserts, removed = changes[0][0], set(changes[0][1])  # the common case: no copy of the dict
    else:
        for changed, gone in changes:
            upserts.update(changed)
            removed.difference_update(changed)
            for key in gone:
                upserts.pop(key, None)
            removed |= gone
    size = 0
    first_removed = list(removed)
    items = iter(upserts.items())
    while chunk := dict(itertools.islice(items, _CHUNK)):
        if decode is not None:
            chunk = {key: decode(value) for key, value in chunk.items()}
        size += _dump(out, (name, kind, chunk, first_removed))
        first_removed = []
    if first_removed:
        size += _dump(out, (name, kind, {}, first_removed))
    return size


def _dump_delta(out: _Batched, name: str, kind: str, entries: dict[Any, Any], keys: set[Any]) -> int:
    """A delta of a dict, with set operations and itemgetter instead of a lookup per key in Python."""
    present = keys & entries.keys()
    removed = list(keys - present)
    size = 0
    ordered = iter(present)
    while batch := list(itertools.islice(ordered, _CHUNK)):
        values = operator.itemgetter(*batch)(entries) if len(batch) > 1 else (entries[batch[0]],)
        size += _dump(out, (name, kind, dict(zip(batch, values, strict=True)), removed))
        removed = []
    if removed:
        size += _dump(out, (name, kind, {}, removed))
    return size


class _Batched:
    """Collects frames and writes them a few MiB at a time. Each write lets go of the GIL, and getting
    it back from a busy task thread takes up to a switch interval (5 ms): a write per frame made that
    wait most of a delta's writing time."""

    _LIMIT = 8 << 20

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._frames: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        self._frames.append(data)
        self._size += len(data)
        if self._size >= self._LIMIT:
            self.flush()

    def flush(self) -> None:
        if self._frames:
            self._out.write(b"".join(self._frames))
            self._frames, self._size = [], 0


def _dump(out: _Batched, frame: Any) -> int:
    data = pickle.dumps(frame, protocol=5)
    out.write(data)
    return len(data)


def read_frames(uri: str) -> Iterator[Frame]:
    fs, path = filesystem(uri)
    with fs.open(path, "rb") as handle:
        header = pickle.load(handle)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ValueError(f"{uri} is not a Sluice keyed state file")
        while True:
            try:
                frame = pickle.load(handle)
            except EOFError:
                return
            yield frame


Frame = tuple[str, str, dict[Any, Any], list[Any]]
"""(state name, kind, {key: value}, [removed keys])"""


@dataclass(frozen=True)
class ChainShare:
    """One old subtask's chain, of which a restoring subtask takes the keys of key groups `groups`."""

    location: str
    chain: list[KeyedFile]
    groups: range | None
    """None: every key (the chain's key groups all belong to the restoring subtask)."""
    max_parallelism: int

    def frames(self) -> Iterator[Frame]:
        """The chain's frames in order, filtered to `groups`: applied in turn they give the state."""
        groups, mp = self.groups, self.max_parallelism
        for ref in self.chain:
            for name, kind, entries, removed in read_frames(file_uri(self.location, ref)):
                mine = entries
                if groups is not None:
                    mine = {k: v for k, v in entries.items() if key_group_for(k, mp) in groups}
                yield name, kind, mine, removed


@dataclass
class DeferredKeyed:
    """An operator's frozen backend snapshot until the chain knows where and how it is written."""

    log: ChangeLog
    snapshot: BackendSnapshot

    def plan(self, checkpoint_id: int, savepoint: bool, completed: int = 0) -> SnapshotWrite:
        """`completed`: the newest checkpoint the coordinator had completed when it triggered this one.
        Its chain is confirmed first, even if the notice of its completion has not come yet: the
        coordinator keeps that chain until a newer checkpoint completes, not the older ones."""
        if completed:
            self.log.confirm(completed)
        return self.log.plan(self.snapshot, checkpoint_id, savepoint)
