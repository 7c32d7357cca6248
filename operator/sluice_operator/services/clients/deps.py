"""What the services reach the world with: Kubernetes, HTTP to coordinators, and the event sink."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import aiohttp

from sluice_operator.kube import Kube
from sluice_operator.manifests import Owner

from ..common.plan import Event


class EventSink(Protocol):
    """Posts one event on the StreamJob `job` (its name may be empty for an event on a Savepoint whose
    job is unknown), or on the Savepoint the event names."""

    def __call__(self, job: Owner, event: Event) -> None: ...


@dataclass(frozen=True)
class Deps:
    kube: Kube
    http: aiohttp.ClientSession
    events: EventSink  # where the recorder posts events (Kubernetes Events, through kopf)


__all__ = ["Deps", "EventSink"]
