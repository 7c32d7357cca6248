"""The key hash decides which key group, and so which subtask and which checkpoint file, holds a key's
state: a checkpoint written by one version must restore on the next. So the hash of every kind of key
is pinned here, computed once on the code that wrote the first checkpoints. Never regenerate them: a
test failing here means a change that would strand keyed state in existing checkpoints."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import namedtuple
from typing import Any

import pytest

from sluice.state.keygroups import stable_hash


# The enum and dataclass hashes include the class's __qualname__: these names are part of the pins.
class Color(enum.Enum):
    RED = 1
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1


class Region(enum.StrEnum):
    EU = "eu"


@dataclasses.dataclass(frozen=True)
class Account:
    bank: str
    owner: str
    note: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True)
class Wrapper:
    color: Color
    inner: Account


KEYS: dict[str, Any] = {
    "int zero": 0,
    "int one": 1,
    "int minus one": -1,
    "int minus seven": -7,
    "int 2**31": 2**31,
    "int 2**40+3": 2**40 + 3,
    "int 2**64+5": 2**64 + 5,
    "int -2**70": -(2**70),
    "str empty": "",
    "str a": "a",
    "str user-42": "user-42",
    "str unicode": "ünïcödé ✓",
    "tuple empty": (),
    "tuple str int": ("a", 1),
    "tuple nested": ("nested", ("x", 2.5), b"raw", None),
    "tuple of one": (7,),
    "bool true": True,
    "bool false": False,
    "float integral": 3.0,
    "float zero": 0.0,
    "float negative zero": -0.0,
    "float fraction": 1.25,
    "float tiny negative fraction": -1e-300,
    "float nan": math.nan,
    "float inf": math.inf,
    "float minus inf": -math.inf,
    "float huge integral": 2.0**70,
    "float big integral": 1e15,
    "float negative fraction": -1.5,
    "bytes empty": b"",
    "bytes raw": b"\x00\xff",
    "none": None,
    "frozenset empty": frozenset(),
    "frozenset str": frozenset({"a", "b", "c", "d", "e"}),
    "frozenset mixed": frozenset({1, "x", (2, 3), None}),
    "tuple with frozenset": ("k", frozenset({1, 2})),
    "enum int value": Color.RED,
    "enum str value": Color.GREEN,
    "int enum": Level.LOW,
    "str enum": Region.EU,
    "dataclass": Account("bank", "ann", note="not compared, not hashed"),
    "dataclass nested": Wrapper(Color.RED, Account("b", "o")),
    "frozenset of dataclasses": frozenset({Account("a", "b"), Account("c", "d")}),
    "tuple of enums": (Level.LOW, Region.EU, Color.GREEN),
}

PINNED: dict[str, int] = {
    "int zero": 0x00000000,
    "int one": 0x9E3779B9,
    "int minus one": 0x61C88646,
    "int minus seven": 0xAC7BABED,
    "int 2**31": 0xBFA53E0A,
    "int 2**40+3": 0x2522822C,
    "int 2**64+5": 0x1715609F,
    "int -2**70": 0x00000000,
    "str empty": 0x00000000,
    "str a": 0xE8B7BE43,
    "str user-42": 0x7D06B873,
    "str unicode": 0x713F406E,
    "tuple empty": 0x00345678,
    "tuple str int": 0x7F605058,
    "tuple nested": 0x5C8F75D0,
    "tuple of one": 0x6BE5F5BE,
    "bool true": 0x9E3779B9,
    "bool false": 0x00000000,
    "float integral": 0xDAA66D2C,
    "float zero": 0x00000000,
    "float negative zero": 0x00000000,
    "float fraction": 0xA394D6ED,
    "float tiny negative fraction": 0x13356DF6,
    "float nan": 0x7FC00000,
    "float inf": 0xB1245279,
    "float minus inf": 0x5C9CD159,
    "float huge integral": 0x00000000,
    "float big integral": 0xD9208E14,
    "float negative fraction": 0xE2991AC1,
    "bytes empty": 0x00000000,
    "bytes raw": 0x6CDBFD72,
    "none": 0x00000000,
    "frozenset empty": 0x5BD1E995,
    "frozenset str": 0x0A7CE214,
    "frozenset mixed": 0x4D29A4A7,
    "tuple with frozenset": 0x723DB9C3,
    "enum int value": 0x3440AF6E,
    "enum str value": 0xE1A625CA,
    "int enum": 0xFA7D35F2,
    "str enum": 0x89A8AC44,
    "dataclass": 0xB11F365D,
    "dataclass nested": 0xB3785ABF,
    "frozenset of dataclasses": 0x9D1C129C,
    "tuple of enums": 0xA55B1ECC,
}


def test_every_key_has_a_pinned_hash() -> None:
    assert KEYS.keys() == PINNED.keys()


@pytest.mark.parametrize("name", list(KEYS))
def test_key_hash_is_the_pinned_one(name: str) -> None:
    assert stable_hash(KEYS[name]) == PINNED[name], f"{stable_hash(KEYS[name]):#010x}"


_Point = namedtuple("_Point", "x y")


@pytest.mark.parametrize(
    "key",
    [[1, 2], {"a": 1}, {1, 2}, bytearray(b"x"), _Point(1, 2), Account, object()],
    ids=["list", "dict", "set", "bytearray", "namedtuple", "dataclass-class", "object"],
)
def test_keys_without_a_canonical_form_stay_refused(key: Any) -> None:
    # Accepting one of these later would be fine; hashing it differently from before would not be:
    # none of them can be in a checkpoint today.
    with pytest.raises(TypeError, match="cannot partition by a key of type"):
        stable_hash(key)
