"""One declarative JSON codec for the contract's documents and control messages.

A document is a frozen dataclass deriving from `Document`: its fields and their types are the whole
description. `to_json` writes the fields under their camelCase names; `from_json` reads a document back
checking every field against its type, and a wrong one raises `DocumentError` naming the document and
the field (`JobSummary latest: 'completionTime' must be an integer or null, not a string ("soon")`).
A reader ignores fields it does not know (a newer writer may add some) unless the class refuses them.
What comes in may be hostile: a reader builds nothing but the declared types.

Types a field may have: str, int, float, bool, `int | float` (a number kept as sent), a StrEnum,
another Document, `tuple[T, ...]`, fixed-length tuples such as `tuple[str, int]`, `Mapping[K, V]`
(a JSON object; K is str, int, or a tuple of ints written `"0:1"`), and `T | None`. `wire(...)` adds
what a type cannot say: a JSON name, a minimum for whole numbers, whether a field with a default must
still be sent, whether a missing `T | None` field reads as null, when it is left out, whether it is
part of the document at all or has its fields inline in the enclosing object, and, for the few fields
whose check is not a type, a reader of its own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, ClassVar, Self

Reader = Callable[[Any, str, str], Any]
"""A field's own reader: `(value, where, name)` -> the field, or DocumentError (see `wrong`)."""
Writer = Callable[[Any], Any]


class DocumentError(ValueError):
    """A document read from the other side (or from storage) does not have the shape its format gives it."""


def wire(
    *,
    name: str | None = None,
    minimum: int | None = None,
    required: bool = False,
    absent_is_null: bool = False,
    omit_when: Callable[[Any], bool] | None = None,
    skip: bool = False,
    inline: bool = False,
    read: Reader | None = None,
    write: Writer | None = None,
) -> dict[str, Any]:
    """The metadata of a field, for what its type does not say: `field(metadata=wire(minimum=0))`.

    name: its JSON name (else the camelCase of its own); minimum: the least value of every whole number
    in it (pairs, mapping values included); required: a reader refuses it missing though the class has a
    default; absent_is_null: a reader takes a `T | None` field that is missing as null, though the class
    has no default for it; omit_when: `to_json` leaves it out when this holds of its value; skip: not
    part of the document (neither written nor read: it keeps its default, say where the document was
    read from); inline: a Document whose fields stand in the enclosing object itself, beside the
    others (one JSON object made of two parts); read/write: its own conversion, for a field whose check
    is more than a type (a file name, a digest). A `T | None` field's null is null: its own reader sees
    only values.
    """
    metadata: dict[str, Any] = {"json": name, "minimum": minimum, "required": required}
    metadata |= {"absent_is_null": absent_is_null, "omit_when": omit_when, "skip": skip, "inline": inline}
    metadata |= {"read": read, "write": write}
    return {k: v for k, v in metadata.items() if v is not None and v is not False}


def is_none(value: Any) -> bool:
    """For `wire(omit_when=is_none)`: a field sent only while it has a value."""
    return value is None


def is_empty(value: Any) -> bool:
    """For `wire(omit_when=is_empty)`: an array or object sent only while it has items."""
    return len(value) == 0


