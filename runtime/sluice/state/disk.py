"""Keyed state on the TaskManager's local disk (`--state-backend disk`), for state larger than memory.

The store is LMDB (the `lmdb` binding): a memory-mapped B+tree whose read transactions are consistent
snapshots that cost nothing to open and that writers never block, which is what an asynchronous
checkpoint needs. Measured against RocksDB through `rocksdict` on this workload (a get and a put per
record on 2M keys, 1M operations, one process): LMDB 100k operations/s, RocksDB 23k; iterating a
snapshot 1.06M entries/s against 0.59M (see bench/README.md, W4).

This module provides the store, its tables and their snapshots; the state handles are those of
`sluice.state.primitives`, over these tables. Each declared state is one LMDB database; keys and values
are pickled (equal ints, floats and bools are one key, as in a dict). Lists and maps are stored whole
per key, so adding to a long list rewrites it. Writes go into one write transaction, committed every
`_COMMIT_EVERY` writes and at each snapshot; the store is scratch space: a restart restores from the
checkpoint, never from these files, which are removed when the operator closes; those of a TaskManager
killed outright (under the temp directory, or `SLUICE_STATE_DIR`) are removed by the next store opened
there once that process is gone.

A snapshot hands out the keys changed since the previous one with their encoded values (kept as they
are written, so a delta reads nothing back from the store); `sluice.state.snapshots` writes them from
its thread into the same files as the heap backend. Only a snapshot that reads the store (a full one)
opens the frozen view: it commits the write transaction and opens a read transaction. A delta does
neither, so the checkpoint never stops record processing for an LMDB commit, whose time on millions of
keys has a tail of 100-200 ms (bench/README.md, W4); and no read transaction holds pages the writer
could have reused. Timers stay in memory and are checkpointed with the operator.
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import lmdb

from sluice._private_dirs import pid_directory
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.keyed import FrozenTable, legacy_kind
from sluice.state.primitives import MISSING, TableListState, TableMapState, TableValueState

T = TypeVar("T")
_COMMIT_EVERY = 20_000
_MAP_SIZE = 1 << 40  # address space only: the file grows with the data
_MAX_KEY = 500
_dumps, _loads = pickle.dumps, pickle.loads
_NO_KEY: Any = object()


def encode_key(key: Any) -> bytes:
    kind = type(key)
    if kind is bool or (kind is float and key.is_integer()):
        key = int(key)  # 1 == 1.0 == True are one key, as in a dict
    data = _dumps(key, 5)
    if len(data) > _MAX_KEY:
        raise ValueError(
            f"a key of {len(data)} bytes (pickled) is too long for the disk state backend "
            f"(at most {_MAX_KEY}): key_by a shorter key, or use --state-backend heap"
        )
    return data


_PREFIX = "sluice-state-"


class Store:
    """The LMDB environment of one backend and its current write transaction."""

    def __init__(self, owner: str) -> None:
        root = os.environ.get("SLUICE_STATE_DIR") or None
        if root is not None:
            os.makedirs(root, mode=0o700, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in owner)[:60]
        # Stores of TaskManagers killed before closing theirs are removed first.
        self.path = pid_directory(_PREFIX, root, tag=f"{safe}-")
        self.env = lmdb.open(
            self.path,
            map_size=_MAP_SIZE,
            max_dbs=256,
            max_readers=64,
            sync=False,
            metasync=False,
            writemap=True,
            map_async=True,
            readahead=False,
        )
        self.txn = self.env.begin(write=True)
        self.last_key: Any = _NO_KEY
        self.last_encoded = b""
        """The key a table encoded last, and its encoding: every access while one record is processed
        passes the same key object, so it is encoded once per record rather than once per access. (The
        tables look it up themselves: a call to a method doing it cost a read 5%.)"""
        self.pending = 0
        self.commits = 0
        self.readers = 0
        self.closing = False

    def open_db(self, name: str) -> Any:
        return self.env.open_db(name.encode("utf-8"), txn=self.txn)

    def wrote(self) -> None:
        self.pending += 1
        if self.pending >= _COMMIT_EVERY:
            self.commit()

    def commit(self) -> None:
        self.txn.commit()
        self.txn = self.env.begin(write=True)
        self.pending = 0
        self.commits += 1

    def position(self) -> tuple[int, int]:
        """Changes whenever the store is written: (commits, writes since the last)."""
        return self.commits, self.pending

    def close(self) -> None:
        """On the thread that writes the store, the one its write transaction belongs to.

        The write transaction ends here, on that thread, even while a snapshot still reads the store:
        its lock is a robust pthread mutex, which only the thread that locked it can unlock and which
        stays on that thread's list of robust mutexes until it does. The environment is closed by
        whoever lets go last, possibly the snapshot writer's thread (`reader_done`); had that thread
        ended the transaction, its unlock would have failed and the close would have unmapped the
        lock file under a mutex still listed on this thread, so that the next LMDB lock taken here
        wrote through the stale entry: a segmentation fault, or a stray write into whatever was
        mapped there since (tests/unit/runtime/test_disk_store_threads.py).
        """
        self.closing = True
        self.txn.abort()
        if self.readers == 0:
            self._close_now()

    def reader_done(self) -> None:
        self.readers -= 1
        if self.closing and self.readers == 0:
            self._close_now()

    def _close_now(self) -> None:
        try:
            self.env.close()
        finally:
            shutil.rmtree(self.path, ignore_errors=True)


class StoreView:
    """One database as the snapshot's read transaction sees it, once `DiskSnapshot.open_view` opened it;
    with a `prefix`, only the entries whose keys start with it (one table of `sluice.state.disk_tables`)."""

    __slots__ = ("_db", "_prefix", "txn")

    def __init__(self, db: Any, prefix: bytes = b"") -> None:
        self._db = db
        self._prefix = prefix
        self.txn: Any = None

    def _reader(self) -> Any:
        if self.txn is None:
            raise RuntimeError("a disk snapshot's entries are read only after its open_view()")
        return self.txn

    def get(self, key: Any, default: Any = None) -> Any:
        raw = self._reader().get(self._prefix + encode_key(key), db=self._db)
        return default if raw is None else _loads(raw)

    def items(self) -> Iterator[tuple[Any, Any]]:
        prefix = self._prefix
        if not prefix:
            for key, value in self._reader().cursor(db=self._db):
                yield _loads(key), _loads(value)
            return
        yield from prefixed_items(self._reader().cursor(db=self._db), prefix)


def prefixed_items(cursor: Any, prefix: bytes) -> Iterator[tuple[Any, Any]]:
    """The entries of `cursor`'s database whose keys start with `prefix`, the prefix cut off, decoded."""
    cut = len(prefix)
    if not cursor.set_range(prefix):
        return
    for key, value in cursor:
        if not key.startswith(prefix):
            return
        yield _loads(key[cut:]), _loads(value)


