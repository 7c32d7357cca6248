"""Declarations of the state an operator or user function uses.

User code reaches state only through the handles these descriptors give out (`RuntimeContext.get_state`
and friends); the runtime owns the storage, snapshots it per key group and redistributes it on restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_UPDATES = ("on_write", "on_read_and_write")


@dataclass(frozen=True)
class StateTtl:
    """Keyed state expires `millis` of processing time after it was written (`update="on_write"`) or
    last read or written (`"on_read_and_write"`); an expired value is never returned (`sluice.state.ttl`)."""

    millis: int
    update: str = "on_write"

    def __post_init__(self) -> None:
        if not isinstance(self.millis, int) or isinstance(self.millis, bool) or self.millis <= 0:
            raise ValueError(f"StateTtl needs a positive whole number of milliseconds, got {self.millis!r}")
        if self.update not in _UPDATES:
            raise ValueError(
                f'StateTtl update must be "on_write" or "on_read_and_write", got {self.update!r}'
            )


def _check_ttl(ttl: object, name: str) -> None:
    if ttl is not None and not isinstance(ttl, StateTtl):
        raise TypeError(f"state {name!r}: ttl must be a sluice.StateTtl or None, got {ttl!r}")


@dataclass(frozen=True)
class ValueStateDescriptor(Generic[T]):
    name: str
    default: T | None = None
    ttl: StateTtl | None = None

    def __post_init__(self) -> None:
        _check_ttl(self.ttl, self.name)


@dataclass(frozen=True)
class ListStateDescriptor(Generic[T]):
    name: str
    ttl: StateTtl | None = None

    def __post_init__(self) -> None:
        _check_ttl(self.ttl, self.name)


@dataclass(frozen=True)
class MapStateDescriptor:
    name: str
    ttl: StateTtl | None = None

    def __post_init__(self) -> None:
        _check_ttl(self.ttl, self.name)


StateDescriptor = ValueStateDescriptor[Any] | ListStateDescriptor[Any] | MapStateDescriptor
