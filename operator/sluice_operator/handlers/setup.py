"""Operator start-up and shut-down: settings, API clients, metrics endpoint."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import kopf
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sluice_operator.kube import Kube, api_client
from sluice_operator.models import OperatorConfig
from sluice_operator.models import constants as c
from sluice_operator.services import Deps, session
from sluice_operator.services.act.monitoring import forget_crd_absence

from . import metrics
from ._runtime import RUNTIME, Election
from .streamjobs import post_event

ENV_METRICS_PORT = "SLUICE_OPERATOR_METRICS_PORT"
PEERING_GROUP, PEERING_VERSION = "kopf.dev", "v1"
log = logging.getLogger(__name__)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # What an earlier run of the operator in this process left (tests run it on a thread, one run per
    # test) belongs to its event loop and its cluster view: this run starts from nothing.
    RUNTIME.closing = False
    RUNTIME.locks.clear()
    forget_crd_absence()
    RUNTIME.config = OperatorConfig.from_env()
    settings.persistence.finalizer = c.FINALIZER
    # Kopf's bookkeeping goes into annotations: status belongs to the CRD schema and the operator alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # our own events say what happened; kopf's chatter stays in logs
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 30
    RUNTIME.deps = Deps(kube=Kube(await api_client()), http=session(), events=post_event)
    RUNTIME.stop_metrics = metrics.serve(int(os.environ.get(ENV_METRICS_PORT, "9090")))
    if RUNTIME.election is not None:
        await warn_missing_peerings(RUNTIME.deps.kube.custom, RUNTIME.election)


async def warn_missing_peerings(api: client.CustomObjectsApi, election: Election) -> list[str]:
    """Say which peering objects are missing; returns where (a namespace, or "cluster").

    Under mandatory peering kopf holds the whole operator paused until it has seen the peering object
    of every watched namespace, and says nothing about it: a replica would silently do nothing.
    The chart creates these objects, but possibly after the operator starts, so this only warns.
    """
    name = election.peering
    wheres: list[str | None] = [None] if election.clusterwide else list(election.namespaces)
    missing = []
    for namespace in wheres:
        try:
            if namespace is None:
                await api.get_cluster_custom_object(
                    PEERING_GROUP, PEERING_VERSION, "clusterkopfpeerings", name
                )
            else:
                await api.get_namespaced_custom_object(
                    PEERING_GROUP, PEERING_VERSION, namespace, "kopfpeerings", name
                )
        except ApiException as error:
            if error.status != 404:
                log.warning("leader election: cannot read peering object %r: %s", name, error.reason)
                continue
            kind = "ClusterKopfPeering" if namespace is None else "KopfPeering"
            where = "cluster-wide" if namespace is None else f"in namespace {namespace!r}"
            log.warning(
                "leader election: no %s %r %s: this replica stays paused, acting on no job, until it "
                "exists. Create it (the Helm chart does): apiVersion: %s/%s, kind: %s, metadata.name: %s",
                kind,
                name,
                where,
                PEERING_GROUP,
                PEERING_VERSION,
                kind,
                name,
            )
            missing.append(namespace or "cluster")
    return missing


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    RUNTIME.closing = True
    stop_metrics, RUNTIME.stop_metrics = RUNTIME.stop_metrics, lambda: None
    await asyncio.to_thread(stop_metrics)  # waits for the server thread's poll: not on the loop
    if RUNTIME.deps is not None:
        await RUNTIME.deps.http.close()
        await RUNTIME.deps.kube.api.close()