class DiskSnapshot:
    def __init__(self, store: Store, tables: list[FrozenTable]) -> None:
        self._store, self.tables = store, tables
        self._txn: Any = None
        self._taken_at = store.position()
        self._released = False

    def open_view(self) -> None:
        if self._txn is not None:
            return
        store = self._store
        if store.position() != self._taken_at:
            raise RuntimeError("a disk snapshot's view must be opened before the backend is written again")
        store.commit()
        self._txn = store.env.begin()
        store.readers += 1
        for table in self.tables:
            view = table.entries
            if isinstance(view, StoreView):  # a table of removals only (a fired window) reads nothing
                view.txn = self._txn

    def release(self) -> None:
        if not self._released:
            self._released = True
            if self._txn is not None:
                self._txn.abort()
                self._store.reader_done()


class _Table:
    """One declared state in its own LMDB database: `sluice.state.primitives.StateTable` on the store.
    Every read decodes a new copy, so a changed container is written back whole."""

    __slots__ = ("db", "dirty", "get", "in_place", "kind", "lend", "name", "removed", "store")

    def __init__(self, store: Store, name: str, kind: str) -> None:
        self.in_place = False
        # Attributes, as StateTable has them (the heap swaps its own).
        self.get: Callable[[Any, Any], Any] = self._decoded
        self.lend: Callable[[Any, Any], Any] = self._decoded
        self.store, self.name, self.kind = store, name, kind
        self.db = store.open_db(name)
        self.dirty: dict[Any, bytes] = {}
        """Keys written since the last snapshot, with their encoded values."""
        self.removed: set[Any] = set()

    def _decoded(self, key: Any, default: Any) -> Any:
        store = self.store
        if key is store.last_key:
            encoded = store.last_encoded
        else:
            encoded = store.last_encoded = encode_key(key)
            store.last_key = key
        raw = store.txn.get(encoded, db=self.db)
        return default if raw is None else _loads(raw)

    def own(self, key: Any, copy: Callable[[Any], Any]) -> Any:
        return self._decoded(key, MISSING)

    def put(self, key: Any, value: Any) -> None:
        store = self.store
        data = self.dirty[key] = _dumps(value, 5)
        if key is store.last_key:
            encoded = store.last_encoded
        else:
            encoded = store.last_encoded = encode_key(key)
            store.last_key = key
        store.txn.put(encoded, data, db=self.db)
        if self.removed:
            self.removed.discard(key)
        store.pending += 1  # `Store.wrote`, written out: one call less for every write of a record
        if store.pending >= _COMMIT_EVERY:
            store.commit()

    def remove(self, key: Any) -> None:
        store = self.store
        store.txn.delete(encode_key(key), db=self.db)
        self.dirty.pop(key, None)
        self.removed.add(key)
        store.wrote()


