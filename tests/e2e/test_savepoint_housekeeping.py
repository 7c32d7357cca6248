"""Savepoint housekeeping for real: periodic savepoints, history clean-up, disposal, savepoint on deletion.

The unbounded example job (examples/k8s/streamjob.yaml, on one TaskManager: _jobs.py) runs with short
intervals set per test; every savepoint is checked where it matters, in the S3 storage (`_metadata` of
kind savepoint, of this run).
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
import yaml

from e2e._cluster import JOB_LABEL, E2ECluster
from e2e._jobs import UNBOUNDED_NAME, unbounded_job, unbounded_manifest
from e2e._outputs import assert_unbounded_exactly_once, generated_prefixes
from testkit.outputs import read_output

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

JOB = UNBOUNDED_NAME
TRIGGER_LABEL = "sluice.dev/trigger"
PERIODIC = re.compile(rf"^{JOB}-periodic-(\d+)$")
Objects = dict[str, dict[str, Any]]  # Savepoints by name


def _job_with(**savepoints: Any) -> str:
    """The example job with its `spec.savepoints` replaced, as YAML for `kubectl apply`."""
    manifest = unbounded_manifest()
    manifest["spec"]["savepoints"] = savepoints
    return yaml.safe_dump(manifest)


def _start(e2e: E2ECluster, manifest: str) -> str:
    e2e.apply(manifest)
    return str(e2e.wait_running_with_checkpoint(JOB)["status"]["job"]["id"])


def _assert_savepoint_of(e2e: E2ECluster, path: str, run: str, stop_mode: str | None) -> None:
    metadata = e2e.storage.read_json(f"{path}/_metadata")
    assert (metadata["kind"], metadata["jobId"], metadata["stopMode"]) == ("savepoint", run, stop_mode), (
        path,
        metadata,
    )
    assert path.startswith(f"{e2e.storage.root}/savepoints/{e2e.namespace}/{JOB}/"), path


def _absent(e2e: E2ECluster, path: str) -> Callable[[], bool]:
    return lambda: not e2e.storage.exists(path)


def _events(e2e: E2ECluster, reason: str) -> list[str]:
    return [str(e["message"]) for e in e2e.items("events") if e.get("reason") == reason]


@dataclass
class PeriodicWatch:
    """What polling the namespace's Savepoints saw: every one that completed, and which are gone since.

    Any Savepoint that fails fails the test: with a healthy job, housekeeping must not cost a savepoint.
    """

    e2e: E2ECluster
    completed: dict[str, str] = field(default_factory=dict)  # name -> path, in order of completion
    deleted: set[str] = field(default_factory=set)

    def poll(self) -> Objects:
        present = {s["metadata"]["name"]: s for s in self.e2e.items("savepoints")}
        for name, savepoint in present.items():
            status = savepoint.get("status") or {}
            if status.get("state") in ("Failed", "Abandoned"):
                raise AssertionError(f"savepoint {name} {status['state']}: {json.dumps(status)}")
            if status.get("state") == "Completed" and name not in self.completed:
                self.completed[name] = status["path"]
        self.deleted |= set(self.completed) - set(present)
        return present

    def until(
        self, what: str, enough: Callable[[PeriodicWatch, Objects], bool], timeout: float = 180.0
    ) -> Objects:
        def probe() -> Objects | None:
            present = self.poll()
            return present if enough(self, present) else None

        return self.e2e.wait(what, probe, timeout=timeout)


def _completed(present: dict[str, dict[str, Any]]) -> list[str]:
    return sorted(n for n, s in present.items() if (s.get("status") or {}).get("state") == "Completed")


def _history_matches_objects(e2e: E2ECluster, settled: bool = False) -> dict[str, Any] | None:
    """The job's status once `savepointHistory` lists exactly the completed Savepoints, newest first
    (`settled`: and no Savepoint is pending or in progress)."""
    present = {s["metadata"]["name"]: s for s in e2e.items("savepoints")}
    states = [(s.get("status") or {}).get("state") for s in present.values()]
    if settled and any(state not in ("Completed", "Failed", "Abandoned") for state in states):
        return None
    job = e2e.get("streamjob", JOB) or {}
    status = job.get("status") or {}
    history = status.get("savepointHistory") or []
    if sorted(h["name"] for h in history) != _completed(present):
        return None
    for entry in history:
        if entry["path"] != present[entry["name"]]["status"]["path"]:
            return None
    return status


@pytest.mark.timeout(420)
def test_periodic_savepoints_are_taken_on_the_interval_and_only_max_count_are_kept(e2e: E2ECluster) -> None:
    interval_s, max_count = 3, 2
    run = _start(
        e2e,
        _job_with(periodicInterval=f"{interval_s}s", historyMaxCount=max_count, disposeOnDelete=True),
    )
    watch = PeriodicWatch(e2e)
    watch.until(
        f"five periodic savepoints completed and {max_count + 1} of them cleaned up",
        lambda w, _: len(w.completed) >= 5 and len(w.deleted) >= max_count + 1,
    )

    job_uid = e2e.get("streamjob", JOB)["metadata"]["uid"]  # type: ignore[index]
    stamps = []
    for name in watch.completed:
        match = PERIODIC.match(name)
        assert match, f"{name} is not a periodic savepoint of {JOB}: {list(watch.completed)}"
        stamps.append(int(match.group(1)))
    assert stamps == sorted(stamps), f"periodic savepoints completed out of order: {list(watch.completed)}"
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert all(gap >= interval_s for gap in gaps), f"savepoints closer than {interval_s}s apart: {gaps}"

    # The oldest went first, with their files (disposeOnDelete), and the operator said why.
    assert watch.deleted <= set(list(watch.completed)[:-max_count]), (watch.deleted, list(watch.completed))
    for name in watch.deleted:
        path = watch.completed[name]
        e2e.wait(f"the files of deleted {name} gone", _absent(e2e, path), timeout=30)
    reasons = _events(e2e, "SavepointDeleted")
    assert any(f"more than {max_count} savepoints" in r for r in reasons), reasons

    # What is left: at most max_count completed periodic savepoints, each a savepoint of this run,
    # owned by the job and listed in its status. Savepoints go on every 3 s, and each completion trims
    # the oldest (files included): stop them first (a policy change, the job does not restart), or an
    # entry of the status read here may be disposed of before its files are read below.
    e2e.kubectl(
        "patch", "streamjob", JOB, "--type=merge", "-p", '{"spec":{"savepoints":{"periodicInterval":null}}}'
    )
    status = e2e.wait(
        "no savepoint in flight, and savepointHistory lists the completed Savepoints",
        lambda: _history_matches_objects(e2e, settled=True),
    )
    history = status["savepointHistory"]
    assert 1 <= len(history) <= max_count, history
    assert status["lastSavepoint"] == history[0], status
    assert [h["time"] for h in history] == sorted((h["time"] for h in history), reverse=True), history
    for entry in history:
        assert entry["kind"] == "periodic", entry
        _assert_savepoint_of(e2e, entry["path"], run, None)
        savepoint = e2e.get("savepoint", entry["name"])
        assert savepoint is not None
        assert savepoint["metadata"]["labels"][TRIGGER_LABEL] == "periodic"
        assert [o["uid"] for o in savepoint["metadata"]["ownerReferences"]] == [job_uid]
    # The run went on all along: periodic savepoints do not stop the job.
    job = e2e.get("streamjob", JOB)
    assert job is not None and job["status"]["job"]["id"] == run
    assert job["status"]["lifecycleState"] == "Running"


@pytest.mark.timeout(420)
def test_max_age_removes_old_savepoints_but_keeps_the_last_completed_one(e2e: E2ECluster) -> None:
    max_age_s = 6
    run = _start(
        e2e,
        _job_with(
            periodicInterval="2s", historyMaxAge=f"{max_age_s}s", historyMaxCount=100, disposeOnDelete=True
        ),
    )
    watch = PeriodicWatch(e2e)
    watch.until(
        "periodic savepoints completed and two of them removed for their age",
        lambda w, _: len(w.completed) >= 3 and len(w.deleted) >= 2,
    )
    reasons = _events(e2e, "SavepointDeleted")
    assert any(f"older than {max_age_s}s" in r for r in reasons), reasons
    for name in watch.deleted:
        path = watch.completed[name]
        e2e.wait(f"the files of deleted {name} gone", _absent(e2e, path), timeout=30)

    # No more periodic savepoints (a policy change, not a spec change the job restarts for): every
    # savepoint ages past max age, and all but the last completed one go.
    e2e.kubectl(
        "patch", "streamjob", JOB, "--type=merge", "-p", '{"spec":{"savepoints":{"periodicInterval":null}}}'
    )
    present = watch.until(
        "only one completed savepoint left, no savepoint in flight",
        lambda _, p: len(_completed(p)) == 1 and len(p) == 1,
    )
    (last,) = _completed(present)
    assert last == list(watch.completed)[-1], (last, list(watch.completed))
    alone_since = time.time()
    # Twice max age later, many reconciles have looked at it: it is still there, and so are its files.
    e2e.wait(
        "two max ages with only the last savepoint left",
        lambda: time.time() - alone_since > 2 * max_age_s,
        timeout=60,
    )
    present = watch.poll()
    assert set(present) == {last}, list(present)
    completed = datetime.fromisoformat(present[last]["status"]["completionTime"].replace("Z", "+00:00"))
    assert time.time() - completed.timestamp() > 2 * max_age_s, present[last]["status"]
    path = watch.completed[last]
    _assert_savepoint_of(e2e, path, run, None)
    status = e2e.wait(
        "savepointHistory lists the completed Savepoints", lambda: _history_matches_objects(e2e)
    )
    assert [h["name"] for h in status["savepointHistory"]] == [last]
    assert status["lastSavepoint"]["path"] == path
    assert status["job"]["id"] == run and status["lifecycleState"] == "Running", status


def _user_savepoint(name: str, *, dispose: bool) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Savepoint",
            "metadata": {"name": name},
            "spec": {"jobName": JOB, "stop": "none", "disposeOnDelete": dispose},
        }
    )


@pytest.mark.timeout(420)
def test_deleting_a_user_savepoint_disposes_of_its_files_only_when_asked(e2e: E2ECluster) -> None:
    run = _start(e2e, unbounded_job())
    paths = {}
    for name, dispose in (("keep-files", False), ("dispose-files", True)):
        e2e.apply(_user_savepoint(name, dispose=dispose))
        paths[name] = e2e.wait_savepoint(name, "Completed")["status"]["path"]
        _assert_savepoint_of(e2e, paths[name], run, None)

    # kubectl waits until the objects are gone, which for disposeOnDelete is after the files went.
    e2e.kubectl("delete", "savepoint", "keep-files", "dispose-files", "--timeout=60s")

    assert e2e.get("savepoint", "dispose-files") is None and e2e.get("savepoint", "keep-files") is None
    assert not e2e.storage.exists(paths["dispose-files"]), f"{paths['dispose-files']} still in storage"
    _assert_savepoint_of(e2e, paths["keep-files"], run, None)
    disposed = _events(e2e, "Disposed")
    assert disposed == [f"deleted savepoint files at {paths['dispose-files']}"], disposed


@pytest.mark.timeout(420)
def test_a_savepoint_deleted_while_in_progress_disposes_of_its_files_once_it_has_ended(
    e2e: E2ECluster,
) -> None:
    _start(e2e, unbounded_job())
    taskmanager = e2e.coordinator(JOB, "/v1/job")["taskManagers"][0]
    pod = e2e.taskmanager_pod_of(JOB, taskmanager["host"])
    # A frozen TaskManager holds the savepoint in progress (see test_job_lifecycle.py).
    e2e.signal_process(pod, taskmanager["pid"], signal.SIGSTOP)
    try:
        e2e.apply(_user_savepoint("in-flight", dispose=True))

        def in_progress() -> str | None:
            status = (e2e.get("savepoint", "in-flight") or {}).get("status") or {}
            trigger = status.get("triggerId")
            return str(trigger) if status.get("state") == "InProgress" and trigger else None

        trigger = e2e.wait("the Savepoint InProgress", in_progress, timeout=60)
        e2e.kubectl("delete", "savepoint", "in-flight", "--wait=false")
        time.sleep(4)  # a few reconciles and handler retries: the finalizer holds the object meanwhile
        held = e2e.get("savepoint", "in-flight")
        assert held is not None and held["metadata"].get("deletionTimestamp"), held
    finally:
        e2e.signal_process(pod, taskmanager["pid"], signal.SIGCONT)

    e2e.wait("the deleted Savepoint gone", lambda: e2e.get("savepoint", "in-flight") is None, timeout=120)
    answer = e2e.coordinator(JOB, f"/v1/savepoints/{trigger}")
    assert answer["status"] == "COMPLETED", answer
    assert not e2e.storage.exists(answer["path"]), f"{answer['path']} outlived its Savepoint"
    assert _events(e2e, "Disposed") == [f"deleted savepoint files at {answer['path']}"]


@pytest.mark.timeout(600)
def test_deleting_a_streamjob_with_on_delete_takes_a_savepoint_that_a_new_job_goes_on_from_exactly_once(
    e2e: E2ECluster,
) -> None:
    """Savepoint on deletion, the job's `disposeOnDelete` savepoints removed with it, and a new job
    restored from the deletion savepoint."""
    first_run = _start(e2e, _job_with(onDelete=True, periodicInterval="4s", disposeOnDelete=True))
    watch = PeriodicWatch(e2e)
    watch.until("a periodic savepoint completed", lambda w, _: len(w.completed) >= 1)

    e2e.kubectl("delete", "streamjob", JOB, "--timeout=180s")

    assert e2e.get("streamjob", JOB) is None
    assert e2e.job_pods(JOB) == [], [p["metadata"]["name"] for p in e2e.job_pods(JOB)]
    # One deletion savepoint, which outlives the job (no owner) so that its state can be restored.
    (savepoint,) = e2e.items("savepoints", f"{TRIGGER_LABEL}=deletion")
    assert savepoint["metadata"]["labels"][JOB_LABEL] == JOB
    assert not savepoint["metadata"].get("ownerReferences"), savepoint["metadata"]
    assert savepoint["spec"]["stop"] == "suspend"
    assert savepoint["spec"]["disposeOnDelete"] is False
    assert savepoint["status"]["state"] == "Completed", savepoint["status"]
    path = savepoint["status"]["path"]
    _assert_savepoint_of(e2e, path, first_run, "no-drain")
    # The run ended through that savepoint (stop-with-savepoint), not by its pods being deleted.
    result = e2e.storage.read_json(
        f"{e2e.storage.root}/checkpoints/{e2e.namespace}/{JOB}/{first_run}/job-result.json"
    )
    assert (result["state"], result["lastSavepoint"]) == ("FINISHED", path), result
    # The job's own savepoints went with it, files and all; the deletion savepoint stays, files and all.
    present = watch.poll()
    assert list(present) == [savepoint["metadata"]["name"]], list(present)
    for name, periodic in watch.completed.items():
        if name != savepoint["metadata"]["name"]:
            assert not e2e.storage.exists(periodic), (
                f"{name} was deleted with the job but {periodic} is still there"
            )
    output_uri = e2e.storage.output_uri(e2e.namespace, JOB)
    before = sum(generated_prefixes(read_output(output_uri, e2e.storage.storage_options)).values())

    # A new job from that savepoint.
    manifest = unbounded_manifest()
    manifest["spec"]["initialSavepoint"] = path
    e2e.apply(yaml.safe_dump(manifest))
    run = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]
    assert (run["restoredFrom"], run["id"] != first_run) == (path, True), run

    # Drained, the output of both jobs together is the reference: nothing lost or repeated across the
    # deletion.
    e2e.set_state(JOB, "finished")
    e2e.wait_lifecycle(JOB, "Finished")
    assert_unbounded_exactly_once(read_output(output_uri, e2e.storage.storage_options), at_least=before)
