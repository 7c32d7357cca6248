"""The typed views of Kubernetes objects: what each field reads as, and what a missing or wrong one means."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_operator.models import LifecycleState, SavepointStatus, StreamJobStatus
from sluice_operator.services.common.objects import ObjectMeta, StreamJobObject
from sluice_operator.services.observe.job import pod_view, savepoint_view

from ._fixtures import OWNER

_JOB_META = {"name": OWNER.name, "namespace": OWNER.namespace, "uid": OWNER.uid}


def test_object_meta_reads_what_the_operator_uses() -> None:
    meta = ObjectMeta.parse(
        {
            "metadata": {
                "name": "counts-coordinator",
                "namespace": "jobs",
                "uid": "u",
                "generation": 3,
                "labels": {"a": "1"},
                "annotations": {"b": "2"},
                "ownerReferences": [{"uid": "owner-1"}, {"uid": "owner-2"}],
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-01T00:00:10Z",
                "finalizers": ["f"],
            }
        }
    )
    assert (meta.name, meta.namespace, meta.uid, meta.generation) == ("counts-coordinator", "jobs", "u", 3)
    assert (dict(meta.labels), dict(meta.annotations)) == ({"a": "1"}, {"b": "2"})
    assert meta.owned_by("owner-2") and not meta.owned_by("owner-3") and not meta.owned_by(None)
    assert meta.created == "2024-01-01T00:00:00Z"
    assert (meta.deletion_ms, meta.deleting) == (1_704_067_210_000, True)
    assert meta.finalizers == ("f",)


@pytest.mark.parametrize("metadata", [None, {}, {"labels": None, "annotations": None, "finalizers": None}])
def test_object_meta_reads_missing_fields_as_empty(metadata: dict[str, Any] | None) -> None:
    meta = ObjectMeta.parse({"metadata": metadata})
    assert (meta.namespace, meta.uid, meta.generation, meta.created) == ("", None, 0, "")
    assert (dict(meta.labels), dict(meta.annotations), meta.owner_uids, meta.finalizers) == ({}, {}, (), ())
    assert (meta.deletion_ms, meta.deleting) == (None, False)
    assert not meta.owned_by("anyone")


def test_a_deletion_timestamp_that_does_not_parse_still_means_deleting() -> None:
    meta = ObjectMeta.parse({"metadata": {"name": "j", "deletionTimestamp": "soon"}})
    assert meta.deleting and meta.deletion_ms is None


def test_streamjob_object_reads_owner_spec_and_status() -> None:
    recorded = {"lifecycleState": "Running", "custom": {"kept": True}}
    job = StreamJobObject.parse(
        {"metadata": {**_JOB_META, "generation": 4}, "spec": {"image": "i"}, "status": recorded}
    )
    assert job.owner == OWNER and job.meta.generation == 4
    assert job.spec == {"image": "i"}
    assert job.status.lifecycle_state is LifecycleState.RUNNING
    assert job.recorded == recorded and job.recorded is not recorded  # a patch is the difference from it


@pytest.mark.parametrize("status", [None, {}, {"lifecycleState": "Dancing"}, {"job": "not an object"}])
def test_a_streamjob_status_missing_or_not_parsing_counts_as_none(status: Any) -> None:
    job = StreamJobObject.parse({"metadata": _JOB_META, "spec": None, "status": status})
    assert job.status == StreamJobStatus()
    assert job.recorded == (status or {})
    assert job.spec is None  # validated later, where the error names the field


def test_a_streamjob_without_its_identity_is_refused() -> None:
    # The API server always sets them; without them no action could name what it acts for.
    with pytest.raises(KeyError, match="uid"):
        StreamJobObject.parse({"metadata": {"name": "j", "namespace": "n"}})


def test_a_pod_without_status_is_pending_with_nothing_known() -> None:
    view = pod_view({"metadata": {"name": "counts-coordinator"}})
    assert (view.name, view.phase, view.ip, view.job_id, view.exit_code) == (
        "counts-coordinator",
        "Pending",
        None,
        None,
        None,
    )
    assert not view.terminating and not view.exited


def test_a_pod_exit_code_of_the_wrong_type_is_not_taken() -> None:
    terminated = {"exitCode": "137", "reason": "Error"}
    pod = {
        "metadata": {"name": "counts-coordinator"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "coordinator", "state": {"terminated": terminated}}],
        },
    }
    view = pod_view(pod)
    assert view.exit_code is None and view.reason == "Error, exit code 137" and view.finished_ms is None


def test_a_savepoint_without_spec_or_status_is_kept_with_its_error() -> None:
    view = savepoint_view({"metadata": {"name": "s", "namespace": "jobs"}}, OWNER.uid)
    assert view.spec is None and view.spec_error is not None
    assert (view.name, view.namespace, view.owned, view.deleting, view.finalized) == (
        "s",
        "jobs",
        False,
        False,
        False,
    )
    assert view.status.trigger_id is None


def test_a_savepoint_status_of_the_wrong_type_counts_as_none() -> None:
    view = savepoint_view(
        {"metadata": {"name": "s"}, "spec": {"jobName": "counts"}, "status": {"state": 7}}, None
    )
    assert view.spec is not None and view.status == SavepointStatus()
