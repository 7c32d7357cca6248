"""Tables that come and go, in one LMDB database: the window contents of the disk state backend.

Window operators keep a table per window (`window:<end>`, `sluice.state.windows`) or one table of each
key's windows (`keyed-windows`, `sluice.state.keyed_windows`). Windows open and fire all the time, more
than LMDB's named databases allow (they are fixed in number and never dropped), so every table lives in
one database, its entries keyed by `<table name> NUL <encoded key>`: a table is a key range, dropped by
deleting that range. The store is the disk backend's (`sluice.state.disk.Store`): scratch space in the
TaskManager's state directory, removed when the operator closes.

Snapshots are the disk backend's too: `begin_snapshot` hands out, per table, the keys written since the
previous snapshot with their encoded values as written and the keys removed, so a delta reads nothing
back from the store and later writes cannot change it; only a full snapshot opens a read transaction
(`DiskSnapshot.open_view`), which writes never disturb. A dropped table that a snapshot held lists all
its keys as removed, so the delta that follows removes it from the chain (as
`sluice.state.snapshots` expects of a fired window). The frames are those of the heap layouts: a
checkpoint restores into either backend, at any parallelism (by key group of the record keys).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from sluice.state.disk import DiskSnapshot, Store, StoreView, encode_key, prefixed_items
from sluice.state.keyed import FrozenTable

_dumps, _loads = pickle.dumps, pickle.loads
_SEPARATOR = b"\x00"
_MAX_LMDB_KEY = 511
MISSING: Any = object()


class DiskTables:
    """Named tables of pickled values in one LMDB database, with what changed since the last snapshot."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._store: Store | None = None  # opened with the first write
        self._db: Any = None
        self._prefixes: dict[str, bytes] = {}
        self._names: set[str] = set()
        """Tables written since they were created or last dropped."""
        self._held: set[str] = set()
        """Tables some snapshot has held: dropping one must be written as the removal of its keys."""
        self._dirty: dict[str, dict[Any, bytes]] = {}
        self._removed: dict[str, set[Any]] = {}
        self._tracking = False
        """Whether changes are kept for the next snapshot: not before the first, which is a full one
        (a job without checkpoints would otherwise keep every value it wrote in memory)."""

    def _open(self) -> Store:
        store = self._store
        if store is None:
            store = self._store = Store(self._owner)
            self._db = store.open_db("windows")
        return store

    def _prefix(self, name: str) -> bytes:
        prefix = self._prefixes.get(name)
        if prefix is None:
            prefix = self._prefixes[name] = name.encode("utf-8") + _SEPARATOR
        return prefix

    def _key(self, name: str, key: Any) -> bytes:
        prefix = self._prefix(name)
        encoded = encode_key(key)
        if len(prefix) + len(encoded) > _MAX_LMDB_KEY:
            raise ValueError(
                f"a key of {len(encoded)} bytes (pickled) is too long for window state on the disk "
                f"backend (at most {_MAX_LMDB_KEY - len(prefix)}): key_by a shorter key, or use "
                "--state-backend heap"
            )
        return prefix + encoded

    def get(self, name: str, key: Any, default: Any = None) -> Any:
        if self._store is None:
            return default
        raw = self._store.txn.get(self._key(name, key), db=self._db)
        return default if raw is None else _loads(raw)

    def put(self, name: str, key: Any, value: Any) -> None:
        store = self._open()
        data = _dumps(value, 5)
        store.txn.put(self._key(name, key), data, db=self._db)
        self._names.add(name)
        if self._tracking:
            dirty = self._dirty.get(name)
            if dirty is None:
                dirty = self._dirty[name] = {}
            dirty[key] = data
            removed = self._removed.get(name)
            if removed:
                removed.discard(key)
        store.wrote()

    def remove(self, name: str, key: Any) -> None:
        if self._store is None:
            return
        store = self._store
        store.txn.delete(self._key(name, key), db=self._db)
        if self._tracking:
            self._dirty.get(name, {}).pop(key, None)
            self._removed.setdefault(name, set()).add(key)
        store.wrote()

    def items(self, name: str) -> Iterator[tuple[Any, Any]]:
        """The entries of table `name`; the table must not be written while this is iterated."""
        if self._store is None:
            return iter(())
        return prefixed_items(self._store.txn.cursor(db=self._db), self._prefix(name))

    def drop(self, name: str) -> dict[Any, Any]:
        """Removes table `name` and returns its entries."""
        entries = dict(self.items(name))
        store = self._store
        if store is not None and entries:
            db, prefix = self._db, self._prefix(name)
            for key in entries:
                # Not a local: `wrote` commits every so many writes and begins a new transaction.
                store.txn.delete(prefix + encode_key(key), db=db)
                store.wrote()
        self._names.discard(name)
        self._dirty.pop(name, None)
        removed = self._removed.pop(name, set())
        if name in self._held:
            self._held.discard(name)
            self._removed[name] = removed | set(entries)
        self._prefixes.pop(name, None)
        return entries

    def restore(self, name: str, upserts: dict[Any, Any], removed: list[Any]) -> None:
        """Applies a frame of a checkpoint: written to the store only, not as changes (the first
        snapshot after a restore is a full one)."""
        store, db = self._open(), self._db
        for key, value in upserts.items():
            store.txn.put(self._key(name, key), _dumps(value, 5), db=db)
            store.wrote()
        for key in removed:
            store.txn.delete(self._key(name, key), db=db)
            store.wrote()
        if upserts:
            self._names.add(name)

    def is_empty(self, name: str | None = None) -> bool:
        """Whether table `name` (any table, if None) has no entries."""
        if self._store is None:
            return True
        cursor = self._store.txn.cursor(db=self._db)
        if name is None:
            return not cursor.first()
        prefix = self._prefix(name)
        return not (cursor.set_range(prefix) and cursor.key().startswith(prefix))

    def has_changes(self) -> bool:
        """Whether anything was written or removed since the previous snapshot."""
        return any(self._dirty.values()) or any(self._removed.values())

    def begin_snapshot(self) -> DiskSnapshot:
        store = self._open()
        tables = []
        for name in self._names | {n for n, keys in self._removed.items() if keys}:
            entries: Any = StoreView(self._db, self._prefix(name)) if name in self._names else {}
            changed, removed = self._dirty.get(name, {}), self._removed.get(name, set())
            tables.append(FrozenTable(name, "value", entries, changed, removed, _loads))
        self._held |= self._names
        self._dirty, self._removed = {}, {}
        self._tracking = True
        return DiskSnapshot(store, tables)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
