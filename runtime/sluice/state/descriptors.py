"""Declarations of the state an operator or user function uses.

User code reaches state only through the handles these descriptors give out (`RuntimeContext.get_state`
and friends); the runtime owns the storage, snapshots it per key group and redistributes it on restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ValueStateDescriptor(Generic[T]):
    name: str
    default: T | None = None


@dataclass(frozen=True)
class ListStateDescriptor(Generic[T]):
    name: str


@dataclass(frozen=True)
class MapStateDescriptor:
    name: str


StateDescriptor = ValueStateDescriptor[Any] | ListStateDescriptor[Any] | MapStateDescriptor
