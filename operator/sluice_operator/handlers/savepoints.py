"""Kopf wiring for Savepoints: a missing job fails them, deletion may dispose of files."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from sluice_operator.manifests import Owner
from sluice_operator.models import SavepointState
from sluice_operator.models import constants as c
from sluice_operator.services import Event, dispose_savepoint, reconcile_savepoint

from . import metrics
from ._runtime import RUNTIME
from .streamjobs import namespaced, post_event, reconcile

log = logging.getLogger(__name__)


@kopf.on.event(c.GROUP, c.VERSION, c.SAVEPOINT_PLURAL)
async def on_savepoint_event(
    *, type: str, body: kopf.Body, namespace: str | None, name: str, uid: str, spec: kopf.Spec, **_: Any
) -> None:
    if type == "DELETED":
        return
    ns = namespaced(namespace)
    try:
        failed = await reconcile_savepoint(RUNTIME.require(), dict(body))
    except Exception as error:
        metrics.RECONCILES.labels("savepoint", "error").inc()
        log.exception("reconcile of Savepoint %s/%s failed", ns, name)
        failure = Event("Warning", "ReconcileError", str(error), savepoint=name, uid=uid)
        post_event(Owner(name="", namespace=ns, uid=""), failure)
        return
    metrics.RECONCILES.labels("savepoint", "ok").inc()
    if failed:
        metrics.SAVEPOINTS.labels(SavepointState.FAILED.value).inc()
    job = spec.get("jobName")
    if job and not failed:
        await reconcile(ns, str(job))  # the job drives its savepoints: wake it up


def _disposable(spec: kopf.Spec, **_: Any) -> bool:
    return bool(spec.get("disposeOnDelete"))


@kopf.on.delete(c.GROUP, c.VERSION, c.SAVEPOINT_PLURAL, when=_disposable)
async def on_savepoint_delete(*, body: kopf.Body, namespace: str | None, **_: Any) -> None:
    namespaced(namespace)  # refuses a Savepoint without one
    disposal = await dispose_savepoint(RUNTIME.require(), RUNTIME.config, dict(body))
    if not disposal.done:
        raise kopf.TemporaryError(disposal.message, delay=2)
