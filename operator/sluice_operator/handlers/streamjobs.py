"""Kopf wiring for StreamJobs: every trigger runs the same reconcile; deletion runs the finalizer."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, cast

import kopf

from sluice_operator.manifests import Owner
from sluice_operator.models import SavepointState
from sluice_operator.models import constants as c
from sluice_operator.services import Event, finalize_job, reconcile_job

from . import metrics
from ._runtime import RUNTIME

log = logging.getLogger(__name__)
# The job's event on a savepoint that ended (services/common/savepoint_events.py), counted by state.
_ENDED = (SavepointState.COMPLETED, SavepointState.FAILED, SavepointState.ABANDONED)
_SAVEPOINT_OUTCOMES = tuple(f"Savepoint{state.value}" for state in _ENDED)


def namespaced(namespace: str | None) -> str:
    if namespace is None:  # both CRDs are namespaced; an event without a namespace would be a bug
        raise kopf.PermanentError("Sluice resources are namespaced")
    return namespace


def _ref(kind: str, namespace: str, name: str, uid: str | None) -> kopf.Body:
    # With the uid, `kubectl describe` lists the event under the object.
    raw: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:
        raw["metadata"]["uid"] = uid
    return kopf.Body(cast(kopf.RawBody, raw))


def job_ref(namespace: str, name: str, uid: str | None = None) -> kopf.Body:
    return _ref(c.STREAMJOB_KIND, namespace, name, uid)


def savepoint_ref(namespace: str, name: str, uid: str | None = None) -> kopf.Body:
    return _ref(c.SAVEPOINT_KIND, namespace, name, uid)


def post_event(job: Owner, event: Event) -> None:
    """The recorder's sink: one Kubernetes Event on the StreamJob, or on the Savepoint it names."""
    if event.savepoint is not None:
        target = savepoint_ref(job.namespace, event.savepoint, event.uid)
    else:
        target = job_ref(job.namespace, job.name, job.uid or None)
    kopf.event(target, type=event.type, reason=event.reason, message=event.message[:1000])
    metrics.EVENTS.labels(event.type, event.reason).inc()
    if event.savepoint is None and event.reason in _SAVEPOINT_OUTCOMES:
        metrics.SAVEPOINTS.labels(event.reason.removeprefix("Savepoint")).inc()


async def reconcile(namespace: str, name: str) -> float | None:
    """Reconcile one StreamJob now; returns when to come back (None: the regular interval)."""
    if RUNTIME.closing:
        return None
    deps = RUNTIME.require()
    async with RUNTIME.lock(namespace, name):
        started = time.monotonic()
        try:
            outcome = await reconcile_job(deps, RUNTIME.config, namespace, name)
        except Exception as error:  # never let one job's trouble stop the operator
            metrics.RECONCILES.labels("streamjob", "error").inc()
            log.exception("reconcile of %s/%s failed", namespace, name)
            failure = Event("Warning", "ReconcileError", f"{type(error).__name__}: {error}")
            post_event(Owner(name=name, namespace=namespace, uid=""), failure)
            return 5.0
        finally:
            metrics.RECONCILE_SECONDS.labels("streamjob").observe(time.monotonic() - started)
        metrics.RECONCILES.labels("streamjob", "ok").inc()
        metrics.record_lifecycle(namespace, name, outcome.lifecycle)
        return outcome.requeue_s


@kopf.on.event(c.GROUP, c.VERSION, c.STREAMJOB_PLURAL)
async def on_streamjob_event(
    *, type: str, namespace: str | None, name: str, meta: kopf.Meta, **_: Any
) -> None:
    if type == "DELETED" or meta.get("deletionTimestamp"):
        return
    await reconcile(namespaced(namespace), name)


@kopf.daemon(c.GROUP, c.VERSION, c.STREAMJOB_PLURAL, cancellation_timeout=5.0)
async def watch_streamjob(*, namespace: str | None, name: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
    """The level-based loop: the coordinator and storage change without Kubernetes events, so poll them."""
    ns = namespaced(namespace)
    metrics.MANAGED.inc()
    try:
        while not stopped and not RUNTIME.closing:
            wait = await reconcile(ns, name)
            # A plain sleep, which kopf cancels when it stops the daemon (cancellation_timeout). Not
            # `await stopped.wait(n)`: kopf runs that in a task of its own that ends with TimeoutError
            # after n seconds, and one still pending when the operator stops is among the tasks whose
            # errors `kopf.run` re-raises at exit: the operator would exit 1 with that traceback.
            await asyncio.sleep(wait if wait is not None else RUNTIME.config.reconcile_interval_s)
    finally:
        # Kopf stops daemons when the job goes and when leader election pauses this replica: either
        # way the job is no longer this replica's, and its lifecycle series must not linger here.
        metrics.MANAGED.dec()
        metrics.record_lifecycle(ns, name, None)


@kopf.on.delete(c.GROUP, c.VERSION, c.STREAMJOB_PLURAL)
async def on_streamjob_delete(*, body: kopf.Body, namespace: str | None, name: str, **_: Any) -> None:
    ns = namespaced(namespace)
    deps = RUNTIME.require()
    async with RUNTIME.lock(ns, name):
        job = await deps.kube.get_custom(c.STREAMJOB_PLURAL, ns, name)
        result = await finalize_job(deps, RUNTIME.config, job if job is not None else dict(body))
    if not result.done:
        raise kopf.TemporaryError(result.message, delay=2)
    metrics.record_lifecycle(ns, name, None)


@kopf.on.event("", "v1", "pods", labels={c.LABEL_ROLE: c.ROLE_COORDINATOR})
async def on_coordinator_pod(*, labels: kopf.Labels, namespace: str | None, **_: Any) -> None:
    """A coordinator pod changed (started, got an IP, exited): look at its job at once."""
    job = labels.get(c.LABEL_JOB)
    if job:
        await asyncio.shield(reconcile(namespaced(namespace), job))
