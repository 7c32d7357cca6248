"""Keys map to key groups, key groups map to subtasks.

The number of key groups is the operator's max parallelism and never changes for a job, so keyed state
snapshotted per key group can be handed to any later parallelism (rescaling on restore). The hash must
be the same in every process: Python's `hash()` of `str` is salted per process, so it cannot be used.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import struct
import zlib
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_PARALLELISM = 128
MASK64 = (1 << 64) - 1
INT_HASH_FACTOR = 0x9E3779B97F4A7C15


def stable_hash(key: Any) -> int:
    """A 32-bit hash of `key`, equal in every process and every run, and equal for keys that are equal.

    Equality follows Python's: `1 == 1.0 == True` hash alike, as do `0.0` and `-0.0`; a frozenset hashes
    independently of its iteration order. Types without a canonical form are refused.
    """
    kind = type(key)
    # int and str first and inline: they are most keys, and this runs once per record.
    if kind is int:
        return ((key * INT_HASH_FACTOR) & MASK64) >> 32  # type: ignore[no-any-return]
    if kind is str:
        return zlib.crc32(key.encode("utf-8"))
    # By exact type: a subclass (a namedtuple, an IntEnum) is not hashed as its base.
    hash_builtin = _BUILTIN_HASHES.get(kind)
    if hash_builtin is not None:
        return hash_builtin(key)
    return _hash_user_type(key)


def _hash_tuple(key: tuple[Any, ...]) -> int:
    h = 0x345678
    for part in key:
        h = ((h ^ stable_hash(part)) * 1000003) & 0xFFFFFFFF
    return h


def _hash_float(key: float) -> int:
    if key.is_integer():
        return stable_hash(int(key))
    if math.isnan(key):
        return 0x7FC00000
    return zlib.crc32(struct.pack("<d", key))


def _hash_frozenset(key: frozenset[Any]) -> int:
    # A sum does not depend on the iteration order, which follows the per-process salted str hash.
    mixed = 0
    for part in key:
        mixed = (mixed + ((stable_hash(part) * 0x9E3779B1) & 0xFFFFFFFF)) & 0xFFFFFFFF
    return mixed ^ 0x5BD1E995


_BUILTIN_HASHES: dict[type, Callable[[Any], int]] = {
    tuple: _hash_tuple,
    bool: lambda key: stable_hash(int(key)),
    float: _hash_float,
    bytes: zlib.crc32,
    type(None): lambda key: 0,
    frozenset: _hash_frozenset,
}


def _hash_user_type(key: Any) -> int:
    """Enum members and dataclass instances hash as their class's name and their value or fields."""
    kind = type(key)
    if isinstance(key, enum.Enum):
        return stable_hash((kind.__qualname__, key.name))
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        fields = tuple(getattr(key, f.name) for f in dataclasses.fields(key) if f.compare)
        return stable_hash((kind.__qualname__, fields))
    raise TypeError(
        f"cannot partition by a key of type {kind.__name__}: key_by needs keys that are int, float, str, "
        "bytes, bool, None, or tuples, frozensets, enums or dataclasses of these (their hash must be the "
        "same in every process)"
    )


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
