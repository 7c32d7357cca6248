"""The codec's shapes beyond plain fields: minimums, fixed-length arrays, objects with typed keys,
numbers kept as sent, fields that must be sent though they have a default. Input is hostile: what a
reader builds is only ever the declared types."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from sluice_contract.codec import Document, DocumentError, is_empty, is_none, wire


@dataclass(frozen=True)
class _Shapes(Document):
    pairs: tuple[tuple[int, int], ...] = field(metadata=wire(minimum=0))
    where: Mapping[tuple[int, int], int] = field(metadata=wire(minimum=0))
    addresses: Mapping[int, tuple[str, int]]
    figures: Mapping[str, int | float | None]
    sent: int = field(default=0, metadata=wire(required=True))
    note: str | None = field(default=None, metadata=wire(name="remark", omit_when=is_none))


GOOD: dict[str, Any] = {
    "pairs": [[0, 1], [2, 3]],
    "where": {"0:1": 4},
    "addresses": {"7": ["h", 80]},
    "figures": {"n": 3, "ratio": 0.5, "lag": None},
    "sent": 1,
}


def test_every_shape_reads_as_its_declared_type_and_writes_back_as_it_came() -> None:
    read = _Shapes.from_json(GOOD)
    assert read == _Shapes(
        ((0, 1), (2, 3)), {(0, 1): 4}, {7: ("h", 80)}, {"n": 3, "ratio": 0.5, "lag": None}, 1
    )
    # A whole number stays one (the wire form of a figure does not change), a fraction stays a fraction.
    assert type(read.figures["n"]) is int and type(read.figures["ratio"]) is float
    assert read.to_json() == GOOD
    noted = _Shapes.from_json({**GOOD, "remark": "hi"})
    assert noted.note == "hi" and noted.to_json()["remark"] == "hi" and "note" not in noted.to_json()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"pairs": [[0, -1]]}, "_Shapes: 'pairs[0][1]' must be at least 0, not a number (-1)"),
        ({"pairs": [[0, True]]}, "_Shapes: 'pairs[0][1]' must be an integer, not a boolean (true)"),
        ({"pairs": [[0, 1, 2]]}, "_Shapes: 'pairs[0]' must be an array of 2 items, not an array ([0, 1, 2])"),
        ({"pairs": [{"0": 1}]}, "'pairs[0]' must be an array of 2 items, not an object"),
        ({"where": {"0:1": -2}}, "_Shapes: 'where[0:1]' must be at least 0"),
        ({"where": {"0": 1}}, "_Shapes: 'where' must have keys like '0:0', not \"0\""),
        ({"where": {"0:-1": 1}}, "'where' must have keys like '0:0'"),
        ({"where": {"\u0661:1": 1}}, "'where' must have keys like '0:0'"),
        ({"where": {"1" * 5000 + ":1": 1}}, "'where' must have keys like '0:0'"),
        ({"where": [[0, 1]]}, "_Shapes: 'where' must be an object, not an array"),
        ({"addresses": {"x": ["h", 80]}}, "'addresses' must have keys like '0', not \"x\""),
        ({"addresses": {"7": ["h", "80"]}}, "'addresses[7][1]' must be an integer, not a string"),
        ({"addresses": {"7": ["h"]}}, "'addresses[7]' must be an array of 2 items"),
        ({"figures": {"n": "3"}}, "'figures[n]' must be a finite number or null, not a string"),
        (
            {"figures": {"n": float("nan")}},
            "'figures[n]' must be a finite number or null, not a number (NaN)",
        ),
        ({"figures": {"n": False}}, "'figures[n]' must be a finite number or null, not a boolean"),
        ({"sent": None}, "_Shapes: 'sent' must be an integer, not null"),
    ],
)
def test_a_wrong_shape_is_refused_with_the_field_named(change: dict[str, Any], named: str) -> None:
    with pytest.raises(DocumentError) as caught:
        _Shapes.from_json({**GOOD, **change})
    assert named in str(caught.value)


def test_a_field_with_a_default_that_must_be_sent_is_refused_missing() -> None:
    missing = {k: v for k, v in GOOD.items() if k != "sent"}
    with pytest.raises(DocumentError, match=r"^_Shapes lacks the field 'sent'$"):
        _Shapes.from_json(missing)


def test_a_reader_builds_only_the_declared_types_whatever_arrives() -> None:
    hostile = {**GOOD, "pairs": [[0, 1]], "__class__": "os.system", "extra": {"py/object": "os.system"}}
    read = _Shapes.from_json(hostile)
    assert type(read) is _Shapes and not hasattr(read, "extra")
    assert type(read.where) is dict and all(type(k) is tuple and type(k[0]) is int for k in read.where)
    assert all(type(v) is tuple for v in read.addresses.values())


def _even(value: Any, where: str, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value % 2:
        raise DocumentError(f"{where}: {name!r} must be an even integer")
    return value


@dataclass(frozen=True)
class _Stored(Document):
    kept: str | None = field(metadata=wire(absent_is_null=True))
    even: int | None = field(metadata=wire(absent_is_null=True, read=_even))
    names: tuple[str, ...] = field(default=(), metadata=wire(omit_when=is_empty))
    origin: str = field(default="", metadata=wire(skip=True))


def test_a_missing_field_may_read_as_null_though_the_class_has_no_default() -> None:
    assert _Stored.from_json({}) == _Stored(None, None)
    assert _Stored.from_json({"kept": "k", "even": 4}) == _Stored("k", 4)
    with pytest.raises(DocumentError, match=r"^_Stored: 'kept' must be a string or null, not a number"):
        _Stored.from_json({"kept": 3})


def test_a_fields_own_reader_sees_its_values_and_never_its_null() -> None:
    assert _Stored.from_json({"even": None}).even is None
    with pytest.raises(DocumentError, match=r"^_Stored: 'even' must be an even integer$"):
        _Stored.from_json({"even": 3})


def test_an_empty_field_is_left_out_and_reads_back_as_its_default() -> None:
    assert _Stored(None, None).to_json() == {"kept": None, "even": None}
    assert _Stored(None, None, ("a",)).to_json()["names"] == ["a"]
    assert _Stored.from_json(_Stored(None, None).to_json()).names == ()


def test_a_field_outside_the_document_is_neither_written_nor_read() -> None:
    stored = _Stored("k", 2, origin="file:///there")
    assert "origin" not in stored.to_json()
    # Sent anyway (a hostile or confused writer), it is ignored: only the reader's caller sets it.
    assert _Stored.from_json({**stored.to_json(), "origin": "file:///elsewhere"}).origin == ""


def test_a_declaration_the_codec_cannot_honour_is_refused_when_first_used() -> None:
    @dataclass(frozen=True)
    class Unread(Document):
        origin: str = field(metadata=wire(skip=True))

    @dataclass(frozen=True)
    class NotNullable(Document):
        count: int = field(metadata=wire(absent_is_null=True))

    with pytest.raises(TypeError, match="outside the document needs a default"):
        Unread.from_json({})
    with pytest.raises(TypeError, match=r"only a `T \| None` field"):
        NotNullable.from_json({})


@dataclass(frozen=True)
class _Counts(Document):
    records_in: int = 0
    records_out: int | None = None


@dataclass(frozen=True)
class _Figures(Document):
    index: int
    counts: _Counts = field(metadata=wire(inline=True))
    ratio: float | None = None


def test_an_inline_documents_fields_stand_in_the_enclosing_object() -> None:
    figures = _Figures(3, _Counts(7, None), 0.5)
    assert figures.to_json() == {"index": 3, "recordsIn": 7, "recordsOut": None, "ratio": 0.5}
    assert list(figures.to_json()) == ["index", "recordsIn", "recordsOut", "ratio"]
    assert _Figures.from_json(figures.to_json()) == figures
    with pytest.raises(DocumentError, match=r"^_Figures: 'recordsIn' must be an integer, not a string"):
        _Figures.from_json({"index": 3, "recordsIn": "7"})


def test_only_a_document_can_stand_inline() -> None:
    @dataclass(frozen=True)
    class Flat(Document):
        count: int = field(metadata=wire(inline=True))

    with pytest.raises(TypeError, match="only a Document's fields can stand inline"):
        Flat(1).to_json()
