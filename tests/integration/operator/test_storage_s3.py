"""The operator reads checkpoints and job results from a real S3-protocol server with a secret's keys."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import cast

import aiohttp
import pytest

from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointCoordinator
from sluice.checkpoint.storage import CheckpointStorage
from sluice.transport.messages import ToTaskManager
from sluice_contract.integrity import seal
from sluice_operator.kube import Kube
from sluice_operator.manifests import Owner
from sluice_operator.models import OperatorConfig, StreamJobSpec, StreamJobStatus
from sluice_operator.services.act.execute import execute
from sluice_operator.services.clients.deps import Deps
from sluice_operator.services.clients.storage import Storage, storage_options
from sluice_operator.services.common.context import JobContext
from sluice_operator.services.common.observed import CoordinatorView, Observed
from sluice_operator.services.common.plan import Event, Plan
from sluice_operator.services.decide.old_runs import plan_expired_runs
from testkit.s3 import S3Server
from unit.runtime._graphs import graph
from unit.runtime._support import SOURCE_STATE, TEST_KEY, acknowledge_all

pytestmark = pytest.mark.s3


def _write(server: S3Server, path: str, data: object) -> None:
    with server.filesystem().open(path, "w") as handle:
        handle.write(json.dumps(data))


def test_latest_checkpoint_result_and_disposal_on_s3(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    root = f"{bucket}/checkpoints/ns/job"
    for run, n, stamp in [("r1", 3, 100), ("r2", 7, 300), ("r2", 8, 400)]:
        _write(
            s3_server,
            f"{root}/{run}/chk-{n}/_metadata",
            {
                "checkpointId": n,
                "jobId": run,
                "kind": "checkpoint",
                "timestamp": stamp,
                "stopMode": None,
                "operators": [{"uid": "numbers", "fullyFinished": n == 8}],
            },
        )
    _write(
        s3_server,
        f"{root}/r2/job-result.json",
        seal(
            {
                "jobId": "r2",
                "state": "FINISHED",
                "timestamp": 500,
                "stopSavepoint": f"{bucket}/sp/savepoint-r2-9",
                "lastCheckpoint": f"{root}/r2/chk-8",
                "error": None,
            },
            TEST_KEY.secret,
        ),
    )
    _write(s3_server, f"{bucket}/sp/savepoint-r2-9/_metadata", {"checkpointId": 9, "kind": "savepoint"})
    # The secret's keys, as a StreamJob's storageSecret would hold them; nothing from the environment.
    storage = Storage(storage_options(root, s3_server.env), state_key=TEST_KEY.secret)

    async def scenario() -> None:
        latest = await storage.latest_checkpoint(root)
        assert latest is not None
        assert (latest.path, latest.checkpoint_id, latest.all_finished) == (f"{root}/r2/chk-8", 8, True)
        result = await storage.job_result(root, "r2")
        assert result is not None and result.stop_savepoint == f"{bucket}/sp/savepoint-r2-9"
        # A newer checkpoint appears between two reconciles: no stale listing hides it.
        _write(
            s3_server,
            f"{root}/r3/chk-1/_metadata",
            {"checkpointId": 1, "jobId": "r3", "kind": "checkpoint", "timestamp": 900, "operators": []},
        )
        newer = await storage.latest_checkpoint(root)
        assert newer is not None and newer.job_id == "r3"
        assert await storage.dispose(f"{bucket}/sp/savepoint-r2-9") is True
        assert not s3_server.filesystem().exists(f"{bucket}/sp/savepoint-r2-9/_metadata")

    asyncio.run(scenario())


class _RecordingKube:
    """Records the status patches and the events; the storage side is what this test is about."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, str, dict[str, object]]] = []
        self.events: list[Event] = []

    def post(self, job: Owner, event: Event) -> None:
        self.events.append(event)

    async def patch_status(self, plural: str, namespace: str, name: str, status: dict[str, object]) -> object:
        self.patches.append((plural, namespace, name, status))
        return {}


async def _decide_and_delete(
    kube: _RecordingKube, ctx: JobContext, obs: Observed, storage: Storage
) -> list[Event]:
    """The decide step's part (which runs expired), then the act step's (delete, record them gone);
    the events the recorder posted."""
    plan = Plan(status=ctx.status)
    plan_expired_runs(ctx, obs, plan)
    posted = len(kube.events)
    async with aiohttp.ClientSession() as http:
        await execute(Deps(cast(Kube, kube), http, kube.post), obs, plan, ctx.owner, storage=storage)
    return kube.events[posted:]


