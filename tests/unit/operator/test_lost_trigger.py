"""A savepoint trigger the coordinator accepted must not be lost with the operator's record of it.

The operator triggers with a request id made from the Savepoint's uid and attempt; if writing the
trigger id onto the Savepoint fails (the API server is down), the next reconcile asks again with the
same id (the coordinator answers with the same trigger), or, once the run has ended, finds its own stop
in the run's stored result by that id and completes the Savepoint with the result's savepoint.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sluice_contract.rest import SavepointProgress
from sluice_contract.results import JobResult
from sluice_operator.services.common.observed import Observed, SavepointView
from sluice_operator.services.common.plan import (
    CreateSavepoint,
    DeletePods,
    PatchSavepoint,
    Plan,
    StartRun,
    TriggerSavepoint,
)
from sluice_operator.services.decide.job import decide
from sluice_operator.services.decide.savepoints import request_id

from ._fixtures import spec
from ._situations import OLD_ID, coordinator, ctx, deployed_status, pod, result, savepoint, status_of

UID = "0b7c5a6e-1f2d-4c3b-9a8e-7d6c5b4a3f21"
SAVEPOINT_PATH = f"s3://bucket/sluice/savepoints/jobs/counts/savepoint-{OLD_ID}-2"
OLD, NEW = spec(upgradeMode="savepoint"), spec(upgradeMode="savepoint", parallelism=8)


def _upgrade_savepoint(**status: Any) -> SavepointView:
    """The operator's upgrade Savepoint as its lost trigger left it: Pending, no trigger id on record."""
    view = savepoint("counts-upgrade-3", "suspend", labels={"sluice.dev/job-generation": "3"}, **status)
    return dataclasses.replace(view, uid=UID)


def _ended(
    stop_request_id: str | None, state: str = "FINISHED", path: str | None = SAVEPOINT_PATH
) -> JobResult:
    return dataclasses.replace(result(state, savepoint=path), stop_request_id=stop_request_id)


def _only(plan: Plan, kind: type) -> Any:
    found = [a for a in plan.actions if isinstance(a, kind)]
    assert len(found) == 1, plan.actions
    return found[0]


def test_the_trigger_carries_the_savepoints_uid_and_attempt_as_its_request_id() -> None:
    sp = _upgrade_savepoint()
    plan = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(pod=pod(OLD), coordinator=coordinator(), savepoints=[sp]),
    )
    assert _only(plan, TriggerSavepoint).request_id == f"{UID}.0"
    # A retry after a failed attempt is another request: the coordinator must not answer it with the
    # failed trigger.
    retry = _upgrade_savepoint(failures=1, error="sink refused to pre-commit")
    plan = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(pod=pod(OLD), coordinator=coordinator(), savepoints=[retry]),
    )
    assert _only(plan, TriggerSavepoint).request_id == f"{UID}.1" == request_id(retry)


def test_a_stop_whose_record_was_lost_is_asked_for_again_with_the_same_request_id() -> None:
    # The coordinator accepted it and is still stopping: the job runs, so the same request goes again
    # (the coordinator answers it with the trigger it already has, see test_runtime_contract).
    sp = _upgrade_savepoint()
    first = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(pod=pod(OLD), coordinator=coordinator(), savepoints=[sp]),
    )
    again = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(pod=pod(OLD), coordinator=coordinator(), savepoints=[sp]),
    )
    assert _only(first, TriggerSavepoint).request_id == _only(again, TriggerSavepoint).request_id
    assert not any(isinstance(a, CreateSavepoint) for a in again.actions), "no second upgrade Savepoint"


def test_an_ended_run_whose_result_names_our_request_completes_the_savepoint_with_its_path() -> None:
    sp = _upgrade_savepoint()
    ended = _ended(f"{UID}.0")
    # Its coordinator pod is still there (it has exited): the pod goes, the Savepoint completes.
    plan = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(pod=pod(OLD, phase="Succeeded"), result=ended, savepoints=[sp]),
    )
    patch = _only(plan, PatchSavepoint)
    assert (patch.name, patch.status.state, patch.status.path) == (
        "counts-upgrade-3",
        "Completed",
        SAVEPOINT_PATH,
    )
    assert patch.status.job_id == OLD_ID and patch.status.error is None
    assert patch.status.completion_time is not None
    assert any(e.reason == "SavepointCompleted" for e in plan.events)
    assert not any(e.type == "Warning" for e in plan.events), plan.events
    assert _only(plan, DeletePods).names == ("counts-coordinator",)
    assert status_of(plan)["lifecycleState"] == "Upgrading"
    # Pods gone: the upgrade goes on, the new spec from that savepoint.
    plan = decide(ctx(NEW, deployed_status(OLD, "Upgrading")), Observed(result=ended, savepoints=[sp]))
    assert _only(plan, PatchSavepoint).status.state == "Completed"
    start = _only(plan, StartRun)
    assert (start.run.restore_from, start.run.spec.parallelism) == (SAVEPOINT_PATH, 8)


