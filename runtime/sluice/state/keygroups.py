"""Keys map to key groups, key groups map to subtasks.

The number of key groups is the operator's max parallelism and never changes for a job, so keyed state
snapshotted per key group can be handed to any later parallelism (rescaling on restore). The hash must
be the same in every process: Python's `hash()` of `str` is salted per process, so it cannot be used.
"""

from __future__ import annotations

import pickle
import struct
import zlib
from typing import Any

DEFAULT_MAX_PARALLELISM = 128
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def stable_hash(key: Any) -> int:
    """A 32-bit hash of `key` that is equal in every process and every run."""
    kind = type(key)
    if kind is int or kind is bool:
        return ((int(key) * _GOLDEN) & _MASK64) >> 32
    if kind is str:
        return zlib.crc32(key.encode("utf-8"))
    if kind is bytes:
        return zlib.crc32(key)
    if kind is float:
        return zlib.crc32(struct.pack("<d", key))
    if kind is tuple:
        h = 0x345678
        for part in key:
            h = ((h ^ stable_hash(part)) * 1000003) & 0xFFFFFFFF
        return h
    if key is None:
        return 0
    try:
        return zlib.crc32(pickle.dumps(key, protocol=4))
    except Exception as err:
        raise TypeError(
            f"cannot partition by a key of type {kind.__name__}: key_by needs keys that are int, str, bytes, "
            "float, tuples of these, or picklable values"
        ) from err


def key_group_for(key: Any, max_parallelism: int) -> int:
    return stable_hash(key) % max_parallelism


def subtask_for_key_group(key_group: int, max_parallelism: int, parallelism: int) -> int:
    return key_group * parallelism // max_parallelism


def key_group_range(subtask: int, max_parallelism: int, parallelism: int) -> range:
    """The contiguous key groups that `subtask` owns: the inverse of `subtask_for_key_group`."""
    start = (subtask * max_parallelism + parallelism - 1) // parallelism
    end = ((subtask + 1) * max_parallelism + parallelism - 1) // parallelism
    return range(start, end)


def channel_table(max_parallelism: int, parallelism: int) -> list[int]:
    """Key group -> subtask index, precomputed so the hot path does one list lookup."""
    return [subtask_for_key_group(g, max_parallelism, parallelism) for g in range(max_parallelism)]
