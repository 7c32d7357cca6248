"""The record step: the status patch and the events, from a decision and what acting did."""

from __future__ import annotations

import pytest

from sluice_operator.models import (
    Condition,
    DegradedReason,
    LifecycleState,
    MonitorReason,
    SavepointState,
    SavepointStatus,
    StreamJobStatus,
)
from sluice_operator.services.act.record import action_events, record_degraded, record_status
from sluice_operator.services.common.acted import Done, Executed, MonitorState, Refused
from sluice_operator.services.common.observed import Observed
from sluice_operator.services.common.plan import DeletePods, DeleteSavepoint, TriggerSavepoint
from sluice_operator.services.decide.job import decide

from ._fixtures import spec
from ._situations import NOW, OLD_ID, coordinator, ctx, deployed_status, pod, savepoint


def _trigger(backoff_limit: int, failures: int = 0) -> TriggerSavepoint:
    job = spec()
    view = savepoint("manual", failures=failures)
    view.spec.backoff_limit = backoff_limit  # type: ignore[union-attr]
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=[view])
    )
    (trigger,) = [a for a in plan.actions if isinstance(a, TriggerSavepoint)]
    return trigger


def test_a_trigger_carries_both_of_its_outcomes_decided_with_the_plan() -> None:
    trigger = _trigger(backoff_limit=1)
    assert (trigger.accepted.state, trigger.accepted.job_id) == (SavepointState.IN_PROGRESS, OLD_ID)
    assert (trigger.refused.state, trigger.refused.failures) == (SavepointState.PENDING, 1)
    last_try = _trigger(backoff_limit=1, failures=1)
    assert (last_try.refused.state, last_try.refused.failures) == (SavepointState.FAILED, 2)


def _refused(trigger: TriggerSavepoint, error: str) -> Refused:
    return Refused(trigger, trigger.refused.model_copy(update={"error": error}))


def test_a_refusal_that_fails_the_savepoint_is_reported_on_the_job_and_the_savepoint() -> None:
    trigger = _trigger(backoff_limit=0)
    events = action_events(Executed((_refused(trigger, "HTTP 409: busy"),)))
    assert [(e.type, e.reason, e.savepoint) for e in events] == [
        ("Warning", "SavepointFailed", None),
        ("Warning", "Failed", "manual"),
    ]
    assert events[1].message == "HTTP 409: busy"


def test_a_refusal_left_to_retry_and_a_plain_action_say_nothing() -> None:
    retried = _refused(_trigger(backoff_limit=3), "no IP")
    assert action_events(Executed((retried, Done(DeletePods(("p",), "why"))))) == []


def test_deleted_savepoints_are_reported_in_the_order_acted_on() -> None:
    refused = _refused(_trigger(backoff_limit=0), "down")
    executed = Executed((Done(DeleteSavepoint("old", "too many")), refused, Done(DeleteSavepoint("b", "x"))))
    assert [e.reason for e in action_events(executed)] == [
        "SavepointDeleted",
        "SavepointFailed",
        "Failed",
        "SavepointDeleted",
    ]
    assert action_events(executed)[0].message == "deleted Savepoint old: too many"


def test_the_status_patch_holds_what_changed_and_nulls_what_went() -> None:
    old = {"lifecycleState": "Deploying", "dashboardUrl": "http://x", "observedGeneration": 3}
    decided = StreamJobStatus(lifecycle_state=LifecycleState.RUNNING, observed_generation=3)
    recorded = record_status(old, decided, None, generation=3, now_ms=NOW)
    assert recorded.patch == {
        "lifecycleState": "Running",
        "dashboardUrl": None,
        "savepointHistory": [],
        "conditions": [],
        "checkpointRuns": [],
    }
    assert recorded.events == []


@pytest.mark.parametrize(("before", "said"), [(None, ["Error"]), ("boom", [])])
def test_a_new_error_is_said_once(before: str | None, said: list[str]) -> None:
    old = {"error": before} if before else {}
    recorded = record_status(old, StreamJobStatus(error="boom"), None, generation=1, now_ms=NOW)
    assert [e.reason for e in recorded.events] == said


def test_the_monitored_condition_joins_the_decided_ones() -> None:
    decided = StreamJobStatus(conditions=[Condition(type="Ready", status="True")])
    state = MonitorState(False, MonitorReason.CRD_MISSING, "no CRD")
    recorded = record_status({}, decided, state, generation=1, now_ms=NOW)
    assert [c["type"] for c in recorded.patch["conditions"]] == ["Ready", "Monitored"]
    assert [e.reason for e in recorded.events] == ["PodMonitorCRDMissing"]
    assert [c.type for c in decided.conditions] == ["Ready"], "the decision itself is left as it was"


def test_degraded_keeps_the_status_and_says_why() -> None:
    old = {"lifecycleState": "Running", "job": {"id": OLD_ID, "state": "RUNNING"}}
    status = StreamJobStatus.model_validate(old)
    recorded = record_degraded(
        old, status, DegradedReason.STORAGE_UNAVAILABLE, "cannot read", generation=4, now_ms=NOW
    )
    assert recorded.patch["error"] == "cannot read"
    assert recorded.patch["observedGeneration"] == 4
    assert "job" not in recorded.patch and "lifecycleState" not in recorded.patch
    (degraded,) = recorded.patch["conditions"]
    assert (degraded["type"], degraded["status"], degraded["reason"]) == (
        "Degraded",
        "True",
        "StorageUnavailable",
    )
    assert [(e.type, e.reason) for e in recorded.events] == [("Warning", "StorageUnavailable")]
    again = record_degraded(
        {**old, "error": "cannot read"},
        status,
        DegradedReason.STORAGE_UNAVAILABLE,
        "cannot read",
        generation=4,
        now_ms=NOW,
    )
    assert again.events == []


def test_savepoint_status_of_a_refusal_is_the_decided_one_with_the_error() -> None:
    trigger = _trigger(backoff_limit=0)
    written = _refused(trigger, "down").status
    assert written == SavepointStatus(state=SavepointState.FAILED, failures=1, error="down")
