"""Reading a JSON document that came from storage or the network, field by field, as hostile input.

`Fields` wraps one decoded object and says where it came from; each getter returns the field with the
type its format promises, or raises `FormatError` naming the document, the field, what it holds and
what it should hold. No field is trusted because of the document's name.
"""

from __future__ import annotations

import json
import math
from enum import Enum
from typing import Any, TypeVar

from sluice_contract.codec import DocumentError

E = TypeVar("E", bound=Enum)
_MISSING: Any = object()

FormatError = DocumentError
"""A stored or received document that does not match its format: one error, whether the document is
read field by field here or by the contract's declarative codec."""


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


class Fields:
    """One JSON object of a document; `where` names it in errors ("_metadata operators[2]")."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise FormatError(f"{where} must be a JSON object, not {_kind(value)} ({_shown(value)})")
        self.data: dict[str, Any] = value
        self.where = where

    def _get(self, name: str, default: Any) -> Any:
        if name in self.data:
            return self.data[name]
        if default is _MISSING:
            raise FormatError(f"{self.where} lacks the field {name!r}")
        return default

    def _wrong(self, name: str, value: Any, expected: str) -> FormatError:
        return FormatError(f"{self.where}: {name!r} must be {expected}, not {_kind(value)} ({_shown(value)})")

    def integer(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int:
        value = self._get(name, _MISSING if default is None else default)
        # bool is an int in Python, never in these formats.
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._wrong(name, value, "an integer")
        if minimum is not None and value < minimum:
            raise self._wrong(name, value, f"at least {minimum}")
        return value

    def number(self, name: str, default: float | None = None) -> float:
        value = self._get(name, _MISSING if default is None else default)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok:
            raise self._wrong(name, value, "a finite number")
        return float(value)

    def text(self, name: str) -> str:
        value = self._get(name, _MISSING)
        if not isinstance(value, str):
            raise self._wrong(name, value, "a string")
        return value

    def optional_text(self, name: str) -> str | None:
        """A string or null; a missing field is null."""
        value = self._get(name, None)
        if value is not None and not isinstance(value, str):
            raise self._wrong(name, value, "a string or null")
        return value

    def flag(self, name: str, default: bool | None = None) -> bool:
        value = self._get(name, _MISSING if default is None else default)
        if not isinstance(value, bool):
            raise self._wrong(name, value, "true or false")
        return value

    def array(self, name: str, default: list[Any] | None = None) -> list[Any]:
        value = self._get(name, _MISSING if default is None else default)
        if not isinstance(value, list):
            raise self._wrong(name, value, "an array")
        return value

    def objects(self, name: str, default: list[Any] | None = None) -> list[Fields]:
        """An array of objects, each wrapped with its position in errors."""
        return [Fields(item, f"{self.where} {name}[{i}]") for i, item in enumerate(self.array(name, default))]

    def integers(self, name: str, default: list[Any] | None = None) -> list[int]:
        values = self.array(name, default)
        for value in values:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self._wrong(name, values, "an array of non-negative integers")
        return values

    def choice(self, name: str, choices: type[E], default: E | None = None) -> E:
        """A string that must be one of an enum's values; returned as the member."""
        value = self._get(name, _MISSING if default is None else default)
        for member in choices:
            if isinstance(value, str) and value == member.value:
                return member
        allowed = ", ".join(repr(m.value) for m in choices)
        raise self._wrong(name, value, f"one of {allowed}")


def parse_object(payload: bytes | str, where: str) -> Fields:
    """Decodes a whole document that must be one JSON object."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise FormatError(f"{where} is not JSON: {str(err)[:200]}") from None
    return Fields(value, where)
