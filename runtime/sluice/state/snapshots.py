"""Keyed state in checkpoint files: full and incremental snapshots of a keyed state backend.

A keyed operator subtask's backend state is a chain of files: one full snapshot, then deltas that each
hold the entries changed (or removed) since the previous file. A checkpoint writes one new file and
references the chain it extends, so it writes what changed, not all state. The files of checkpoints live
under `<checkpoint-dir>/<job-id>/shared/`, shared by the checkpoints that reference them; the
coordinator deletes one only when no retained checkpoint refers to it (`sluice.checkpoint.storage`).

Once a chain has `MAX_DELTAS` deltas, or deltas larger than its full file, a checkpoint starts a
compaction of it (`sluice.state.compaction`) that runs beside processing and later checkpoints; the
first checkpoint after it finished uses the compacted file instead of the files it replaced. But when
the last delta alone was half the size of the full file or more (most keys change every interval), the
checkpoint writes a full snapshot itself: it costs about what two deltas do. A chain also gets a full
snapshot inside a checkpoint when it has none yet (the first checkpoint after a start) or when
compaction fell `MAX_CHAIN` files behind. Savepoints always write a full snapshot
of their own, so a savepoint stays self-contained.

The chain a checkpoint extends is that of the last checkpoint this subtask knows completed: a delta is
taken against it and holds the keys changed since then, including those of later checkpoints that did
not complete (their files are deleted with them).

A table that changed since the chain's checkpoint but is absent from a delta's snapshot is gone (a
window operator drops a window's table when it fires, `sluice.state.windows`): the delta writes its
changed keys as removed.

The files' format is `sluice.state.chain_files`.
"""

from __future__ import annotations

import itertools
import operator
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sluice._fs import filesystem, make_dirs
from sluice.state.chain_files import (
    CHUNK,
    Batched,
    Frame,
    KeyedFile,
    dump,
    file_uri,
    header,
    read_frames,
)
from sluice.state.compaction import Compaction
from sluice.state.keyed import DELETED, BackendSnapshot
from sluice.state.keygroups import key_group_for
from sluice.state.stored_files import DigestingWriter
from sluice_contract.checkpoints import shared_location

MAX_DELTAS = 16
MAX_CHAIN = 4 * MAX_DELTAS
"""A chain this long (compaction not keeping up) is cut by a full snapshot inside the checkpoint."""
_CLOSE_WAIT_S = 10.0
"""How long closing waits for a compaction it stops: a kill, then deleting its file from storage."""


@dataclass
class KeyedWrite:
    """What one subtask's keyed state added to a checkpoint."""

    chain: list[KeyedFile]
    written: int
    protected: list[str] = field(default_factory=list)
    """Shared files this subtask is still making (a compaction's): the coordinator must keep them."""

    @property
    def state_size(self) -> int:
        return sum(f.size for f in self.chain)


Changes = tuple[set[Any] | dict[Any, Any], frozenset[Any] | set[Any]]
"""A table's `FrozenTable.changed` and `FrozenTable.removed` in one snapshot."""