class DiskKeyedStateBackend:
    kind = "disk"

    def __init__(self, max_parallelism: int, owner: str) -> None:
        self.max_parallelism = max_parallelism
        self.current_key: Any = None
        self._owner = owner
        self._store: Store | None = None  # opened with the first declared state
        self._tables: dict[str, _Table] = {}

    def _table(self, name: str, kind: str) -> _Table:
        known = self._tables.get(name)
        if known is not None:
            if known.kind != kind:
                raise ValueError(f"state {name!r} is declared both as {known.kind} and as {kind} state")
            return known
        if self._store is None:
            self._store = Store(self._owner)
        table = self._tables[name] = _Table(self._store, name, kind)
        return table

    def value_state(self, desc: ValueStateDescriptor[T]) -> TableValueState[T]:
        return TableValueState(self, self._table(desc.name, "value"), desc.default)

    def list_state(self, desc: ListStateDescriptor[T]) -> TableListState[T]:
        return TableListState(self, self._table(desc.name, "list"))

    def map_state(self, desc: MapStateDescriptor) -> TableMapState:
        return TableMapState(self, self._table(desc.name, "map"))

    def has_state(self) -> bool:
        return bool(self._tables)

    def keys(self, name: str) -> list[Any]:
        table = self._tables.get(name)
        if table is None or self._store is None:
            return []
        cursor = self._store.txn.cursor(db=table.db)
        return [_loads(key) for key in cursor.iternext(keys=True, values=False)]

    def begin_snapshot(self, view: bool = True) -> DiskSnapshot:
        store = self._store
        assert store is not None, "a snapshot of a backend without state"
        frozen = []
        for t in self._tables.values():
            frozen.append(FrozenTable(t.name, t.kind, StoreView(t.db), t.dirty, t.removed, _loads))
            t.dirty, t.removed = {}, set()
        snapshot = DiskSnapshot(store, frozen)
        if view:
            snapshot.open_view()
        return snapshot

    def restore_frame(self, name: str, kind: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        table = self._table(name, kind)
        store = self._store
        assert store is not None
        for key, value in upserts.items():
            store.txn.put(encode_key(key), _dumps(value, 5), db=table.db)
            store.wrote()
        for key in removed:
            store.txn.delete(encode_key(key), db=table.db)
            store.wrote()

    def restore(self, groups: dict[int, dict[str, dict[Any, Any]]]) -> None:
        for by_name in groups.values():
            for name, entries in by_name.items():
                known = self._tables.get(name)
                self.restore_frame(name, known.kind if known else legacy_kind(entries), entries, [])

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
            self._tables.clear()
