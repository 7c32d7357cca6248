"""Savepoint request bodies: wrong types, unknown fields and stop modes, and targets outside the allowed
prefixes are refused with a message; the target that passes is the one that was checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice._states import StopMode
from sluice.coordinator._rest_input import (
    BadRequest,
    SavepointTargets,
    cancel_request,
    savepoint_request,
)
from sluice_contract.rest import SavepointTrigger

TARGETS = SavepointTargets(["file:///data/sp", "/data/chk/", None, "s3://bucket/savepoints"])


def test_the_prefixes_are_normalized() -> None:
    assert TARGETS.prefixes == ["file:///data/chk", "file:///data/sp", "s3://bucket/savepoints"]


@pytest.mark.parametrize(
    ("target", "checked"),
    [
        ("file:///data/sp", "file:///data/sp"),
        ("file:///data/sp/", "file:///data/sp"),
        ("file:///data/sp/a/b", "file:///data/sp/a/b"),
        ("/data/chk/x", "file:///data/chk/x"),
        ("file:///data/sp/a/../b", "file:///data/sp/b"),
        ("s3://bucket/savepoints/run-2", "s3://bucket/savepoints/run-2"),
        ("S3://bucket/savepoints/x", "s3://bucket/savepoints/x"),
    ],
)
def test_targets_under_an_allowed_prefix_pass_in_their_checked_form(target: str, checked: str) -> None:
    assert TARGETS.check(target) == checked


@pytest.mark.parametrize(
    "target",
    [
        "file:///tmp/evil",
        "file:///data/sp/../evil",
        "file:///data/sp/../../etc",
        "file:///data/sp-evil",  # a sibling that shares the prefix's first characters
        "file:///data",
        "/data/chk/../..",
        "s3://bucket/savepoints-other/x",
        "s3://other/savepoints",
        "gs://bucket/savepoints/x",  # same path, other store
        "file:///data/sp/x::s3://evil/x",  # fsspec chaining would write to the second URL
        "file:///data/sp/x\nEvil: header",
        "file:///data/sp/\x00",
        "relative/dir",
    ],
)
def test_targets_outside_the_allowed_prefixes_are_refused(target: str) -> None:
    with pytest.raises(BadRequest, match="targetDirectory"):
        TARGETS.check(target)


def test_a_symlink_under_an_allowed_prefix_cannot_lead_out_of_it(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "sp", tmp_path / "elsewhere"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "escape").symlink_to(outside)
    (allowed / "inside").symlink_to(allowed / "real", target_is_directory=True)
    targets = SavepointTargets([allowed.as_uri()])
    for target in (f"{allowed.as_uri()}/escape", f"{allowed.as_uri()}/escape/deeper"):
        with pytest.raises(BadRequest, match="not under an allowed savepoint location"):
            targets.check(target)
    # A link that stays inside passes, in its resolved form: that is where the savepoint is written.
    assert targets.check(f"{allowed.as_uri()}/inside/x") == f"{allowed.as_uri()}/real/x"


def test_no_prefix_allows_nothing() -> None:
    with pytest.raises(BadRequest, match=r"\(none;"):
        SavepointTargets([]).check("file:///anything")


@pytest.mark.parametrize(
    ("body", "wanted"),
    [
        ({}, SavepointTrigger(None, None)),
        ({"stop": False}, SavepointTrigger(None, None)),
        ({"stop": None}, SavepointTrigger(None, None)),
        ({"stop": "suspend"}, SavepointTrigger(StopMode.SUSPEND, None)),
        (
            {"stop": "terminate", "targetDirectory": "file:///data/sp"},
            SavepointTrigger(StopMode.TERMINATE, "file:///data/sp"),
        ),
        ({"targetDirectory": None}, SavepointTrigger(None, None)),
        (
            {"stop": "suspend", "requestId": "0b7c5a6e-1f2d-4c3b-9a8e-7d6c5b4a3f21.0"},
            SavepointTrigger(StopMode.SUSPEND, None, "0b7c5a6e-1f2d-4c3b-9a8e-7d6c5b4a3f21.0"),
        ),
        ({"requestId": "r" * 64}, SavepointTrigger(None, None, "r" * 64)),
        ({"requestId": None}, SavepointTrigger(None, None)),
    ],
)
def test_good_savepoint_bodies(body: dict[str, Any], wanted: SavepointTrigger) -> None:
    assert savepoint_request(body, TARGETS) == wanted


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"stop": "pause"}, 'stop must be false, "suspend" or "terminate", not "pause"'),
        ({"stop": True}, "not true"),
        ({"stop": 0}, "not 0"),  # 0 == False in Python: it must not pass as "no stop"
        ({"stop": ""}, 'not ""'),
        ({"stop": ["suspend"]}, 'not \\["suspend"\\]'),
        ({"stop": "x" * 1000}, r"\.\.\.$"),  # long values are cut in the message
        ({"targetDirectory": 7}, "targetDirectory must be a URI string, not 7"),
        ({"targetDirectory": ""}, "targetDirectory must be a URI string"),
        ({"targetDirectory": {"a": 1}}, "targetDirectory must be a URI string"),
        ({"targetDir": "file:///data/sp"}, 'unknown field "targetDir"'),
        ({"triggerId": "abc"}, "has only stop, targetDirectory and requestId"),
    ],
)
def test_bad_savepoint_bodies_say_what_is_wrong(body: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        savepoint_request(body, TARGETS)


def test_a_cancel_request_has_no_fields() -> None:
    cancel_request({})
    with pytest.raises(BadRequest, match="no fields"):
        cancel_request({"force": True})


@pytest.mark.parametrize(
    "request_id",
    [
        "r" * 65,  # longer than REQUEST_ID_MAX
        "r" * 100_000,
        "",
        "-leading-dash",
        ".hidden",
        "a/b",
        "../../etc",
        "a b",
        "a\nInjected: header",
        "abc\n",  # a trailing newline must not pass as the end of the word
        "r\x00",
        "caf\u00e9",  # letters outside ASCII
        "\u0661\u0662",  # digits of another script
        7,
        True,
        ["abc"],
        {"id": "abc"},
    ],
)
def test_a_malformed_request_id_is_refused_saying_what_one_looks_like(request_id: Any) -> None:
    with pytest.raises(BadRequest, match=r"requestId must be 1 to 64 letters, digits") as refused:
        savepoint_request({"stop": "suspend", "requestId": request_id}, TARGETS)
    assert len(str(refused.value)) < 300, "a long value is cut in the message"
