"""The typed views of Kubernetes objects: what each field reads as, and what a missing or wrong one means."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp
import pytest

from sluice_operator.kube import Kube
from sluice_operator.manifests import Owner
from sluice_operator.models import LifecycleState, SavepointStatus, StreamJobStatus
from sluice_operator.services.clients.deps import Deps
from sluice_operator.services.clients.storage import Storage
from sluice_operator.services.common.objects import ObjectMeta, StreamJobObject
from sluice_operator.services.common.observed import Observed
from sluice_operator.services.common.plan import Event
from sluice_operator.services.observe.job import observe_job, pod_view, savepoint_view

from ._fixtures import OWNER, spec

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


class _Listing:
    """A Kubernetes API listing the job's pods and the namespace's Savepoints, as the API server does."""

    def __init__(self, pods: list[dict[str, Any]], savepoints: list[dict[str, Any]]) -> None:
        self.pods, self.savepoints = pods, savepoints

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.pods

    async def list_custom(self, plural: str, namespace: str) -> list[dict[str, Any]]:
        return self.savepoints


def _no_events(job: Owner, event: Event) -> None:
    raise AssertionError(f"observing posts no events, got {event}")


def _observe(kube: _Listing) -> Observed:
    return asyncio.run(
        observe_job(
            Deps(cast(Kube, kube), cast(aiohttp.ClientSession, None), _no_events),
            storage=Storage(),
            owner=OWNER,
            spec=spec(),
            status=StreamJobStatus(),
            checkpoint_dir="file:///nowhere",
            rest_token=None,
        )
    )


def test_observing_finds_the_coordinator_among_the_pods_and_the_rest_as_stray_once_it_exited() -> None:
    coordinator = {"metadata": {"name": "counts-coordinator"}, "status": {"phase": "Failed"}}
    executor = {"metadata": {"name": "counts-taskmanager-1"}, "status": {"phase": "Running"}}
    obs = _observe(_Listing([executor, coordinator], []))
    assert obs.pod is not None and (obs.pod.name, obs.pod.exited) == ("counts-coordinator", True)
    assert obs.stray_pods == ["counts-taskmanager-1"]
    running = {**coordinator, "status": {"phase": "Pending"}}
    assert _observe(_Listing([executor, running], [])).stray_pods == []  # its executors are its own


def test_observing_keeps_the_jobs_savepoints_with_an_invalid_spec_and_leaves_other_jobs_ones() -> None:
    mine = {"metadata": {"name": "a", "ownerReferences": [{"uid": OWNER.uid}]}, "spec": {"jobName": "counts"}}
    broken = {"metadata": {"name": "b"}, "spec": {"jobName": "counts", "stop": "later"}}
    other = {"metadata": {"name": "c"}, "spec": {"jobName": "another"}}
    no_spec = {"metadata": {"name": "d"}}
    obs = _observe(_Listing([], [mine, broken, other, no_spec]))
    assert [(v.name, v.owned, v.spec is None) for v in obs.savepoints] == [
        ("a", True, False),
        ("b", False, True),
    ]