class Document:
    """A JSON document of the contract; subclasses are frozen dataclasses."""

    refuse_unknown: ClassVar[bool] = False
    """Whether a field the class does not declare is an error, rather than ignored."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in _fields(type(self)):
            value = getattr(self, spec.name)
            if spec.omit_when is not None and spec.omit_when(value):
                continue
            if spec.inline:
                out |= value.to_json()
                continue
            out[spec.json_name] = spec.write(value) if spec.write is not None else _encode(value)
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        """Reads a document; `where` names it in errors ("control message 'trigger'")."""
        where = where or cls.__name__
        if not isinstance(data, dict):
            raise _not_an_object(where, data)
        specs = _fields(cls)
        if cls.refuse_unknown and (unknown := sorted(set(data) - {s.json_name for s in specs})):
            raise DocumentError(f"{where}: {unknown[0]!r} is not a field of {cls.__name__}")
        values: dict[str, Any] = {}
        for spec in specs:
            if spec.inline:
                values[spec.name] = spec.type.from_json(data, where)
            elif spec.json_name in data:
                value = data[spec.json_name]
                if spec.read is not None and not (value is None and spec.nullable):
                    values[spec.name] = spec.read(value, where, spec.json_name)
                else:
                    values[spec.name] = check(spec.type, value, where, spec.json_name, spec.minimum)
            elif spec.absent_is_null:
                values[spec.name] = None
            elif not spec.optional:
                raise DocumentError(f"{where} lacks the field {spec.json_name!r}")
        return cls(**values)


def decode_object(payload: bytes | str, where: str) -> dict[str, Any]:
    """JSON text that must be one object (a stored document): decoded, its fields not yet read."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise DocumentError(f"{where} is not JSON: {str(err)[:200]}") from None
    if not isinstance(value, dict):
        raise _not_an_object(where, value)
    return value


def _not_an_object(where: str, value: Any) -> DocumentError:
    return DocumentError(f"{where} must be a JSON object, not {_kind(value)} ({_shown(value)})")


def wrong(where: str, name: str, value: Any, expected: str) -> DocumentError:
    """The error for a field that holds `value` where it should hold `expected`."""
    return DocumentError(f"{where}: {name!r} must be {expected}, not {_kind(value)} ({_shown(value)})")


def check(kind: Any, value: Any, where: str, name: str, minimum: int | None = None) -> Any:
    """`value` read as the type `kind`; `name` is the field (`tasks[2]` for an item of one)."""
    if kind in _SCALARS:  # most values: spared the look at the type's origin
        return _scalar(kind, value, where, name, minimum, "")
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        members = [m for m in typing.get_args(kind) if m is not type(None)]
        if members == [int, float]:
            return _number(value, where, name, nullable=len(members) < len(typing.get_args(kind)))
        if len(members) != 1:
            raise TypeError(
                f"{where} {name}: only `T | None` and `int | float` unions can be read, not {kind}"
            )
        return None if value is None else _one(members[0], value, where, name, minimum, " or null")
    return _one(kind, value, where, name, minimum, "")


def _one(kind: Any, value: Any, where: str, name: str, minimum: int | None, or_null: str) -> Any:
    if kind in _SCALARS:
        return _scalar(kind, value, where, name, minimum, or_null)
    origin = typing.get_origin(kind)
    if origin is tuple:
        return _tuple(typing.get_args(kind), value, where, name, minimum, or_null)
    if origin in (Mapping, dict):
        return _mapping(typing.get_args(kind), value, where, name, minimum, or_null)
    if isinstance(kind, type) and issubclass(kind, Document):
        if not isinstance(value, dict):
            raise wrong(where, name, value, "an object" + or_null)
        return kind.from_json(value, f"{where} {name}")
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        if not isinstance(value, str) or value not in {m.value for m in kind}:
            raise wrong(where, name, value, "one of " + ", ".join(repr(m.value) for m in kind) + or_null)
        return kind(value)
    raise TypeError(f"{where} {name}: a field of type {kind} cannot be read")


def _scalar(kind: type, value: Any, where: str, name: str, minimum: int | None, or_null: str) -> Any:
    is_bool = isinstance(value, bool)
    ok = (
        (kind is bool and is_bool)
        or (kind is int and isinstance(value, int) and not is_bool)
        or (kind is float and isinstance(value, int | float) and not is_bool)
        or (kind is str and isinstance(value, str))
    )
    if not ok:
        raise wrong(where, name, value, _SCALARS[kind] + or_null)
    if kind is int and minimum is not None and value < minimum:
        raise wrong(where, name, value, f"at least {minimum}")
    return float(value) if kind is float else value


