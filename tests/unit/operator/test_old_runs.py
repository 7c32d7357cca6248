"""Which earlier runs' checkpoint directories the operator deletes, and when."""

from __future__ import annotations

from typing import Any

from sluice_operator.services.common.observed import CoordinatorView, Observed
from sluice_operator.services.common.plan import DeleteCheckpointRuns, DeletePods, StartRun
from sluice_operator.services.decide.job import decide
from sluice_operator.services.decide.old_runs import expired_runs, remember_run, run_of

from ._fixtures import spec
from ._situations import NEW_ID, NOW, OLD_ID, ctx, deployed_status, pod, savepoint, status_of

CHK = "s3://bucket/sluice/checkpoints/jobs/counts"
A, B = "a" * 32, "b" * 32


def _coordinator(latest: str | None = f"{CHK}/{OLD_ID}/chk-4", state: str = "RUNNING") -> CoordinatorView:
    record = {"id": 4, "kind": "checkpoint", "status": "COMPLETED", "triggerTime": NOW, "path": latest}
    checkpoints = {"latest": record} if latest else {"latest": None}
    return CoordinatorView.parse({"jobId": OLD_ID, "state": state}, checkpoints)


def _expired(
    coordinator: CoordinatorView | None = None, savepoints: list[Any] | None = None, **status: Any
) -> list[str]:
    job = spec()
    values = {**deployed_status(job, checkpointRuns=[A, B, OLD_ID]), **status}
    return expired_runs(
        ctx(job, values),
        Observed(pod=pod(job), coordinator=coordinator or _coordinator(), savepoints=savepoints or []),
        CHK,
    )


def test_earlier_runs_go_once_the_current_run_has_a_checkpoint_of_its_own() -> None:
    assert _expired() == [A, B]


def test_nothing_goes_before_that_or_while_the_run_is_not_running() -> None:
    assert _expired(_coordinator(latest=None)) == []
    assert _expired(_coordinator(latest=f"{CHK}/{B}/chk-9")) == []  # the restored one, not its own
    assert _expired(_coordinator(state="RESTARTING")) == []
    job = spec()
    no_coordinator = Observed(pod=pod(job))
    assert expired_runs(ctx(job, deployed_status(job, checkpointRuns=[A, OLD_ID])), no_coordinator, CHK) == []


def test_the_run_restored_from_and_runs_holding_savepoints_stay() -> None:
    assert _expired(job={"id": OLD_ID, "state": "RUNNING", "restoredFrom": f"{CHK}/{B}/chk-7"}) == [A]
    inside = savepoint("mine", owned=False, state="Completed", path=f"{CHK}/{A}/savepoint-x")
    assert _expired(savepoints=[inside]) == [B]
    assert _expired(lastSavepoint={"path": f"{CHK}/{B}/sp-1"}) == [A]


def test_only_runs_this_job_started_are_touched() -> None:
    job = spec()
    values = deployed_status(job, checkpointRuns=[OLD_ID])  # A and B exist in storage, not in the record
    assert expired_runs(ctx(job, values), Observed(pod=pod(job), coordinator=_coordinator()), CHK) == []


def test_a_new_run_is_recorded_when_it_starts() -> None:
    job = spec()
    plan = decide(ctx(job, {"checkpointRuns": [A]}), Observed())
    assert status_of(plan)["job"]["id"] == NEW_ID
    assert status_of(plan)["checkpointRuns"] == [A, NEW_ID]
    assert remember_run([A, NEW_ID], NEW_ID) == [A, NEW_ID]


def test_the_decision_deletes_expired_runs_and_says_what_the_record_keeps() -> None:
    job = spec()
    situation = Observed(pod=pod(job), coordinator=_coordinator())
    plan = decide(ctx(job, deployed_status(job, checkpointRuns=[A, B, OLD_ID])), situation)
    assert [a for a in plan.actions if isinstance(a, DeleteCheckpointRuns)] == [
        DeleteCheckpointRuns(CHK, runs=(A, B), remaining=(OLD_ID,))
    ]
    # Decided, not done: the status the plan writes first still lists them until they are deleted.
    assert status_of(plan)["checkpointRuns"] == [A, B, OLD_ID]


def test_no_runs_are_deleted_in_a_plan_that_replaces_the_run() -> None:
    job = spec()
    # A last-state upgrade: the running coordinator goes, and a new run restores from this run's checkpoint.
    changed = spec(parallelism=3, upgradeMode="last-state")
    values = deployed_status(job, checkpointRuns=[A, B, OLD_ID])
    plan = decide(ctx(changed, values), Observed(pod=pod(job), coordinator=_coordinator()))
    assert any(isinstance(a, StartRun | DeletePods) for a in plan.actions)
    assert not [a for a in plan.actions if isinstance(a, DeleteCheckpointRuns)]


def test_run_of_a_path() -> None:
    assert run_of(f"{CHK}/{A}/chk-3", CHK) == A
    assert run_of(f"{CHK}-other/{A}/chk-3", CHK) is None
    assert run_of(None, CHK) is None
