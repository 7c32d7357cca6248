"""Periodic savepoints, history trimming and the savepoint on deletion, decided without a cluster."""

from __future__ import annotations

import dataclasses
from typing import Any

from sluice_operator.models import SavepointSpec
from sluice_operator.services.common._time import rfc3339 as _at
from sluice_operator.services.common.objects import ObjectMeta
from sluice_operator.services.common.observed import Observed, SavepointView
from sluice_operator.services.common.plan import (
    CreateSavepoint,
    DeleteSavepoint,
    Plan,
    SetDesiredState,
    TriggerSavepoint,
)
from sluice_operator.services.decide.deletion import plan_deletion_savepoint
from sluice_operator.services.decide.savepoint_housekeeping import periodic_and_cleanup
from sluice_operator.services.decide.savepoints import plan_savepoints
from sluice_operator.services.deletion import deletion_stamp

from ._fixtures import spec
from ._situations import NOW, OLD_ID, coordinator, ctx, deployed_status, pod, savepoint

PERIODIC = {"sluice.dev/trigger": "periodic"}
START = NOW - 300_000  # the coordinator's startTime in _situations


def _periodic(i: int, ended_ms: int, state: str = "Completed", **extra: Any) -> SavepointView:
    status: dict[str, Any] = {"state": state, **extra}
    if state == "Completed":
        status |= {"path": f"s3://sp/periodic-{i}", "completionTime": _at(ended_ms)}
    return savepoint(f"counts-periodic-{i}", created=_at(ended_ms - 1_000), labels=PERIODIC, **status)


def _housekeeping(
    views: list[SavepointView], *, running: bool = True, start_ms: int | None = START, **policy: Any
) -> Plan:
    job = spec(savepoints=policy)
    plan = Plan()
    periodic_and_cleanup(ctx(job), Observed(savepoints=views), plan, job_running=running, start_ms=start_ms)
    return plan


def _created(plan: Plan) -> list[str]:
    return [a.manifest["metadata"]["name"] for a in plan.actions if isinstance(a, CreateSavepoint)]


def _deleted(plan: Plan) -> dict[str, str]:
    return {a.name: a.reason for a in plan.actions if isinstance(a, DeleteSavepoint)}


# --- periodic savepoints -------------------------------------------------------------------------------


def test_the_first_periodic_savepoint_is_due_one_interval_after_the_run_started() -> None:
    assert _created(_housekeeping([], periodicInterval="6m")) == []  # started 5 minutes ago

    plan = _housekeeping([], periodicInterval="5m")

    (name,) = _created(plan)
    assert name == f"counts-periodic-{NOW // 1000}"
    manifest = next(a for a in plan.actions if isinstance(a, CreateSavepoint)).manifest
    assert manifest["spec"] == {"jobName": "counts", "stop": "none", "disposeOnDelete": False}
    assert manifest["metadata"]["labels"]["sluice.dev/trigger"] == "periodic"
    assert [o["uid"] for o in manifest["metadata"]["ownerReferences"]] == ["0b7c5a6e-uid"]


def test_the_next_periodic_savepoint_counts_from_the_last_one_created() -> None:
    last = _periodic(1, NOW - 50_000)  # created 51 s ago
    assert _created(_housekeeping([last], periodicInterval="1m")) == []
    assert len(_created(_housekeeping([last], periodicInterval="50s"))) == 1


def test_a_periodic_savepoint_waits_for_a_savepoint_in_flight_and_for_a_running_job() -> None:
    in_flight = savepoint("users-own", owned=False, state="InProgress", triggerId="t1", jobId=OLD_ID)
    assert _created(_housekeeping([in_flight], periodicInterval="1s")) == []
    assert _created(_housekeeping([], running=False, periodicInterval="1s")) == []


def test_the_periodic_savepoint_inherits_dispose_on_delete_from_the_policy() -> None:
    plan = _housekeeping([], periodicInterval="1s", disposeOnDelete=True)
    manifest = next(a for a in plan.actions if isinstance(a, CreateSavepoint)).manifest
    assert manifest["spec"]["disposeOnDelete"] is True