def test_a_coordinator_still_answering_after_the_stop_does_not_hold_the_savepoint_up() -> None:
    # The run has ended and its result is stored; the coordinator lingers for its caller, which never
    # asked (its record was lost). The stored result is enough.
    sp = _upgrade_savepoint()
    plan = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(
            pod=pod(OLD), coordinator=coordinator("FINISHED"), result=_ended(f"{UID}.0"), savepoints=[sp]
        ),
    )
    patch = _only(plan, PatchSavepoint)
    assert (patch.status.state, patch.status.path) == ("Completed", SAVEPOINT_PATH)
    assert not any(isinstance(a, TriggerSavepoint) for a in plan.actions)


@pytest.mark.parametrize(
    "ended",
    [
        pytest.param(_ended(f"{UID}.1"), id="another attempt of ours"),
        pytest.param(_ended("someone-else.0"), id="another request"),
        pytest.param(_ended(None), id="no request id (an older runtime, or a stop asked for without one)"),
        pytest.param(_ended(f"{UID}.0", state="FAILED", path=None), id="failed with our id and no savepoint"),
        pytest.param(_ended(f"{UID}.0", path=None), id="finished with our id and no stop savepoint"),
    ],
)
def test_an_ended_run_that_does_not_name_our_completed_stop_fails_the_savepoint_as_before(
    ended: JobResult,
) -> None:
    sp = _upgrade_savepoint()
    plan = decide(ctx(NEW, deployed_status(OLD, "Upgrading")), Observed(result=ended, savepoints=[sp]))
    patch = _only(plan, PatchSavepoint)
    assert patch.status.state == "Failed" and patch.status.path is None
    assert "is not running" in (patch.status.error or "")


def test_a_plain_savepoint_is_not_completed_from_a_stop_result() -> None:
    # Only a stop is stored with its request id: a plain savepoint's record, once lost, cannot be found.
    view = dataclasses.replace(savepoint("manual"), uid=UID)
    plan = decide(ctx(OLD, deployed_status(OLD)), Observed(result=_ended(f"{UID}.0"), savepoints=[view]))
    assert _only(plan, PatchSavepoint).status.state == "Failed"


def test_a_followed_stop_is_not_completed_with_the_savepoint_of_another_request() -> None:
    # Our trigger is on record, but the run ended with another request's stop: that savepoint is not ours.
    sp = _upgrade_savepoint(state="InProgress", triggerId="t1", jobId=OLD_ID)
    plan = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(result=_ended("someone-else.0"), savepoints=[sp]),
    )
    patch = _only(plan, PatchSavepoint)
    assert patch.status.state == "Abandoned" and patch.status.path is None
    # Ours, or a result that names no request (stored before request ids): completed, as before.
    for stored in (_ended(f"{UID}.0"), _ended(None)):
        plan = decide(ctx(NEW, deployed_status(OLD, "Upgrading")), Observed(result=stored, savepoints=[sp]))
        assert (_only(plan, PatchSavepoint).status.state, _only(plan, PatchSavepoint).status.path) == (
            "Completed",
            SAVEPOINT_PATH,
        )


def test_a_followed_stop_still_completes_from_its_poll() -> None:
    sp = _upgrade_savepoint(state="InProgress", triggerId="t1", jobId=OLD_ID)
    polls = {"t1": SavepointProgress("COMPLETED", path=SAVEPOINT_PATH, checkpoint_id=2)}
    plan = decide(
        ctx(NEW, deployed_status(OLD, "Upgrading")),
        Observed(pod=pod(OLD), coordinator=coordinator(), savepoints=[sp], savepoint_polls=polls),
    )
    assert (_only(plan, PatchSavepoint).status.state, _only(plan, PatchSavepoint).status.checkpoint_id) == (
        "Completed",
        2,
    )
