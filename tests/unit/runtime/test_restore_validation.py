"""Restores that cannot work are refused before anything runs, with a message naming the operators."""

from __future__ import annotations

import pytest

from sluice._states import CheckpointKind
from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry, SubtaskHandle
from sluice.coordinator.validation import RestoreRefused, validate_restore
from sluice.graph.jobgraph import JobGraph
from sluice.graph.transformations import PartitionKind

from ._graphs import graph

LOCATION = "file:///checkpoints/job/chk-9"


def entry(uid: str, *, fully: bool = False, state: bool = True) -> OperatorEntry:
    handles = (SubtaskHandle(0, f"{uid}-0.state", 1),) if state and not fully else ()
    return OperatorEntry(uid, 1, 128, fully_finished=fully, subtasks=handles)


def checkpoint(*entries: OperatorEntry) -> CheckpointMetadata:
    return CheckpointMetadata(9, "job", CheckpointKind.CHECKPOINT, 0, None, entries, location=LOCATION)


def two_chains() -> JobGraph:
    """`numbers -> parse` feeding `count -> sink` over a hash edge."""
    return graph([(["numbers", "parse"], 2), (["count", "sink"], 2)], [(0, 1, PartitionKind.HASH)])


def test_matching_checkpoint_is_accepted() -> None:
    meta = checkpoint(entry("numbers"), entry("parse"), entry("count"), entry("sink"))
    validate_restore(two_chains(), meta, allow_non_restored_state=False)


def test_state_of_a_removed_operator_is_refused_unless_allowed() -> None:
    meta = checkpoint(entry("numbers"), entry("dedupe"), entry("count"), entry("old-sink", fully=True))
    with pytest.raises(RestoreRefused) as caught:
        validate_restore(two_chains(), meta, allow_non_restored_state=False)
    message = str(caught.value)
    assert LOCATION in message
    assert "dedupe, old-sink" in message
    assert "--allow-non-restored-state" in message
    validate_restore(two_chains(), meta, allow_non_restored_state=True)


def test_removed_operator_without_state_is_no_reason_to_refuse() -> None:
    meta = checkpoint(entry("numbers"), entry("stateless-map", state=False))
    validate_restore(two_chains(), meta, allow_non_restored_state=False)


def test_chain_with_mixed_finished_states_is_refused() -> None:
    # `count` finished, but `sink` (chained to it) would have to run: not possible in one task.
    meta = checkpoint(entry("numbers"), entry("parse"), entry("count", fully=True), entry("sink"))
    with pytest.raises(RestoreRefused) as caught:
        validate_restore(two_chains(), meta, allow_non_restored_state=False)
    message = str(caught.value)
    assert "'count -> sink'" in message
    assert "fully finished operators (count)" in message
    assert "operators that must run (sink)" in message


def test_new_operator_chained_to_a_finished_one_is_refused() -> None:
    meta = checkpoint(entry("numbers", fully=True), entry("count"), entry("sink"))
    with pytest.raises(RestoreRefused, match=r"fully finished operators \(numbers\).*must run \(parse\)"):
        validate_restore(two_chains(), meta, allow_non_restored_state=False)


def test_running_operator_in_front_of_a_fully_finished_one_is_refused() -> None:
    # A new source chain now feeds `count -> sink`, which finished in the checkpoint.
    meta = checkpoint(entry("count", fully=True), entry("sink", fully=True))
    with pytest.raises(RestoreRefused) as caught:
        validate_restore(two_chains(), meta, allow_non_restored_state=False)
    message = str(caught.value)
    assert "operator 'parse' would run in front of the fully finished 'count'" in message
    assert LOCATION in message


def test_finished_upstream_of_a_running_operator_is_fine() -> None:
    meta = checkpoint(entry("numbers", fully=True), entry("parse", fully=True), entry("count"), entry("sink"))
    validate_restore(two_chains(), meta, allow_non_restored_state=False)


def test_everything_finished_is_fine() -> None:
    meta = checkpoint(*(entry(u, fully=True) for u in ("numbers", "parse", "count", "sink")))
    validate_restore(two_chains(), meta, allow_non_restored_state=False)
