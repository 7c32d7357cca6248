"""The running operator's /metrics, scraped in Prometheus text format while it runs a real job.

One job through its life: reconciles counted, the lifecycle gauge of the job's namespace showing Running
and then Finished, the TERMINATE savepoint counted as Completed, a savepoint asked of the finished job
counted as Failed, and the namespace's lifecycle series gone with the job.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from e2e._cluster import E2ECluster
from e2e._jobs import UNBOUNDED_NAME, unbounded_job
from e2e._operator import Metrics

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

JOB = UNBOUNDED_NAME  # on one TaskManager (_jobs.py)
RECONCILES = "sluice_operator_reconciles_total"
LIFECYCLE = "sluice_operator_streamjobs"
SAVEPOINTS = "sluice_operator_savepoints_total"


def _reconciles(metrics: Metrics) -> float:
    return metrics.value(RECONCILES, resource="streamjob", outcome="ok")


def _lifecycles(metrics: Metrics, namespace: str) -> dict[str, float]:
    """The namespace's lifecycle gauge: state -> number of jobs (every state is exported, 0 or not)."""
    return {
        dict(labels)["lifecycle"]: value
        for labels, value in metrics.series(LIFECYCLE).items()
        if dict(labels)["namespace"] == namespace
    }


def _wait_metrics(e2e: E2ECluster, what: str, ok: Callable[[Metrics], bool]) -> Metrics:
    def probe() -> Metrics | None:
        metrics = e2e.operator.metrics()
        return metrics if ok(metrics) else None

    return e2e.wait(f"/metrics: {what}", probe, timeout=60)


@pytest.mark.timeout(420)
def test_metrics_follow_reconciles_lifecycle_and_savepoint_outcomes(e2e: E2ECluster) -> None:
    ns = e2e.namespace
    before = e2e.operator.metrics()
    assert _lifecycles(before, ns) == {}, "a fresh namespace has no lifecycle series"

    e2e.apply(unbounded_job())
    e2e.wait_lifecycle(JOB, "Running")
    running = _wait_metrics(e2e, "the job Running", lambda m: _lifecycles(m, ns).get("Running") == 1)
    states = _lifecycles(running, ns)
    assert sum(states.values()) == 1, f"one job, one lifecycle state: {states}"
    assert {"Created", "Deploying", "Stopping", "Finished", "Failed"} <= states.keys(), states
    assert _reconciles(running) > _reconciles(before)

    # TERMINATE: a stop-with-savepoint that completes, and the job ends Finished.
    e2e.set_state(JOB, "finished")
    e2e.wait_lifecycle(JOB, "Finished")
    finished = _wait_metrics(e2e, "the job Finished", lambda m: _lifecycles(m, ns).get("Finished") == 1)
    assert sum(_lifecycles(finished, ns).values()) == 1, _lifecycles(finished, ns)
    assert finished.value(SAVEPOINTS, state="Completed") == before.value(SAVEPOINTS, state="Completed") + 1
    assert finished.value(SAVEPOINTS, state="Failed") == before.value(SAVEPOINTS, state="Failed")
    assert _reconciles(finished) > _reconciles(running), "the operator reconciled the stop"

    # A savepoint of a job that no longer runs fails, and is counted as such.
    e2e.apply(
        f"""
apiVersion: sluice.dev/v1alpha1
kind: Savepoint
metadata:
  name: {JOB}-too-late
spec:
  jobName: {JOB}
  stop: none
"""
    )
    failed = e2e.wait_savepoint(f"{JOB}-too-late", "Failed")
    assert "not running" in failed["status"]["error"], failed["status"]
    after = _wait_metrics(
        e2e,
        "the failed savepoint counted",
        lambda m: m.value(SAVEPOINTS, state="Failed") > before.value(SAVEPOINTS, state="Failed"),
    )
    assert after.value(SAVEPOINTS, state="Failed") == before.value(SAVEPOINTS, state="Failed") + 1
    assert after.value(SAVEPOINTS, state="Completed") == finished.value(SAVEPOINTS, state="Completed")
    assert after.value("sluice_operator_events_total", type="Warning", reason="SavepointFailed") >= 1

    # Deleting the job removes its namespace's series instead of leaving zeros behind.
    e2e.kubectl("delete", "streamjob", JOB, "--timeout=90s")
    _wait_metrics(e2e, "no lifecycle series for the namespace", lambda m: _lifecycles(m, ns) == {})
