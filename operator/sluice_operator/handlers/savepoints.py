"""Kopf wiring for Savepoints: a missing job fails them, deletion may dispose of files."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from sluice_operator.models import SavepointState
from sluice_operator.models import constants as c
from sluice_operator.services import dispose_savepoint, reconcile_savepoint

from . import metrics
from ._runtime import RUNTIME
from .streamjobs import namespaced, reconcile, savepoint_ref

log = logging.getLogger(__name__)


@kopf.on.event(c.GROUP, c.VERSION, c.SAVEPOINT_PLURAL)
async def on_savepoint_event(
    *, type: str, body: kopf.Body, namespace: str | None, name: str, uid: str, spec: kopf.Spec, **_: Any
) -> None:
    if type == "DELETED":
        return
    ns = namespaced(namespace)
    try:
        events = await reconcile_savepoint(RUNTIME.require(), dict(body))
    except Exception as error:
        metrics.RECONCILES.labels("savepoint", "error").inc()
        log.exception("reconcile of Savepoint %s/%s failed", ns, name)
        kopf.event(savepoint_ref(ns, name, uid), type="Warning", reason="ReconcileError", message=str(error))
        return
    metrics.RECONCILES.labels("savepoint", "ok").inc()
    for event in events:
        kopf.event(savepoint_ref(ns, name, uid), type=event.type, reason=event.reason, message=event.message)
        metrics.SAVEPOINTS.labels(SavepointState.FAILED.value).inc()
    job = spec.get("jobName")
    if job and not events:
        await reconcile(ns, str(job))  # the job drives its savepoints: wake it up


def _disposable(spec: kopf.Spec, **_: Any) -> bool:
    return bool(spec.get("disposeOnDelete"))


@kopf.on.delete(c.GROUP, c.VERSION, c.SAVEPOINT_PLURAL, when=_disposable)
async def on_savepoint_delete(
    *, body: kopf.Body, namespace: str | None, name: str, uid: str, **_: Any
) -> None:
    ns = namespaced(namespace)
    disposal = await dispose_savepoint(RUNTIME.require(), RUNTIME.config, dict(body))
    for event in disposal.events:
        kopf.event(savepoint_ref(ns, name, uid), type=event.type, reason=event.reason, message=event.message)
    if not disposal.done:
        raise kopf.TemporaryError(disposal.message, delay=2)
