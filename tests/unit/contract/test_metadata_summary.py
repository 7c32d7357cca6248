"""`_metadata` as the operator reads it (`sluice_contract.metadata.MetadataSummary`): the head of the
document the runtime writes, held to the runtime's field for field."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry
from sluice_contract.codec import DocumentError
from sluice_contract.metadata import MetadataSummary, OperatorSummary
from sluice_contract.states import CheckpointKind, StopMode

from ..runtime.test_metadata_pinned_form import METADATA, WRITTEN_BEFORE


@pytest.mark.parametrize(
    ("summary", "whole"), [(MetadataSummary, CheckpointMetadata), (OperatorSummary, OperatorEntry)]
)
def test_every_field_read_is_the_runtimes_field_of_the_same_type_and_name(summary: type, whole: type) -> None:
    # What makes a field renamed or retyped on one side fail here rather than in a cluster.
    theirs = {f.name: f for f in dataclasses.fields(whole)}
    hints, their_hints = typing.get_type_hints(summary), typing.get_type_hints(whole)
    for mine in dataclasses.fields(summary):
        assert mine.name in theirs, f"{whole.__name__} has no field {mine.name}"
        # The operators are summed up in turn: the test's other case holds them to the runtime's.
        expected = tuple[OperatorEntry, ...] if mine.name == "operators" else hints[mine.name]
        assert their_hints[mine.name] == expected, mine.name
        assert dict(mine.metadata) == dict(theirs[mine.name].metadata), mine.name


def test_the_runtimes_metadata_reads_as_its_head() -> None:
    read = MetadataSummary.from_json(json.loads(WRITTEN_BEFORE))
    assert read == MetadataSummary(
        METADATA.checkpoint_id,
        METADATA.job_id,
        CheckpointKind.SAVEPOINT,
        METADATA.timestamp,
        StopMode.TERMINATE,
        tuple(OperatorSummary(op.uid, op.fully_finished) for op in METADATA.operators),
    )
    assert read.fully_finished == ("sink",)
    assert MetadataSummary.from_json(METADATA.to_json()) == read


def test_a_checkpoint_without_a_stop_reads_as_none() -> None:
    stored = {**METADATA.to_json(), "stopMode": None}
    assert MetadataSummary.from_json(stored).stop_mode is None
    del stored["stopMode"]
    assert MetadataSummary.from_json(stored).stop_mode is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"checkpointId": -1}, "'checkpointId' must be at least 0"),
        ({"kind": "backup"}, "'kind' must be one of 'checkpoint', 'savepoint'"),
        ({"stopMode": "suspend"}, "'stopMode' must be null, 'drain' or 'no-drain'"),
        ({"timestamp": "soon"}, "'timestamp' must be an integer, not a string"),
        ({"operators": [{"uid": "src", "fullyFinished": "yes"}]}, "'fullyFinished' must be true or false"),
        ({"jobId": None}, "'jobId' must be a string, not null"),
    ],
)
def test_a_malformed_head_is_refused_naming_the_field(change: dict[str, object], problem: str) -> None:
    with pytest.raises(DocumentError, match=r"^s3://b/chk-7/_metadata") as caught:
        MetadataSummary.from_json({**METADATA.to_json(), **change}, "s3://b/chk-7/_metadata")
    assert problem in str(caught.value)
