"""Turning Kubernetes objects and storage files into observations."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sluice_contract.codec import DocumentError
from sluice_contract.integrity import seal
from sluice_operator.services.act.record import status_delta
from sluice_operator.services.clients.storage import Storage, storage_options
from sluice_operator.services.observe.job import pod_view, savepoint_view

KEY = b"the namespace's state key, 32 bytes"


def test_pod_view_reads_annotations_and_exit_reason() -> None:
    pod = {
        "metadata": {
            "name": "j-coordinator",
            "annotations": {"sluice.dev/job-id": "abc", "sluice.dev/spec-hash": "h"},
            "deletionTimestamp": "2024-01-01T00:00:00Z",
        },
        "status": {
            "phase": "Failed",
            "podIP": "10.0.0.1",
            "containerStatuses": [
                {
                    "name": "coordinator",
                    "state": {
                        "terminated": {
                            "reason": "OOMKilled",
                            "exitCode": 137,
                            "finishedAt": "2024-01-01T00:00:10Z",
                        }
                    },
                }
            ],
        },
    }
    view = pod_view(pod)
    assert (view.job_id, view.spec_hash, view.ip) == ("abc", "h", "10.0.0.1")
    assert (view.reason, view.exit_code, view.finished_ms) == (
        "OOMKilled, exit code 137",
        137,
        1_704_067_210_000,
    )
    assert view.exited and view.terminating


def test_savepoint_view_keeps_invalid_specs_with_their_error() -> None:
    view = savepoint_view(
        {
            "metadata": {"name": "s", "ownerReferences": [{"uid": "u1"}]},
            "spec": {"jobName": "j", "stop": "later"},
        },
        "u1",
    )
    assert view.spec is None and view.owned
    assert view.spec_error is not None and "spec.stop" in view.spec_error


def test_status_delta_nulls_what_disappeared() -> None:
    old = {"lifecycleState": "Running", "error": "x", "job": {"id": "a"}}
    new = {"lifecycleState": "Running", "job": {"id": "b"}}
    assert status_delta(old, new) == {"job": {"id": "b"}, "error": None}
    assert status_delta(new, new) == {}


def test_status_delta_nulls_what_disappeared_inside_objects() -> None:
    # A merge patch would otherwise keep the ended run's endTime in the new run's status.job.
    old = {"job": {"id": "a", "state": "FINISHED", "endTime": "2026-01-01T00:00:00Z"}}
    new = {"job": {"id": "b", "state": "CREATED"}}
    assert status_delta(old, new) == {"job": {"id": "b", "state": "CREATED", "endTime": None}}


def test_s3_storage_options_from_a_secret() -> None:
    options = storage_options(
        "s3://b/p",
        {
            "AWS_ACCESS_KEY_ID": "k",
            "AWS_SECRET_ACCESS_KEY": "s",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
            "AWS_REGION": "eu-west-1",
        },
    )
    assert options == {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
    }
    assert storage_options("file:///x", {"AWS_ACCESS_KEY_ID": "k"}) == {}


def _checkpoint(root: Path, run: str, n: int, timestamp: int, finished: bool) -> None:
    folder = root / run / f"chk-{n}"
    folder.mkdir(parents=True)
    meta = {
        "checkpointId": n,
        "jobId": run,
        "kind": "checkpoint",
        "timestamp": timestamp,
        "stopMode": None,
        "operators": [{"uid": "src", "fullyFinished": finished}, {"uid": "sink", "fullyFinished": finished}],
    }
    (folder / "_metadata").write_text(json.dumps(meta))


def test_latest_checkpoint_across_runs_and_job_results(tmp_path: Path) -> None:
    _checkpoint(tmp_path, "run1", 4, 1_000, False)
    _checkpoint(tmp_path, "run1", 5, 2_000, False)
    _checkpoint(tmp_path, "run2", 1, 3_000, True)
    (tmp_path / "run2" / "chk-2").mkdir()  # no _metadata: not a checkpoint (yet)
    (tmp_path / "run2" / "job-result.json").write_text(
        json.dumps(
            seal(
                {
                    "jobId": "run2",
                    "state": "FINISHED",
                    "timestamp": 3_500,
                    "lastSavepoint": None,
                    "lastCheckpoint": f"file://{tmp_path}/run2/chk-1",
                    "error": None,
                },
                KEY,
            )
        )
    )
    storage = Storage(state_key=KEY)
    latest = asyncio.run(storage.latest_checkpoint(f"file://{tmp_path}"))
    assert latest is not None
    assert (latest.path, latest.checkpoint_id, latest.all_finished) == (
        f"file://{tmp_path}/run2/chk-1",
        1,
        True,
    )
    result = asyncio.run(storage.job_result(f"file://{tmp_path}", "run2"))
    assert result is not None and result.state == "FINISHED" and result.last_checkpoint == latest.path
    assert asyncio.run(storage.job_result(f"file://{tmp_path}", "run1")) is None
    assert asyncio.run(storage.latest_checkpoint(f"file://{tmp_path}/missing")) is None


def test_a_run_that_ended_on_its_own_after_a_plain_savepoint_has_no_stop_savepoint(tmp_path: Path) -> None:
    # A bounded job with periodic savepoints: restarting it from its last savepoint would replay (and
    # write again) everything after that savepoint. Only the savepoint a run stopped with is one.
    (tmp_path / "run3").mkdir()
    ended = {
        "jobId": "run3",
        "state": "FINISHED",
        "timestamp": 3_500,
        "lastSavepoint": "file:///sp/savepoint-run3-4",
    }
    (tmp_path / "run3" / "job-result.json").write_text(
        json.dumps(seal({**ended, "stopSavepoint": None}, KEY))
    )
    result = asyncio.run(Storage(state_key=KEY).job_result(f"file://{tmp_path}", "run3"))
    assert result is not None and result.state == "FINISHED" and result.stop_savepoint is None
    (tmp_path / "run3" / "job-result.json").write_text(
        json.dumps(seal({**ended, "stopSavepoint": "file:///sp/s-5"}, KEY))
    )
    result = asyncio.run(Storage(state_key=KEY).job_result(f"file://{tmp_path}", "run3"))
    assert result is not None and result.stop_savepoint == "file:///sp/s-5"


def test_latest_checkpoint_of_one_run_ignores_newer_runs(tmp_path: Path) -> None:
    _checkpoint(tmp_path, "run1", 9, 1_000, False)
    _checkpoint(tmp_path, "run1", 10, 2_000, False)
    _checkpoint(tmp_path, "run2", 1, 3_000, False)
    storage = Storage()
    latest = asyncio.run(storage.latest_checkpoint(f"file://{tmp_path}", "run1"))
    assert latest is not None
    assert (latest.path, latest.checkpoint_id, latest.job_id) == (
        f"file://{tmp_path}/run1/chk-10",
        10,
        "run1",
    )
    assert asyncio.run(storage.latest_checkpoint(f"file://{tmp_path}", "run3")) is None


def test_dispose_removes_a_savepoint_directory(tmp_path: Path) -> None:
    target = tmp_path / "savepoint-ab-3"
    target.mkdir()
    (target / "_metadata").write_text("{}")
    storage = Storage()
    assert asyncio.run(storage.dispose(f"file://{target}")) is True
    assert not target.exists()
    assert asyncio.run(storage.dispose(f"file://{target}")) is False


def test_a_result_the_runs_coordinator_did_not_seal_is_not_believed(tmp_path: Path) -> None:
    # Whoever can write to the bucket could otherwise end any run for good: the operator would take a
    # planted FINISHED result as the run's end, delete its coordinator and never start it again.
    (tmp_path / "run4").mkdir()
    ended = {"jobId": "run4", "state": "FINISHED", "timestamp": 3_500, "stopSavepoint": None}
    result_file = tmp_path / "run4" / "job-result.json"
    planted = {
        "no MAC": ended,
        "another key": seal(ended, b"another deployment's key, 32 byte"),
        "edited after sealing": {**seal({**ended, "state": "FAILED"}, KEY), "state": "FINISHED"},
        "another run's": seal({**ended, "jobId": "run5"}, KEY),
    }
    for why, document in planted.items():
        result_file.write_text(json.dumps(document))
        assert asyncio.run(Storage(state_key=KEY).job_result(f"file://{tmp_path}", "run4")) is None, why
    # Without the namespace's key nothing can be believed; with it, the sealed result is.
    result_file.write_text(json.dumps(seal(ended, KEY)))
    assert asyncio.run(Storage().job_result(f"file://{tmp_path}", "run4")) is None
    found = asyncio.run(Storage(state_key=KEY).job_result(f"file://{tmp_path}", "run4"))
    assert found is not None and found.state == "FINISHED"


def test_a_result_names_the_request_id_of_its_stop_only_under_its_mac(tmp_path: Path) -> None:
    # The request id is what lets the operator complete a Savepoint from storage alone: one planted or
    # edited into a result must not complete someone's Savepoint with a savepoint of the planter's.
    (tmp_path / "run6").mkdir()
    result_file = tmp_path / "run6" / "job-result.json"
    stopped = {
        "jobId": "run6",
        "state": "FINISHED",
        "timestamp": 3_500,
        "stopSavepoint": "file:///sp/s-7",
        "stopRequestId": "uid.0",
    }

    def read() -> Any:
        return asyncio.run(Storage(state_key=KEY).job_result(f"file://{tmp_path}", "run6"))

    result_file.write_text(json.dumps(seal(stopped, KEY)))
    assert (read().stop_savepoint, read().stop_request_id) == ("file:///sp/s-7", "uid.0")
    result_file.write_text(json.dumps({**seal(stopped, KEY), "stopRequestId": "victim-uid.0"}))
    assert read() is None, "edited after sealing"
    result_file.write_text(json.dumps(stopped))
    assert read() is None, "no MAC"
    # Stored before results named the request (no field), or with none.
    older = {k: v for k, v in stopped.items() if k != "stopRequestId"}
    for document in (older, {**stopped, "stopRequestId": None}):
        result_file.write_text(json.dumps(seal(document, KEY)))
        assert read().stop_request_id is None, document
        assert read().stop_savepoint == "file:///sp/s-7"
    # Sealed with a value no runtime writes: refused naming the field, not read as no request.
    result_file.write_text(json.dumps(seal({**stopped, "stopRequestId": 7}, KEY)))
    with pytest.raises(DocumentError, match=r"job-result\.json: 'stopRequestId' must be a string or null"):
        read()


def test_a_checkpoint_whose_head_cannot_be_read_is_passed_over_for_the_one_before(tmp_path: Path) -> None:
    # Read by the contract's `MetadataSummary`, as the runtime reads it: a field it cannot read makes the
    # checkpoint as unusable as a missing state file, so the run's restore point is the one before.
    _checkpoint(tmp_path, "run1", 4, 1_000, False)
    _checkpoint(tmp_path, "run1", 5, 2_000, False)
    stored = tmp_path / "run1" / "chk-5" / "_metadata"
    stored.write_text(json.dumps({**json.loads(stored.read_text()), "kind": "backup"}))
    latest = asyncio.run(Storage().latest_checkpoint(f"file://{tmp_path}", "run1"))
    assert latest is not None and latest.checkpoint_id == 4
    with pytest.raises(DocumentError, match=r"chk-5/_metadata: 'kind' must be one of"):
        asyncio.run(Storage().snapshot(f"file://{tmp_path}/run1/chk-5"))
    snapshot = asyncio.run(Storage().snapshot(f"file://{tmp_path}/run1/chk-4"))
    assert snapshot is not None and (snapshot.kind, snapshot.timestamp, snapshot.operators) == (
        "checkpoint",
        1_000,
        ("src", "sink"),
    )
