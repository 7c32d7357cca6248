"""Choosing a keyed state backend by name (`sluice run --state-backend`).

Apart from `sluice.state.keyed`, which the backends implement: the interface must not import them.
"""

from __future__ import annotations

from sluice.state.keyed import BACKENDS, KeyedStateBackend


def create_backend(kind: str, max_parallelism: int, owner: str) -> KeyedStateBackend:
    """A new, empty backend of `kind` for one keyed operator subtask; `owner` names it in its files."""
    if kind == "heap":
        from sluice.state.heap import HeapKeyedStateBackend

        return HeapKeyedStateBackend(max_parallelism)
    if kind == "disk":
        # Imported only when chosen: it needs lmdb.
        from sluice.state.disk import DiskKeyedStateBackend

        return DiskKeyedStateBackend(max_parallelism, owner)
    raise ValueError(f"unknown state backend {kind!r}: use one of {', '.join(BACKENDS)}")