@dataclass
class ChangeLog:
    """Per backend: the chain of the last completed checkpoint, the keys changed since, and the
    compaction of that chain under way, if any. Used on the task's thread only."""

    confirmed: list[KeyedFile] = field(default_factory=list)
    changes: dict[int, dict[str, Changes]] = field(default_factory=dict)
    """Keys changed per snapshot not yet covered by a completed checkpoint: checkpoint id -> name -> keys."""
    written: dict[int, list[KeyedFile]] = field(default_factory=dict)
    compaction: Compaction | None = None
    restored_from: str | None = None
    """The shared directory of a restored chain that `confirmed` still is (see `extend_restored`)."""

    def extend_restored(self, chain: list[KeyedFile], location: str) -> None:
        """The backend holds exactly the state of `chain`, restored from the checkpoint at `location`:
        later checkpoints may write deltas on it instead of a full snapshot first. Only if they are
        written beside it (a failover of the same job, whose checkpoints keep the restored one's files
        while they refer to them); a job started from another job's checkpoint does not own its files,
        and its first checkpoint is full (as Flink's NO_CLAIM restore mode)."""
        self.confirmed = list(chain)
        self.restored_from = shared_location(location)

    def plan(self, snapshot: BackendSnapshot, checkpoint_id: int, savepoint: bool) -> SnapshotWrite:
        self.changes[checkpoint_id] = {t.name: (t.changed, t.removed) for t in snapshot.tables}
        chain = self.confirmed if savepoint else self._adopt_compacted()
        full = savepoint or not chain or len(chain) > MAX_CHAIN
        starts = None
        if not full and self.compaction is None and _due_for_compaction(chain):
            if 2 * chain[-1].size >= chain[0].size:
                # Deltas about as large as all state (most keys change every interval): a full snapshot
                # costs this checkpoint at most about twice a delta, and no compaction.
                full = True
            elif self.restored_from is None:
                starts = self.compaction = Compaction(list(chain), checkpoint_id)
        changed: dict[str, list[Changes]] = {}
        if not full:
            for cid, by_name in self.changes.items():
                if cid <= checkpoint_id:
                    for name, keys in by_name.items():
                        changed.setdefault(name, []).append(keys)
        known = all(type(c) is dict for keys in changed.values() for c, _ in keys)
        if full or not known or self.restored_from is not None:
            # Entries are read: a full snapshot, a delta of keys without their values, or one on a
            # restored chain that `SnapshotWrite.write` may find is another job's and write in full.
            # A delta of values as written reads nothing, so the backend need not open its view.
            snapshot.open_view()
        protect = None if savepoint else self.compaction
        write = SnapshotWrite(
            self, snapshot, checkpoint_id, savepoint, None if full else list(chain), changed, starts, protect
        )
        write.origin = self.restored_from
        return write

    def _adopt_compacted(self) -> list[KeyedFile]:
        """The confirmed chain, or the same state with a finished compaction's file in place of the
        files it compacted (steps 4 of `sluice.state.compaction`)."""
        job = self.compaction
        chain = self.confirmed
        if job is None or not job.finished:
            return chain
        if job.result is not None and chain[: len(job.source)] == job.source:
            return [job.result, *chain[len(job.source) :]]
        self.compaction = None  # failed, or its chain was cut by a full snapshot: dropped
        return chain

    def written_for(self, checkpoint_id: int, chain: list[KeyedFile]) -> None:
        self.written[checkpoint_id] = chain

    def confirm(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` completed: later deltas extend its chain."""
        chain = self.written.pop(checkpoint_id, None)
        if chain is None:
            return  # not one of ours (a savepoint, or written by no snapshot of this backend)
        self.confirmed = chain
        self.restored_from = None
        self.written = {c: f for c, f in self.written.items() if c > checkpoint_id}
        self.changes = {c: k for c, k in self.changes.items() if c > checkpoint_id}
        job = self.compaction
        if job is not None and job.result is not None and chain[:1] == [job.result]:
            self.compaction = None  # adopted by a completed checkpoint: its file is part of the chain

    def dropped(self, job: Compaction) -> None:
        """A compaction's planning checkpoint was released without being written: it never starts."""
        if self.compaction is job:
            self.compaction = None
        job.cancel()

    def close(self) -> None:
        """The operator closes: a compaction under way stops and deletes what it wrote before this
        returns, so that nothing writes into the job's storage once its task has ended."""
        if self.compaction is not None:
            self.compaction.cancel(wait_s=_CLOSE_WAIT_S)
            self.compaction = None


def _due_for_compaction(chain: list[KeyedFile]) -> bool:
    deltas = chain[1:]
    return len(deltas) >= MAX_DELTAS or sum(f.size for f in deltas) > chain[0].size


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
        starts: Compaction | None = None,
        protect: Compaction | None = None,
    ) -> None:
        self.log = log
        self.snapshot = snapshot
        self.checkpoint_id = checkpoint_id
        self.savepoint = savepoint
        self.base = base
        self.changed = changed
        self.starts = starts
        """The compaction this checkpoint planned, started once its own file is written."""
        self.protect = protect
        """The compaction whose file the acknowledgement names as protected."""
        self.origin: str | None = None
        """The shared directory of `base` when it is a restored chain; elsewhere than this checkpoint's,
        the chain is not extended and a full snapshot is written."""
        self._lock = threading.Lock()
        self._writing = False
        self._released = False
        self._began = False

    @property
    def incremental(self) -> bool:
        return self.base is not None

    def write(self, location: str, stem: str) -> KeyedWrite:
        with self._lock:
            if self._released:
                raise RuntimeError("the snapshot was released before it was written")
            self._writing = self._began = True
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).lstrip(".")
        if self.base is not None and self.origin is not None and self.origin != shared_location(location):
            self.base = None  # a restored chain of another job's checkpoints: not ours to extend
        try:
            result = self._write(location, stem)
            if self.protect is not None:
                result.protected.append(self.protect.file_name(stem))
            return result
        finally:
            if self.starts is not None:
                self.starts.start(location, stem)
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
        shared = not self.savepoint
        name = f"{stem}-{self.checkpoint_id}-{uuid.uuid4().hex[:12]}.kv" if shared else f"{stem}.kv"
        ref_dir = shared_location(location) if shared else location
        fs, path = filesystem(ref_dir)
        make_dirs(fs, path)
        with fs.open(f"{path}/{name}", "wb") as handle:
            digesting = DigestingWriter(handle)
            batched = Batched(digesting)
            size = self._write_frames(batched)
            batched.flush()
        new = KeyedFile(name, size, full=self.base is None, shared=shared, sha256=digesting.hexdigest())
        return KeyedWrite([*(self.base or []), new], size)

    def _write_frames(self, out: Batched) -> int:
        size = dump(out, header(self.base is None))
        for table in self.snapshot.tables:
            entries = table.entries
            if self.base is None:
                items = iter(entries.items())
                while chunk := dict(itertools.islice(items, CHUNK)):
                    size += dump(out, (table.name, table.kind, chunk, []))
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
            while batch := list(itertools.islice(ordered, CHUNK)):
                upserts, removed = {}, []
                for key in batch:
                    value = entries.get(key, DELETED)
                    if value is DELETED:
                        removed.append(key)
                    else:
                        upserts[key] = value
                size += dump(out, (table.name, table.kind, upserts, removed))
        if self.base is not None:
            size += self._write_dropped_tables(out)
        return size

    def _write_dropped_tables(self, out: Batched) -> int:
        """A table changed since the chain's checkpoint but absent now is gone (a fired window): its
        changed keys are written as removed. (A keyed state backend never drops a table.)"""
        present = {table.name for table in self.snapshot.tables}
        size = 0
        for name, changes in self.changed.items():
            if name in present:
                continue
            gone = list(_keys_of(changes))
            for start in range(0, len(gone), CHUNK):
                size += dump(out, (name, "value", {}, gone[start : start + CHUNK]))
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
            began, writing = self._began, self._writing
        if self.starts is not None and not began:
            self.log.dropped(self.starts)
        if not writing:
            self.snapshot.release()


def _keys_of(changes: list[Changes]) -> set[Any]:
    keys: set[Any] = set()
    for changed, removed in changes:
        keys.update(changed)
        keys |= removed
    return keys


def _dump_known(
    out: Batched, name: str, kind: str, changes: list[Changes], decode: Callable[[Any], Any] | None
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
    while chunk := dict(itertools.islice(items, CHUNK)):
        if decode is not None:
            chunk = {key: decode(value) for key, value in chunk.items()}
        size += dump(out, (name, kind, chunk, first_removed))
        first_removed = []
    if first_removed:
        size += dump(out, (name, kind, {}, first_removed))
    return size


def _dump_delta(out: Batched, name: str, kind: str, entries: dict[Any, Any], keys: set[Any]) -> int:
    """A delta of a dict, with set operations and itemgetter instead of a lookup per key in Python."""
    present = keys & entries.keys()
    removed = list(keys - present)
    size = 0
    ordered = iter(present)
    while batch := list(itertools.islice(ordered, CHUNK)):
        values = operator.itemgetter(*batch)(entries) if len(batch) > 1 else (entries[batch[0]],)
        size += dump(out, (name, kind, dict(zip(batch, values, strict=True)), removed))
        removed = []
    if removed:
        size += dump(out, (name, kind, {}, removed))
    return size


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
            for name, kind, entries, removed in read_frames(file_uri(self.location, ref), ref.sha256):
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
