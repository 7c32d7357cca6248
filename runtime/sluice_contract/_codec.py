"""One declarative JSON codec for the contract's documents.

A document is a frozen dataclass deriving from `Document`: its fields and their types are the whole
description. `to_json` writes the fields under their camelCase names; `from_json` reads a document back
checking every field against its type, and a wrong one raises `DocumentError` naming it
(`latest.completionTime must be a whole number or null, not "soon"`). A reader ignores fields it does
not know (a newer writer may add some) unless the class refuses them.

Types a field may have: str, int, float, bool, a StrEnum, another Document, `tuple[T, ...]` of those,
and `T | None`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import StrEnum
from typing import Any, ClassVar, Self


class DocumentError(ValueError):
    """A document read from the other side does not have the shape the contract gives it."""


class Document:
    """A JSON document of the contract; subclasses are frozen dataclasses."""

    refuse_unknown: ClassVar[bool] = False
    """Whether a field the class does not declare is an error, rather than ignored."""
    omitted_when_none: ClassVar[frozenset[str]] = frozenset()
    """Fields left out of `to_json` while they are None (present only in some states)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in _fields(type(self)):
            value = getattr(self, spec.name)
            if value is None and spec.name in self.omitted_when_none:
                continue
            out[spec.json_name] = _encode(value)
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        if not isinstance(data, dict):
            raise DocumentError(f"{where or cls.__name__} must be an object, not {_kind(data)}")
        specs = _fields(cls)
        if cls.refuse_unknown and (unknown := sorted(set(data) - {s.json_name for s in specs})):
            raise DocumentError(f"{_at(where, unknown[0])} is not a field of {cls.__name__}")
        values: dict[str, Any] = {}
        for spec in specs:
            at = _at(where, spec.json_name)
            if spec.json_name in data:
                values[spec.name] = _decode(spec.type, data[spec.json_name], at)
            elif not spec.optional:
                raise DocumentError(f"{at} is missing")
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    json_name: str
    type: Any
    optional: bool
    """Has a default: may be left out of what is read."""


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = _described(cls)
    return found


def _described(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        _Field(
            f.name,
            f.metadata.get("json", _camel(f.name)),
            hints[f.name],
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _encode(value: Any) -> Any:
    if isinstance(value, Document):
        return value.to_json()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(kind: Any, value: Any, at: str) -> Any:
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        members = [m for m in typing.get_args(kind) if m is not type(None)]
        if value is None:
            return None
        if len(members) != 1:
            raise TypeError(f"{at}: only `T | None` unions are supported, not {kind}")
        return _decode(members[0], value, at)
    if origin is tuple:
        item = typing.get_args(kind)[0]
        if not isinstance(value, list):
            raise DocumentError(f"{at} must be a list, not {_kind(value)}")
        return tuple(_decode(item, v, f"{at}[{i}]") for i, v in enumerate(value))
    if kind is Any:
        return value
    if isinstance(kind, type) and issubclass(kind, Document):
        return kind.from_json(value, at)
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        if value not in {m.value for m in kind}:
            allowed = ", ".join(repr(m.value) for m in kind)
            raise DocumentError(f"{at} must be one of {allowed}, not {_shown(value)}")
        return kind(value)
    return _scalar(kind, value, at)


_SCALARS: dict[type, str] = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}


def _scalar(kind: type, value: Any, at: str) -> Any:
    is_bool = isinstance(value, bool)
    ok = (
        (kind is bool and is_bool)
        or (kind is int and isinstance(value, int) and not is_bool)
        or (kind is float and isinstance(value, int | float) and not is_bool)
        or (kind is str and isinstance(value, str))
    )
    if kind not in _SCALARS:
        raise TypeError(f"{at}: a field of type {kind} cannot be read")
    if not ok:
        raise DocumentError(f"{at} must be {_SCALARS[kind]}, not {_shown(value)}")
    return float(value) if kind is float else value


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