def test_earlier_runs_checkpoint_directories_are_deleted_on_s3(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    root = f"{bucket}/checkpoints/ns/job"
    old, restored, foreign, current = "a" * 32, "b" * 32, "c" * 32, "d" * 32
    fs = s3_server.filesystem()
    for run in (old, restored, foreign, current):
        _write(s3_server, f"{root}/{run}/chk-3/_metadata", {"checkpointId": 3, "jobId": run})
        _write(s3_server, f"{root}/{run}/chk-3/state-0", {"x": 1})
        _write(s3_server, f"{root}/{run}/shared/file-1", {"y": 2})
        _write(s3_server, f"{root}/{run}/job-result.json", {"jobId": run, "state": "FAILED"})
    spec = StreamJobSpec.model_validate(
        {"image": "sluice:dev", "pipeline": {"file": "p.py"}, "checkpoints": {"storage": root}}
    )
    status = StreamJobStatus.model_validate(
        {
            "lifecycleState": "Running",
            "job": {"id": current, "state": "RUNNING", "restoredFrom": f"{root}/{restored}/chk-3"},
            "checkpointRuns": [old, restored, current],  # `foreign` is not this job's
        }
    )
    ctx = JobContext(
        owner=Owner(name="job", namespace="ns", uid="u"),
        generation=1,
        spec=spec,
        status=status,
        config=OperatorConfig(storage=bucket),
        now_ms=1,
        new_job_id="",
    )
    obs = Observed(
        coordinator=CoordinatorView.parse(
            {"jobId": current, "state": "RUNNING"},
            {
                "latest": {
                    "id": 3,
                    "kind": "checkpoint",
                    "status": "COMPLETED",
                    "triggerTime": 1,
                    "path": f"{root}/{current}/chk-3",
                }
            },
        )
    )
    kube = _RecordingKube()
    storage = Storage(storage_options(root, s3_server.env))

    events = asyncio.run(_decide_and_delete(kube, ctx, obs, storage))

    fs.invalidate_cache()
    assert not fs.exists(f"{root}/{old}"), fs.find(f"{root}/{old}")
    for kept in (restored, foreign, current):
        assert fs.exists(f"{root}/{kept}/chk-3/_metadata") and fs.exists(f"{root}/{kept}/shared/file-1")
    assert kube.patches == [("streamjobs", "ns", "job", {"checkpointRuns": [restored, current]})]
    assert [e.reason for e in events] == ["CheckpointsDeleted"] and old in events[0].message

    # Once recorded as gone, nothing is deleted again (a storage outage mid-way would retry the rest).
    after = ctx.status.model_copy(update={"checkpoint_runs": [restored, current]})
    again = asyncio.run(_decide_and_delete(kube, dataclasses.replace(ctx, status=after), obs, storage))
    assert again == [] and len(kube.patches) == 1


def test_a_damaged_newest_checkpoint_on_s3_is_passed_over(s3_bucket: str, s3_server: S3Server) -> None:
    # Real checkpoints, written by the runtime's checkpoint coordinator to the S3-protocol server.
    sent: list[ToTaskManager] = []
    root = f"{s3_bucket}/chk"

    async def two_checkpoints() -> None:
        storage = CheckpointStorage(root, "job", TEST_KEY)
        coord = CheckpointCoordinator(
            graph([(["src"], 2)], []),
            storage,
            CheckpointConfig(interval_s=None),
            lambda m, _: sent.append(m),
            dict,
        )
        coord.config.retained = 2
        for checkpoint in (1, 2):
            coord.trigger()
            acknowledge_all(coord, checkpoint)
            await coord.settle()

    asyncio.run(two_checkpoints())
    storage = Storage(storage_options(root, s3_server.env))
    latest = asyncio.run(storage.latest_checkpoint(root, "job"))
    assert latest is not None and latest.path == f"{root}/job/chk-2"

    fs = s3_server.filesystem()
    state_file = f"{root}/job/chk-2/src-1.state".removeprefix("s3://")
    with fs.open(state_file, "wb") as handle:
        handle.write(SOURCE_STATE[:4])  # a state file cut short
    latest = asyncio.run(storage.latest_checkpoint(root, "job"))
    assert latest is not None and latest.path == f"{root}/job/chk-1"
    fs.rm(state_file)
    latest = asyncio.run(storage.latest_checkpoint(root, "job"))
    assert latest is not None and latest.path == f"{root}/job/chk-1"
