"""The record steps of a job's deletion and of deleting earlier runs' checkpoints: pure, from a
`StreamJobStatus` or what acting did to one merge patch and the events (services/act/record.py)."""

from __future__ import annotations

from sluice_operator.models import LifecycleState, StreamJobStatus
from sluice_operator.services.act.record import action_events, record_deleting
from sluice_operator.services.common.acted import Executed, RunsDeleted
from sluice_operator.services.common.plan import DeleteCheckpointRuns

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


def test_runs_deleted_are_reported_one_event_each_and_runs_already_gone_none() -> None:
    action = DeleteCheckpointRuns("s3://b/chk", runs=(A, B, C), remaining=(OLD_ID,))
    # A's and B's directories were deleted, C's was gone already.
    events = action_events(Executed((RunsDeleted(action, deleted=(A, B)),)))
    assert [e.reason for e in events] == ["CheckpointsDeleted"] * 2
    assert [A in events[0].message, B in events[1].message] == [True, True]
    assert action_events(Executed((RunsDeleted(action, deleted=()),))) == []
