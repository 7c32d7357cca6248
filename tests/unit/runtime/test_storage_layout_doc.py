"""docs/reference/storage-layout.md shows the formats as they are: each JSON example parses with the
reader of its format, and what the writer makes of it again is the example."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.coordinator.result_store import JobResult
from sluice.state.stored_files import is_digest

DOC = Path(__file__).resolve().parents[3] / "docs" / "reference" / "storage-layout.md"
PARSERS: dict[str, Callable[[str], CheckpointMetadata | JobResult]] = {
    "_metadata": CheckpointMetadata.parse,
    "job-result.json": JobResult.parse,
}


def examples() -> list[tuple[str, str]]:
    """(format, JSON text) of every ```json block, the format named by the section it stands in."""
    found = []
    section = None
    for part in re.split(r"^(## .*)$", DOC.read_text(), flags=re.MULTILINE):
        heading = re.fullmatch(r"## `([^`]+)`", part.strip())
        if part.startswith("## "):
            section = heading.group(1) if heading else part
            continue
        for block in re.findall(r"```json\n(.*?)```", part, flags=re.DOTALL):
            found.append((str(section), block))
    return found


def test_the_doc_has_an_example_of_every_format() -> None:
    assert {fmt for fmt, _ in examples()} == set(PARSERS)


@pytest.mark.parametrize(("fmt", "text"), examples())
def test_every_example_parses_and_is_what_the_writer_writes(fmt: str, text: str) -> None:
    assert fmt in PARSERS, f"a JSON example in section {fmt!r}, which names no format"
    parsed = PARSERS[fmt](text)
    document = json.loads(text)
    if fmt in ("_metadata", "job-result.json"):
        # The MAC is the writer's last step (`storage.write_metadata`, `result_store.write_result`); its
        # shape is the format's.
        mark = document.pop("integrity")
        assert set(mark) == {"algorithm", "keyId", "mac"} and mark["algorithm"] == "HMAC-SHA-256"
        assert is_digest(mark["mac"]) and len(mark["keyId"]) == 16
    assert parsed.to_json() == document


def test_the_metadata_example_shows_every_field_the_writer_writes() -> None:
    written: set[str] = set()
    for fmt, text in examples():
        if fmt == "_metadata":
            for op in CheckpointMetadata.parse(text).to_json()["operators"]:
                written |= set(op)
                for handle in op["subtasks"]:
                    written |= set(handle)
    fields = {
        "operatorState",
        "union",
        "pendingCommits",
        "keyedFiles",
        "keyGroups",
        "finishedSubtasks",
        "sha256",
    }
    assert fields <= written
    for name in fields:
        assert f"`{name}`" in DOC.read_text(), f"{name} is not explained"