# --- history -------------------------------------------------------------------------------------------


def test_max_count_deletes_the_oldest_operator_savepoints_and_never_a_users() -> None:
    views = [_periodic(i, NOW - (10 - i) * 60_000) for i in range(5)]  # periodic-4 is the newest
    users = savepoint("users-own", owned=False, state="Completed", path="s3://u", completionTime=_at(NOW - 1))

    deleted = _deleted(_housekeeping([*views, users], historyMaxCount=2))

    assert deleted == {f"counts-periodic-{i}": "more than 2 savepoints" for i in (0, 1, 2)}


def test_a_savepoint_already_being_deleted_is_neither_deleted_again_nor_counted() -> None:
    views = [_periodic(i, NOW - (10 - i) * 60_000) for i in range(4)]  # periodic-3 is the newest
    # periodic-2 was trimmed by an earlier reconcile; its finalizer is still disposing of its files.
    views[2] = dataclasses.replace(views[2], deleting=True)

    deleted = _deleted(_housekeeping(views, historyMaxCount=2))

    assert deleted == {"counts-periodic-0": "more than 2 savepoints"}


def test_a_savepoint_deleted_before_it_was_triggered_is_not_taken() -> None:
    pending = dataclasses.replace(savepoint("users-own", owned=False), deleting=True)
    plan = Plan()
    job = spec()
    observed = Observed(pod=pod(job), coordinator=coordinator(), savepoints=[pending])
    plan_savepoints(ctx(job, deployed_status(job)), observed, plan)
    assert not [a for a in plan.actions if isinstance(a, TriggerSavepoint)]
    # The same Savepoint not being deleted is triggered: the test sees the difference.
    plan_savepoints(
        ctx(job, deployed_status(job)),
        dataclasses.replace(observed, savepoints=[dataclasses.replace(pending, deleting=False)]),
        plan,
    )
    assert [a for a in plan.actions if isinstance(a, TriggerSavepoint)]


def test_a_dispose_on_delete_savepoint_waits_for_its_finalizer_before_it_is_taken() -> None:
    disposable = SavepointSpec.model_validate({"jobName": "counts", "disposeOnDelete": True})
    fresh = dataclasses.replace(savepoint("users-own", owned=False), spec=disposable, finalized=False)
    job = spec()
    observed = Observed(pod=pod(job), coordinator=coordinator(), savepoints=[fresh])

    def triggered(view: SavepointView) -> bool:
        plan = Plan()
        plan_savepoints(
            ctx(job, deployed_status(job)), dataclasses.replace(observed, savepoints=[view]), plan
        )
        return any(isinstance(a, TriggerSavepoint) for a in plan.actions)

    # Deleted before kopf put the finalizer on it, its files would have nobody to remove them.
    assert not triggered(fresh)
    assert triggered(dataclasses.replace(fresh, finalized=True))


def test_max_age_deletes_old_savepoints_but_keeps_the_newest_completed_one() -> None:
    views = [_periodic(i, NOW - (10 - i) * 3_600_000) for i in range(3)]  # all older than 7 hours

    deleted = _deleted(_housekeeping(views, historyMaxAge="1h"))

    assert deleted == {"counts-periodic-0": "older than 1h", "counts-periodic-1": "older than 1h"}


def test_the_newest_completed_savepoint_stays_even_when_it_is_a_users_and_old() -> None:
    users = savepoint(
        "users-own", owned=False, state="Completed", path="s3://u", completionTime=_at(NOW - 7_200_000)
    )
    periodic = _periodic(1, NOW - 9_000_000)

    deleted = _deleted(_housekeeping([users, periodic], historyMaxAge="1h"))

    assert deleted == {"counts-periodic-1": "older than 1h"}


def test_failed_periodic_savepoints_are_trimmed_on_their_own_count() -> None:
    failed = [_periodic(i, NOW - (10 - i) * 1_000, state="Failed", error="boom") for i in range(4)]
    completed = _periodic(9, NOW - 60_000)

    deleted = _deleted(_housekeeping([*failed, completed], historyMaxCount=2))

    # The completed one is not pushed out by failures; the two oldest failures go.
    assert deleted == {
        "counts-periodic-0": "more than 2 savepoints",
        "counts-periodic-1": "more than 2 savepoints",
    }


