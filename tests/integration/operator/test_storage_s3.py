"""The operator reads checkpoints and job results from a real S3-protocol server with a secret's keys."""

from __future__ import annotations

import asyncio
import json

import pytest

from sluice_operator.services.storage import Storage, storage_options
from testkit.s3 import S3Server

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
        {
            "jobId": "r2",
            "state": "FINISHED",
            "timestamp": 500,
            "lastSavepoint": f"{bucket}/sp/savepoint-r2-9",
            "lastCheckpoint": f"{root}/r2/chk-8",
            "error": None,
        },
    )
    _write(s3_server, f"{bucket}/sp/savepoint-r2-9/_metadata", {"checkpointId": 9, "kind": "savepoint"})
    # The secret's keys, as a StreamJob's storageSecret would hold them; nothing from the environment.
    storage = Storage(storage_options(root, s3_server.env))

    async def scenario() -> None:
        latest = await storage.latest_checkpoint(root)
        assert latest is not None
        assert (latest.path, latest.checkpoint_id, latest.all_finished) == (f"{root}/r2/chk-8", 8, True)
        result = await storage.job_result(root, "r2")
        assert result is not None and result.last_savepoint == f"{bucket}/sp/savepoint-r2-9"
        # A newer checkpoint appears between two reconciles: no stale listing hides it.
        _write(
            s3_server,
            f"{root}/r3/chk-1/_metadata",
            {"checkpointId": 1, "jobId": "r3", "timestamp": 900, "operators": []},
        )
        newer = await storage.latest_checkpoint(root)
        assert newer is not None and newer.job_id == "r3"
        assert await storage.dispose(f"{bucket}/sp/savepoint-r2-9") is True
        assert not s3_server.filesystem().exists(f"{bucket}/sp/savepoint-r2-9/_metadata")

    asyncio.run(scenario())
