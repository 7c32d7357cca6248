"""The StreamJob decision, situation by situation: lifecycle, status and the actions it asks for."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sluice_contract.rest import SavepointProgress
from sluice_operator.models.enums import JobState
from sluice_operator.services.common.observed import Observed
from sluice_operator.services.common.plan import (
    CreateSavepoint,
    DeletePods,
    DeleteSavepoint,
    PatchSavepoint,
    Plan,
    SetDesiredState,
    StartRun,
    TriggerSavepoint,
)
from sluice_operator.services.decide.job import decide

from ._fixtures import spec
from ._situations import (
    NEW_ID,
    NOW,
    OLD_ID,
    coordinator,
    ctx,
    deployed_status,
    pod,
    result,
    savepoint,
    snapshot,
    status_of,
)


def _only(plan: Plan, kind: type) -> Any:
    found = [a for a in plan.actions if isinstance(a, kind)]
    assert len(found) == 1, plan.actions
    return found[0]


def _condition(plan: Plan, kind: str) -> dict[str, Any]:
    return next(c for c in status_of(plan)["conditions"] if c["type"] == kind)


def test_a_new_job_starts_from_its_initial_savepoint() -> None:
    job = spec(initialSavepoint="s3://b/sp/savepoint-x-1")
    plan = decide(ctx(job), Observed())
    start = _only(plan, StartRun)
    assert start.run.job_id == NEW_ID
    assert start.run.restore_from == "s3://b/sp/savepoint-x-1"
    assert status_of(plan)["lifecycleState"] == "Deploying"
    assert status_of(plan)["job"] == {
        "id": NEW_ID,
        "state": "CREATED",
        "restoredFrom": "s3://b/sp/savepoint-x-1",
    }
    assert status_of(plan)["lastReconciledSpec"]
    assert _condition(plan, "Progressing")["status"] == "True"
    assert _condition(plan, "Ready")["status"] == "False"


def test_a_new_suspended_job_is_not_started() -> None:
    plan = decide(ctx(spec(state="suspended")), Observed())
    assert plan.actions == []
    assert status_of(plan)["lifecycleState"] == "Suspended"
    assert _condition(plan, "Ready")["status"] == "True"


def test_a_running_job_mirrors_the_coordinator() -> None:
    job = spec()
    plan = decide(ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator()))
    assert plan.actions == []
    assert status_of(plan)["lifecycleState"] == "Running"
    assert status_of(plan)["job"]["subtasks"] == {"running": 6, "finished": 2, "total": 8}
    assert status_of(plan)["lastCheckpoint"]["id"] == 7
    assert status_of(plan)["lastCheckpoint"]["fullyFinishedOperators"] == ["numbers"]
    assert status_of(plan)["lastStableSpec"] == status_of(plan)["lastReconciledSpec"]
    assert _condition(plan, "Ready")["status"] == "True"
    assert _condition(plan, "Degraded")["status"] == "False"


def test_running_to_suspended_creates_a_stop_savepoint() -> None:
    job = spec(state="suspended")
    plan = decide(ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator()))
    created = _only(plan, CreateSavepoint).manifest
    assert created["metadata"]["name"] == "counts-suspend-3"
    assert created["spec"]["stop"] == "suspend"
    assert created["metadata"]["labels"]["sluice.dev/job-generation"] == "3"
    assert status_of(plan)["lifecycleState"] == "Stopping"


def test_running_to_finished_stops_with_drain() -> None:
    job = spec(state="finished")
    plan = decide(ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator()))
    assert _only(plan, CreateSavepoint).manifest["spec"]["stop"] == "terminate"


def test_a_pending_stop_savepoint_is_triggered_on_the_running_job() -> None:
    job = spec(state="suspended")
    sp = savepoint("counts-suspend-3", "suspend", labels={"sluice.dev/job-generation": "3"})
    plan = decide(
        ctx(job, deployed_status(job, "Stopping")),
        Observed(pod=pod(job), coordinator=coordinator(), savepoints=[sp]),
    )
    trigger = _only(plan, TriggerSavepoint)
    assert (trigger.name, trigger.stop, trigger.job_id) == ("counts-suspend-3", "suspend", OLD_ID)
    assert trigger.target_directory == "s3://bucket/sluice/savepoints/jobs/counts"
    assert status_of(plan)["lifecycleState"] == "Stopping"


def test_a_completed_poll_completes_the_savepoint() -> None:
    job = spec(state="suspended")
    sp = savepoint("counts-suspend-3", "suspend", state="InProgress", triggerId="t1", jobId=OLD_ID)
    polls = {"t1": SavepointProgress("COMPLETED", path="s3://b/sp/savepoint-eeee-8", checkpoint_id=8)}
    plan = decide(
        ctx(job, deployed_status(job, "Stopping")),
        Observed(pod=pod(job), coordinator=coordinator(), savepoints=[sp], savepoint_polls=polls),
    )
    patch = _only(plan, PatchSavepoint)
    assert patch.status.state == "Completed"
    assert patch.status.path == "s3://b/sp/savepoint-eeee-8"
    assert patch.status.checkpoint_id == 8
    assert any(e.reason == "SavepointCompleted" for e in plan.events)


def test_after_the_stop_the_pods_go_and_the_job_is_suspended() -> None:
    job = spec(state="suspended")
    status = deployed_status(job, "Stopping")
    ended = result(savepoint="s3://b/sp/savepoint-eeee-8")
    plan = decide(ctx(job, status), Observed(pod=pod(job, "Succeeded"), result=ended))
    assert _only(plan, DeletePods).names == ("counts-coordinator",)
    assert status_of(plan)["lifecycleState"] == "Suspended"
    plan = decide(ctx(job, status), Observed(result=ended))
    assert plan.actions == []
    assert status_of(plan)["lifecycleState"] == "Suspended"
    assert status_of(plan)["job"]["state"] == "FINISHED"


def test_a_suspended_job_still_trims_its_savepoint_history() -> None:
    job = spec(state="suspended", savepoints={"historyMaxAge": "1h"})
    old = [
        savepoint(
            f"counts-periodic-{i}",
            state="Completed",
            path=f"s3://b/sp/{i}",
            completionTime=f"2023-11-1{i}T00:00:00Z",
        )
        for i in (1, 2)
    ]
    ended = result(savepoint="s3://b/sp/savepoint-eeee-8")
    plan = decide(ctx(job, deployed_status(job, "Suspended")), Observed(result=ended, savepoints=old))
    assert status_of(plan)["lifecycleState"] == "Suspended"
    # Both are days old; the newest completed one stays, where the job would resume from.
    assert [(a.name, a.reason) for a in plan.actions if isinstance(a, DeleteSavepoint)] == [
        ("counts-periodic-1", "older than 1h")
    ]


def test_suspended_to_running_resumes_from_the_stop_savepoint() -> None:
    job = spec(state="running")
    ended = result(savepoint="s3://b/sp/savepoint-eeee-8")
    plan = decide(
        ctx(job, deployed_status(job, "Suspended")), Observed(result=ended, latest_checkpoint=snapshot())
    )
    start = _only(plan, StartRun)
    assert start.run.restore_from == "s3://b/sp/savepoint-eeee-8"
    assert status_of(plan)["lifecycleState"] == "Deploying"


def test_a_suspended_stateless_job_resumes_its_changed_spec_from_the_stop_savepoint() -> None:
    # The user asked for that savepoint; stateless only decides how a running job is upgraded.
    old, new = spec(upgradeMode="stateless"), spec(upgradeMode="stateless", parallelism=8)
    ended = result(savepoint="s3://b/sp/savepoint-eeee-8")
    plan = decide(ctx(new, deployed_status(old, "Suspended")), Observed(result=ended))
    assert _only(plan, StartRun).run.restore_from == "s3://b/sp/savepoint-eeee-8"


def test_a_failed_stop_leaves_the_job_running_with_an_error() -> None:
    job = spec(state="suspended")
    sp = savepoint(
        "counts-suspend-3",
        "suspend",
        state="InProgress",
        triggerId="t1",
        jobId=OLD_ID,
        labels={"sluice.dev/job-generation": "3"},
    )
    polls = {"t1": SavepointProgress("FAILED", error="sink refused to pre-commit")}
    plan = decide(
        ctx(job, deployed_status(job, "Stopping")),
        Observed(pod=pod(job), coordinator=coordinator(), savepoints=[sp], savepoint_polls=polls),
    )
    patch = _only(plan, PatchSavepoint)
    assert patch.status.state == "Failed"
    assert patch.status.error == "sink refused to pre-commit"
    assert status_of(plan)["lifecycleState"] == "Running"
    assert "stop with savepoint failed" in status_of(plan)["error"]
    assert _condition(plan, "Degraded")["status"] == "True"
    assert any(e.type == "Warning" and e.reason == "SavepointFailed" for e in plan.events)
    assert not any(isinstance(a, CreateSavepoint) for a in plan.actions)


def test_a_failed_stop_is_not_retried_for_the_same_generation() -> None:
    job = spec(state="suspended")
    sp = savepoint(
        "counts-suspend-3", "suspend", state="Failed", error="x", labels={"sluice.dev/job-generation": "3"}
    )
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=[sp])
    )
    assert plan.actions == []
    assert status_of(plan)["lifecycleState"] == "Running"


def test_savepoint_retries_up_to_the_backoff_limit() -> None:
    job = spec()
    sp = savepoint("manual", state="InProgress", triggerId="t1", jobId=OLD_ID)
    sp.spec.backoff_limit = 1  # type: ignore[union-attr]
    polls = {"t1": SavepointProgress("FAILED", error="timeout")}
    plan = decide(
        ctx(job, deployed_status(job)),
        Observed(pod=pod(job), coordinator=coordinator(), savepoints=[sp], savepoint_polls=polls),
    )
    patch = _only(plan, PatchSavepoint)
    assert (patch.status.state, patch.status.failures, patch.status.trigger_id) == ("Pending", 1, None)


def test_savepoint_mode_upgrade_takes_an_upgrade_savepoint() -> None:
    old, new = spec(), spec(parallelism=8)
    plan = decide(ctx(new, deployed_status(old)), Observed(pod=pod(old), coordinator=coordinator()))
    created = _only(plan, CreateSavepoint).manifest
    assert created["metadata"]["name"] == "counts-upgrade-3"
    assert created["spec"]["stop"] == "suspend"
    assert status_of(plan)["lifecycleState"] == "Upgrading"


def test_after_an_upgrade_savepoint_the_new_spec_starts_from_it() -> None:
    old, new = spec(), spec(parallelism=8)
    ended = result(savepoint="s3://b/sp/savepoint-eeee-9")
    plan = decide(ctx(new, deployed_status(old, "Upgrading")), Observed(result=ended))
    start = _only(plan, StartRun)
    assert start.run.restore_from == "s3://b/sp/savepoint-eeee-9"
    assert start.run.spec.parallelism == 8
    assert status_of(plan)["lifecycleState"] == "Upgrading"


def test_an_upgrade_stop_in_flight_is_not_cut_short_while_the_coordinator_does_not_answer() -> None:
    old, new = spec(), spec(parallelism=8)
    sp = savepoint(
        "counts-upgrade-3", "suspend", state="InProgress", triggerId="t1", jobId=OLD_ID, owned=True
    )
    unanswered = Observed(pod=pod(old), coordinator=None, savepoints=[sp])
    plan = decide(ctx(new, deployed_status(old, "Upgrading")), unanswered)
    assert not [a for a in plan.actions if isinstance(a, DeletePods)], plan.actions
    assert status_of(plan)["lifecycleState"] == "Upgrading"
    # Not yet triggered: nothing is cut short, and a job that does not run upgrades from its checkpoint.
    pending = savepoint("counts-upgrade-3", "suspend", owned=True)
    plan = decide(
        ctx(new, deployed_status(old, "Upgrading")),
        Observed(pod=pod(old), coordinator=None, savepoints=[pending]),
    )
    assert _only(plan, DeletePods).names == ("counts-coordinator",)


def test_last_state_upgrade_restarts_from_the_latest_checkpoint_in_storage() -> None:
    old, new = spec(upgradeMode="last-state"), spec(upgradeMode="last-state", parallelism=8)
    plan = decide(ctx(new, deployed_status(old)), Observed(pod=pod(old), coordinator=coordinator()))
    assert _only(plan, DeletePods).names == ("counts-coordinator",)
    assert status_of(plan)["lifecycleState"] == "Upgrading"
    # The coordinator is gone: the checkpoint comes from storage alone.
    plan = decide(ctx(new, deployed_status(old, "Upgrading")), Observed(latest_checkpoint=snapshot()))
    assert _only(plan, StartRun).run.restore_from == f"s3://b/chk/{OLD_ID}/chk-9"


def test_stateless_upgrade_starts_fresh() -> None:
    old, new = spec(upgradeMode="stateless"), spec(upgradeMode="stateless", parallelism=8)
    plan = decide(ctx(new, deployed_status(old, "Upgrading")), Observed(latest_checkpoint=snapshot()))
    assert _only(plan, StartRun).run.restore_from is None


def test_restart_nonce_forces_a_restart() -> None:
    old, new = spec(upgradeMode="last-state"), spec(upgradeMode="last-state", restartNonce=2)
    plan = decide(ctx(new, deployed_status(old)), Observed(pod=pod(old), coordinator=coordinator()))
    assert isinstance(plan.actions[0], DeletePods)


def test_a_bounded_job_ends_finished_with_all_operators_finished() -> None:
    job = spec()
    plan = decide(ctx(job, deployed_status(job)), Observed(result=result(), last_result_snapshot=snapshot()))
    assert plan.actions == []
    assert status_of(plan)["lifecycleState"] == "Finished"
    assert status_of(plan)["lastCheckpoint"]["allOperatorsFinished"] is True
    assert status_of(plan)["lastCheckpoint"]["id"] == 9
    assert _condition(plan, "Ready")["status"] == "True"


@pytest.mark.parametrize(("lifecycle", "state"), [("Finished", "running"), ("Suspended", "suspended")])
def test_an_ended_job_stays_at_rest_while_its_pod_is_deleted(lifecycle: str, state: str) -> None:
    job = spec(state=state)
    ended = result(savepoint="s3://b/sp/savepoint-eeee-8" if state == "suspended" else None)
    going = pod(job, "Succeeded", terminating=True)
    plan = decide(ctx(job, deployed_status(job, lifecycle)), Observed(pod=going, result=ended))
    assert status_of(plan)["lifecycleState"] == lifecycle
    assert not any(e.reason == "Deploying" for e in plan.events)


def test_the_coordinator_reporting_finished_waits_for_the_stored_result() -> None:
    job = spec()
    plan = decide(ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator("FINISHED")))
    assert plan.actions == []
    assert status_of(plan)["lifecycleState"] == "Running"


def test_a_failed_job_is_failed_and_degraded() -> None:
    job = spec()
    plan = decide(ctx(job, deployed_status(job)), Observed(result=result("FAILED")))
    assert status_of(plan)["lifecycleState"] == "Failed"
    assert "boom" in status_of(plan)["error"]
    assert _condition(plan, "Degraded")["reason"] == "JobFailed"


def test_a_lost_coordinator_restarts_from_the_latest_checkpoint() -> None:
    job = spec()
    plan = decide(ctx(job, deployed_status(job)), Observed(pod=pod(job, "Failed", reason="OOMKilled")))
    assert _only(plan, DeletePods).names == ("counts-coordinator",)
    assert any(e.reason == "CoordinatorLost" and "OOMKilled" in e.message for e in plan.events)
    plan = decide(ctx(job, deployed_status(job)), Observed(latest_checkpoint=snapshot()))
    assert _only(plan, StartRun).run.restore_from == f"s3://b/chk/{OLD_ID}/chk-9"


def test_a_lost_run_without_a_checkpoint_of_its_own_restarts_from_where_it_started() -> None:
    # The run was restored from an upgrade savepoint and died before its first checkpoint: an older
    # run's checkpoint would replay, and commit again, output that savepoint already committed.
    job = spec()
    status = deployed_status(job)
    status["job"]["restoredFrom"] = "s3://b/sp/sp-1"
    plan = decide(ctx(job, status), Observed())
    assert _only(plan, StartRun).run.restore_from == "s3://b/sp/sp-1"


def test_a_lost_stateless_run_without_a_checkpoint_restarts_empty() -> None:
    job = spec(upgradeMode="stateless", initialSavepoint="s3://b/sp/initial")
    plan = decide(ctx(job, deployed_status(job)), Observed())
    assert _only(plan, StartRun).run.restore_from is None


def test_leftover_taskmanagers_go_before_a_new_run() -> None:
    job = spec()
    plan = decide(ctx(job), Observed(stray_pods=["counts-taskmanager-exec-1"]))
    assert _only(plan, DeletePods).names == ("counts-taskmanager-exec-1",)
    assert not any(isinstance(a, StartRun) for a in plan.actions)


def test_a_savepoint_of_a_job_that_does_not_run_fails_clearly() -> None:
    job = spec(state="suspended")
    sp = savepoint("mine", owned=False)
    plan = decide(
        ctx(job, deployed_status(job, "Suspended")),
        Observed(result=result(savepoint="s3://x"), savepoints=[sp]),
    )
    patch = _only(plan, PatchSavepoint)
    assert patch.status.state == "Failed"
    assert "is not running" in (patch.status.error or "")


def test_a_users_stop_savepoint_sets_the_desired_state() -> None:
    job = spec()
    sp = savepoint("stop-now", "terminate", owned=False)
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=[sp])
    )
    assert _only(plan, SetDesiredState) == SetDesiredState(JobState.FINISHED, "stop-now")
    assert _only(plan, TriggerSavepoint).stop == "terminate"


def test_a_savepoint_completes_from_the_job_result_when_the_coordinator_is_gone() -> None:
    job = spec(state="suspended")
    sp = savepoint("counts-suspend-3", "suspend", state="InProgress", triggerId="t1", jobId=OLD_ID)
    plan = decide(
        ctx(job, deployed_status(job, "Stopping")),
        Observed(result=result(savepoint="s3://b/sp/savepoint-eeee-8"), savepoints=[sp]),
    )
    patch = _only(plan, PatchSavepoint)
    assert (patch.status.state, patch.status.path) == ("Completed", "s3://b/sp/savepoint-eeee-8")


def test_a_savepoint_whose_coordinator_vanished_is_abandoned() -> None:
    job = spec()
    sp = savepoint("manual", state="InProgress", triggerId="t1", jobId=OLD_ID)
    plan = decide(ctx(job, deployed_status(job)), Observed(savepoints=[sp]))
    patch = next(a for a in plan.actions if isinstance(a, PatchSavepoint))
    assert patch.status.state == "Abandoned"
    assert "is gone" in (patch.status.error or "")


def test_periodic_savepoints_are_taken_at_the_interval() -> None:
    job = spec(savepoints={"periodicInterval": "1m"})
    old = savepoint(
        "counts-periodic-1",
        state="Completed",
        path="s3://p1",
        created="2023-11-14T22:00:00Z",
        completionTime="2023-11-14T22:00:01Z",
        labels={"sluice.dev/trigger": "periodic"},
    )
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=[old])
    )
    created = _only(plan, CreateSavepoint).manifest
    assert created["metadata"]["labels"]["sluice.dev/trigger"] == "periodic"
    assert created["spec"]["stop"] == "none"


def test_history_keeps_max_count_of_operator_savepoints_and_the_latest() -> None:
    job = spec(savepoints={"historyMaxCount": 2})
    views = [
        savepoint(
            f"counts-periodic-{i}",
            state="Completed",
            path=f"s3://p{i}",
            completionTime=f"2023-11-14T22:0{i}:00Z",
            labels={"sluice.dev/trigger": "periodic"},
        )
        for i in range(5)
    ]
    views.append(
        savepoint(
            "users-own", state="Completed", path="s3://u", owned=False, completionTime="2023-11-14T21:00:00Z"
        )
    )
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=views)
    )
    from sluice_operator.services.common.plan import DeleteSavepoint

    deleted = sorted(a.name for a in plan.actions if isinstance(a, DeleteSavepoint))
    assert deleted == ["counts-periodic-0", "counts-periodic-1", "counts-periodic-2"]
    assert status_of(plan)["lastSavepoint"]["path"] == "s3://p4"
    # Those deleted now are no restore points any more: the history lists only what stays.
    assert [h["name"] for h in status_of(plan)["savepointHistory"]] == [
        "counts-periodic-4",
        "counts-periodic-3",
        "users-own",
    ]


def test_a_savepoint_whose_files_are_being_disposed_of_is_not_in_the_history() -> None:
    job = spec()
    views = [
        savepoint("new", state="Completed", path="s3://new", completionTime="2023-11-14T22:02:00Z"),
        savepoint("going", state="Completed", path="s3://going", completionTime="2023-11-14T22:01:00Z"),
    ]
    views[1] = dataclasses.replace(views[1], deleting=True)
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=views)
    )
    assert [h["name"] for h in status_of(plan)["savepointHistory"]] == ["new"]


def test_history_max_age_never_deletes_the_latest() -> None:
    job = spec(savepoints={"historyMaxAge": "1h"})
    views = [
        savepoint(
            f"counts-periodic-{i}",
            state="Completed",
            path=f"s3://p{i}",
            completionTime=f"2023-11-1{i}T00:00:00Z",
            labels={"sluice.dev/trigger": "periodic"},
        )
        for i in range(2)
    ]
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=views)
    )
    from sluice_operator.services.common.plan import DeleteSavepoint

    assert [a.name for a in plan.actions if isinstance(a, DeleteSavepoint)] == ["counts-periodic-0"]


def test_conditions_keep_their_transition_time_while_unchanged() -> None:
    job = spec()
    first = decide(ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator()))
    status = {
        **deployed_status(job),
        "conditions": [
            {**c, "lastTransitionTime": "2020-01-01T00:00:00Z"} for c in status_of(first)["conditions"]
        ],
    }
    again = decide(ctx(job, status), Observed(pod=pod(job), coordinator=coordinator()))
    assert {c["lastTransitionTime"] for c in status_of(again)["conditions"]} == {"2020-01-01T00:00:00Z"}


def test_a_usage_error_fails_the_job_until_the_spec_changes() -> None:
    job = spec()
    exited = pod(job, "Failed", reason="Error, exit code 2", exit_code=2, finished_ms=NOW - 60_000)
    plan = decide(ctx(job, deployed_status(job)), Observed(pod=exited))
    assert plan.actions == []
    assert status_of(plan)["lifecycleState"] == "Failed"
    assert "kubectl logs counts-coordinator" in status_of(plan)["error"]
    fixed = spec(pipeline={"file": "examples/other.py"})
    plan = decide(ctx(fixed, deployed_status(job, "Failed")), Observed(pod=exited))
    assert _only(plan, DeletePods).names == ("counts-coordinator",)
    assert status_of(plan)["lifecycleState"] == "Upgrading"


def test_a_crash_loop_restarts_at_most_every_ten_seconds() -> None:
    job = spec()
    recent = pod(job, "Failed", reason="Error, exit code 137", exit_code=137, finished_ms=NOW - 3_000)
    plan = decide(ctx(job, deployed_status(job)), Observed(pod=recent))
    assert plan.actions == []
    assert plan.requeue_s == pytest.approx(7.0)
    older = pod(job, "Failed", reason="Error, exit code 137", exit_code=137, finished_ms=NOW - 11_000)
    plan = decide(ctx(job, deployed_status(job, "Deploying")), Observed(pod=older))
    assert _only(plan, DeletePods).names == ("counts-coordinator",)


def test_spark_that_could_not_reach_the_api_server_is_restarted_not_failed() -> None:
    """`sluice run` exits 4 when Spark did not start because a service did not answer (the
    kube-apiserver under load): the run is started again, as after a crash, and the job is not Failed."""
    job = spec()
    exited = pod(job, "Failed", reason="Error, exit code 4", exit_code=4, finished_ms=NOW - 11_000)
    plan = decide(ctx(job, deployed_status(job, "Deploying")), Observed(pod=exited))
    assert _only(plan, DeletePods).names == ("counts-coordinator",)
    assert status_of(plan)["lifecycleState"] == "Deploying"
    assert "restarting from the latest checkpoint" in status_of(plan)["error"]
