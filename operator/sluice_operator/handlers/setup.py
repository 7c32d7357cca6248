"""Operator start-up and shut-down: settings, API clients, metrics endpoint."""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf

from sluice_operator.kube import Kube, api_client
from sluice_operator.models import OperatorConfig
from sluice_operator.models import constants as c
from sluice_operator.services import Deps, session

from . import metrics
from ._runtime import RUNTIME

ENV_METRICS_PORT = "SLUICE_OPERATOR_METRICS_PORT"


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
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
    RUNTIME.deps = Deps(kube=Kube(await api_client()), http=session())
    metrics.serve(int(os.environ.get(ENV_METRICS_PORT, "9090")))


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    RUNTIME.closing = True
    if RUNTIME.deps is not None:
        await RUNTIME.deps.http.close()
        await RUNTIME.deps.kube.api.close()
