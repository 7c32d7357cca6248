"""Acting on a plan: the status it writes and when, what it writes for a trigger it cannot make, what
it deletes, and what it hands back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest

from sluice_operator.kube import Kube
from sluice_operator.manifests import Owner
from sluice_operator.services.act.execute import execute
from sluice_operator.services.act.record import action_events
from sluice_operator.services.clients.deps import Deps
from sluice_operator.services.clients.storage import Storage
from sluice_operator.services.common.acted import Done, Refused, RunsDeleted
from sluice_operator.services.common.observed import Observed
from sluice_operator.services.common.plan import (
    DeleteCheckpointRuns,
    DeleteSavepoint,
    DisposeSavepointFiles,
    Event,
    Plan,
    TriggerSavepoint,
)
from sluice_operator.services.decide.job import decide

from ._fixtures import OWNER, spec
from ._situations import coordinator, ctx, deployed_status, pod, savepoint


class _Recording:
    """A Kube that records the writes: the savepoint status written is what this test checks."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, Any]] = []  # status patches, deletions and events, in order

    def post(self, job: Owner, event: Event) -> None:
        self.writes.append(("event", event.savepoint or job.name, event.reason))

    def deps(self, http: aiohttp.ClientSession) -> Deps:
        return Deps(cast(Kube, self), http, self.post)

    async def patch_status(self, plural: str, namespace: str, name: str, patch: Any) -> None:
        self.writes.append(("patch_status", name, patch))

    async def delete_custom(self, plural: str, namespace: str, name: str) -> None:
        self.writes.append(("delete_custom", name, None))


def _execute(plan: Plan, obs: Observed, kube: _Recording) -> Any:
    async def go() -> Any:
        async with aiohttp.ClientSession() as http:
            return await execute(kube.deps(http), obs, plan, OWNER)

    return asyncio.run(go())


def test_a_trigger_without_a_coordinator_ip_writes_the_decided_refusal_and_acting_goes_on() -> None:
    job = spec()
    view = savepoint("manual")  # backoffLimit 0: the first refusal fails it
    decided = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=[view])
    )
    (trigger,) = [a for a in decided.actions if isinstance(a, TriggerSavepoint)]
    plan = Plan(actions=[trigger, DeleteSavepoint("old", "too many")])
    kube = _Recording()
    # The pod lost its IP between observing and acting (rescheduled): the coordinator cannot be asked.
    executed = _execute(plan, Observed(pod=pod(job, ip=None)), kube)
    refused, deleted = executed.results
    assert isinstance(refused, Refused) and isinstance(deleted, Done)
    assert (refused.status.state, refused.status.failures) == ("Failed", 1)
    assert refused.status.error == "the coordinator pod has no IP"
    written = kube.writes[0]
    assert written[:2] == ("patch_status", "manual")
    assert (written[2]["state"], written[2]["failures"], written[2]["error"]) == (
        "Failed",
        1,
        "the coordinator pod has no IP",
    )
    assert kube.writes[1] == ("delete_custom", "old", None), "a refused trigger does not stop the rest"
    assert [e.reason for e in action_events(executed)] == ["SavepointFailed", "Failed", "SavepointDeleted"]
    # Posted once acting is over, through the recorder: on the job, on the Savepoint, on the job.
    assert kube.writes[2:] == [
        ("event", OWNER.name, "SavepointFailed"),
        ("event", "manual", "Failed"),
        ("event", OWNER.name, "SavepointDeleted"),
    ]
    assert plan.events == [], "acting reports what it did; the plan it was given stays as decided"


def test_the_decided_status_is_written_before_any_action_and_the_events_after() -> None:
    kube = _Recording()
    plan = Plan(actions=[DeleteSavepoint("old", "too many")], events=[Event("Normal", "Running", "up")])
    said = [Event("Warning", "Error", "it broke")]  # what the status change itself says

    async def go() -> None:
        async with aiohttp.ClientSession() as http:
            await execute(kube.deps(http), Observed(), plan, OWNER, status={"error": "it broke"}, said=said)

    asyncio.run(go())
    assert kube.writes == [
        ("patch_status", OWNER.name, {"error": "it broke"}),
        ("delete_custom", "old", None),
        ("event", OWNER.name, "Running"),
        ("event", OWNER.name, "Error"),
        ("event", OWNER.name, "SavepointDeleted"),
    ]


def test_expired_runs_are_deleted_then_recorded_gone(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    for run in ("a", "b"):
        (root / run / "chk-1").mkdir(parents=True)
        (root / run / "chk-1" / "_metadata").write_text("{}")
    # "c" is recorded but its directory went already (a reconcile that deleted it and then stopped).
    action = DeleteCheckpointRuns(str(root), runs=("a", "c"), remaining=("b",))
    kube = _Recording()

    async def go() -> Any:
        async with aiohttp.ClientSession() as http:
            deps = kube.deps(http)
            return await execute(deps, Observed(), Plan(actions=[action]), OWNER, storage=Storage())

    executed = asyncio.run(go())
    assert sorted(p.name for p in root.iterdir()) == ["b"]
    assert executed.results == (RunsDeleted(action, deleted=("a",)),)
    assert kube.writes == [
        ("patch_status", OWNER.name, {"checkpointRuns": ["b"]}),
        ("event", OWNER.name, "CheckpointsDeleted"),
    ]


def test_runs_whose_deletion_fails_stay_recorded(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "a" / "chk-1").mkdir(parents=True)
    kube = _Recording()

    class _Failing(Storage):
        async def dispose(self, path: str) -> bool:
            raise OSError(f"storage unavailable: {path}")

    async def go() -> Any:
        async with aiohttp.ClientSession() as http:
            plan = Plan(actions=[DeleteCheckpointRuns(str(root), runs=("a",), remaining=())])
            return await execute(kube.deps(http), Observed(), plan, OWNER, storage=_Failing())

    with pytest.raises(OSError, match="storage unavailable"):
        asyncio.run(go())
    assert kube.writes == [], (
        "nothing recorded, nothing said: the next reconcile decides to delete them again"
    )


def test_a_savepoints_files_are_disposed_of_and_said_so_on_the_savepoint(tmp_path: Path) -> None:
    path = tmp_path / "savepoint-counts-7"
    path.mkdir()
    (path / "_metadata").write_text("{}")
    dispose = DisposeSavepointFiles("counts-upgrade-7", str(path), uid="sp-uid")
    kube = _Recording()

    async def go() -> str:
        async with aiohttp.ClientSession() as http:
            plan = Plan(actions=[dispose])
            executed = await execute(kube.deps(http), Observed(), plan, OWNER, storage=Storage())
        (said,) = action_events(executed)
        return said.message

    assert asyncio.run(go()) == f"deleted savepoint files at {path}"
    assert not path.exists()
    # Its finalizer runs again (the first run's removal of the finalizer was lost): nothing to delete.
    assert asyncio.run(go()) == f"{path} was already gone"
    assert kube.writes == [("event", "counts-upgrade-7", "Disposed")] * 2
