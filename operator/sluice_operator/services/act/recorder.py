"""The one writer of the operator's record: the status of StreamJobs and Savepoints, and their events.

Every status patch and every event goes through a `Recorder`, and the one caller that holds one is the
act step (`execute`), which writes the job's decided status before carrying out the plan's actions,
what those actions led to after them, and then posts the events. A reconcile stays level-based: the
patches are merge patches computed against what Kubernetes held when the reconcile observed it, so
writing one again is harmless.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sluice_operator.kube import Kube
from sluice_operator.manifests import Owner
from sluice_operator.models import SavepointStatus
from sluice_operator.models import constants as c

from ..clients.deps import EventSink
from ..common.plan import Event


def savepoint_patch(status: SavepointStatus) -> dict[str, Any]:
    # Nulls are kept: in a merge patch they remove fields, e.g. the trigger id of a retried savepoint.
    return dict(status.model_dump(mode="json", by_alias=True, exclude_none=False))


class Recorder:
    """Writes the status and posts the events of one StreamJob and its Savepoints; an empty patch writes
    nothing (a status that did not change)."""

    def __init__(self, kube: Kube, sink: EventSink, job: Owner) -> None:
        self._kube, self._sink, self._job = kube, sink, job
        self._namespace = job.namespace

    async def job_status(self, job: str, patch: dict[str, Any]) -> None:
        if patch:
            await self._kube.patch_status(c.STREAMJOB_PLURAL, self._namespace, job, patch)

    async def savepoint_status(self, savepoint: str, status: SavepointStatus) -> None:
        await self._kube.patch_status(c.SAVEPOINT_PLURAL, self._namespace, savepoint, savepoint_patch(status))

    def say(self, events: Sequence[Event]) -> None:
        for event in events:
            self._sink(self._job, event)


__all__ = ["Recorder", "savepoint_patch"]
