"""The record steps of a job's deletion and of deleting earlier runs' checkpoints: pure, from a
`StreamJobStatus` to one merge patch and the events (services/record.py)."""

from __future__ import annotations

from sluice_operator.models import LifecycleState, StreamJobStatus
from sluice_operator.services.record import record_deleting, record_runs_deleted

from ._fixtures import spec
from ._situations import OLD_ID, deployed_status

A, B, C = "a" * 32, "b" * 32, "c" * 32


def test_deletion_records_the_lifecycle_state_alone() -> None:
    # As the operator's reconciles wrote it: one dump of a StreamJobStatus.
    status = StreamJobStatus.model_validate(deployed_status(spec(), checkpointRuns=[A, OLD_ID]))
    old = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    recorded = record_deleting(old, status)
    assert recorded.patch == {"lifecycleState": "Deleting"}
    assert recorded.status.lifecycle_state is LifecycleState.DELETING
    assert recorded.status.checkpoint_runs == [A, OLD_ID]  # the rest of the status as it was
    assert [(e.type, e.reason) for e in recorded.events] == [("Normal", "Deleting")]


def test_runs_whose_directories_went_are_dropped_from_the_status() -> None:
    status = StreamJobStatus.model_validate(deployed_status(spec(), checkpointRuns=[A, B, C, OLD_ID]))
    # A's and B's directories were deleted, C's was gone already: all three expired, events for two.
    recorded = record_runs_deleted(status, expired=[A, B, C], deleted=[A, B])
    assert recorded.patch == {"checkpointRuns": [OLD_ID]}
    assert recorded.status.checkpoint_runs == [OLD_ID]
    assert [e.reason for e in recorded.events] == ["CheckpointsDeleted"] * 2
    assert [A in recorded.events[0].message, B in recorded.events[1].message] == [True, True]
    assert status.checkpoint_runs == [A, B, C, OLD_ID]  # the status it was given is left as it was


def test_nothing_expired_records_nothing() -> None:
    status = StreamJobStatus.model_validate(deployed_status(spec(), checkpointRuns=[OLD_ID]))
    recorded = record_runs_deleted(status, expired=[], deleted=[])
    assert recorded.patch == {} and recorded.events == []