_SCALARS: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
}


def _number(value: Any, where: str, name: str, nullable: bool) -> int | float | None:
    if value is None and nullable:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    raise wrong(where, name, value, "a finite number" + (" or null" if nullable else ""))


def _tuple(
    items: tuple[Any, ...], value: Any, where: str, name: str, minimum: int | None, or_null: str
) -> tuple[Any, ...]:
    repeated = len(items) == 2 and items[1] is Ellipsis
    if not isinstance(value, list) or not (repeated or len(value) == len(items)):
        raise wrong(
            where, name, value, ("an array" if repeated else f"an array of {len(items)} items") + or_null
        )
    if repeated:
        return tuple(check(items[0], v, where, f"{name}[{i}]", minimum) for i, v in enumerate(value))
    return tuple(
        check(k, v, where, f"{name}[{i}]", minimum) for i, (k, v) in enumerate(zip(items, value, strict=True))
    )


def _mapping(
    kinds: tuple[Any, ...], value: Any, where: str, name: str, minimum: int | None, or_null: str
) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise wrong(where, name, value, "an object" + or_null)
    key_kind, value_kind = kinds
    return {
        _key(key_kind, key, where, name): check(value_kind, item, where, f"{name}[{key}]", minimum)
        for key, item in value.items()
    }


def _key(kind: Any, key: str, where: str, name: str) -> Any:
    if kind is str:
        return key
    parts = key.split(":") if typing.get_origin(kind) is tuple else [key]
    arity = len(typing.get_args(kind)) if typing.get_origin(kind) is tuple else 1
    # ASCII digits only: int() also reads other scripts' digits, and a bounded length keeps it cheap.
    if len(parts) != arity or not all(p.isascii() and p.isdecimal() and len(p) <= 18 for p in parts):
        form = ":".join(["0"] * arity)
        raise DocumentError(f"{where}: {name!r} must have keys like {form!r}, not {_shown(key)}")
    numbers = tuple(int(p) for p in parts)
    return numbers if arity > 1 or typing.get_origin(kind) is tuple else numbers[0]


def _key_text(key: Any) -> str:
    return ":".join(str(k) for k in key) if isinstance(key, tuple) else str(key)


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    json_name: str
    type: Any
    optional: bool
    """May be left out of what is read (it has a default, and is not `required`)."""
    absent_is_null: bool
    inline: bool
    nullable: bool
    """Its type is `T | None`."""
    minimum: int | None
    omit_when: Callable[[Any], bool] | None
    read: Reader | None
    write: Writer | None


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = _described(cls)
    return found


def _described(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        meta = f.metadata
        if meta.get("skip"):
            if not has_default:
                raise TypeError(f"{cls.__name__}.{f.name}: a field outside the document needs a default")
            continue
        nullable = type(None) in typing.get_args(hints[f.name])
        if meta.get("absent_is_null") and not nullable:
            raise TypeError(f"{cls.__name__}.{f.name}: only a `T | None` field can read as null when missing")
        inline = meta.get("inline", False)
        if inline and not (isinstance(hints[f.name], type) and issubclass(hints[f.name], Document)):
            raise TypeError(f"{cls.__name__}.{f.name}: only a Document's fields can stand inline")
        specs.append(
            _Field(
                f.name,
                meta.get("json") or _camel(f.name),
                hints[f.name],
                has_default and not meta.get("required", False),
                meta.get("absent_is_null", False),
                inline,
                nullable,
                meta.get("minimum"),
                meta.get("omit_when"),
                meta.get("read"),
                meta.get("write"),
            )
        )
    return tuple(specs)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _encode(value: Any) -> Any:
    if type(value) in _PLAIN:  # most values: spared the checks below (Mapping's is an ABC's)
        return value
    if isinstance(value, Document):
        return value.to_json()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {_key_text(k): _encode(v) for k, v in value.items()}
    return value


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