def test_a_failed_stop_savepoint_is_never_trimmed() -> None:
    # Its failure is what keeps the job Running with an error instead of trying to stop again.
    failed_stop = savepoint(
        "counts-suspend-3", "suspend", state="Failed", error="boom", created=_at(NOW - 86_400_000)
    )
    assert _deleted(_housekeeping([failed_stop], historyMaxCount=1, historyMaxAge="1s")) == {}


# --- the savepoint on deletion -------------------------------------------------------------------------

DELETED_AT = "2023-11-14T22:13:20Z"  # 1_700_000_000 s


def test_the_deletion_savepoint_is_named_after_the_deletion_time_not_the_generation() -> None:
    job = {"metadata": {"generation": 7, "deletionTimestamp": DELETED_AT}}
    assert deletion_stamp(ObjectMeta.parse(job)) == 1_700_000_000
    assert deletion_stamp(ObjectMeta.parse({"metadata": {"generation": 7}})) == 7


def _deleting(views: list[SavepointView], *, state: str = "RUNNING") -> tuple[bool, Plan]:
    job = spec(savepoints={"onDelete": True})
    obs = Observed(pod=pod(job), coordinator=coordinator(state), savepoints=views)
    plan = Plan()
    waiting = plan_deletion_savepoint(ctx(job, deployed_status(job)), obs, plan, 1_700_000_000)
    return waiting, plan


def test_deleting_a_running_job_creates_a_suspend_savepoint_the_job_does_not_own() -> None:
    waiting, plan = _deleting([])

    assert waiting
    (create,) = plan.actions
    assert isinstance(create, CreateSavepoint)
    manifest = create.manifest
    assert manifest["metadata"]["name"] == "counts-deletion-1700000000"
    assert "ownerReferences" not in manifest["metadata"]
    assert manifest["spec"] == {"jobName": "counts", "stop": "suspend", "disposeOnDelete": False}


def test_the_deletion_savepoint_is_triggered_without_touching_the_jobs_spec() -> None:
    mine = savepoint("counts-deletion-1700000000", "suspend", owned=False)

    waiting, plan = _deleting([mine])

    assert waiting
    assert not [a for a in plan.actions if isinstance(a, SetDesiredState)], plan.actions
    (trigger,) = [a for a in plan.actions if isinstance(a, TriggerSavepoint)]
    assert (trigger.name, trigger.stop, trigger.job_id) == ("counts-deletion-1700000000", "suspend", OLD_ID)


def test_the_deletion_savepoint_waits_for_a_savepoint_in_flight() -> None:
    mine = savepoint("counts-deletion-1700000000", "suspend", owned=False, created=_at(NOW))
    periodic = _periodic(1, NOW - 5_000, state="InProgress", triggerId="t1", jobId=OLD_ID)

    waiting, plan = _deleting([mine, periodic])

    assert waiting
    assert not [a for a in plan.actions if isinstance(a, TriggerSavepoint)], plan.actions


def test_a_job_that_is_not_running_is_deleted_without_a_savepoint() -> None:
    waiting, plan = _deleting([], state="RESTARTING")

    assert not waiting and plan.actions == []
    assert [e.reason for e in plan.events] == ["NoSavepointOnDelete"]
    assert "RESTARTING" in plan.events[0].message


def test_deletion_goes_on_after_the_deletion_savepoint_ended_either_way() -> None:
    done = savepoint("counts-deletion-1700000000", "suspend", owned=False, state="Completed", path="s3://d")
    assert _deleting([done]) == (False, Plan())

    failed = savepoint("counts-deletion-1700000000", "suspend", owned=False, state="Failed", error="boom")
    waiting, plan = _deleting([failed])
    assert not waiting
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "DeletedWithoutSavepoint")]
    assert plan.events[0].message == (
        "savepoint counts-deletion-1700000000 failed: boom; deleting the job anyway"
    )
