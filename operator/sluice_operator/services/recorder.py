"""The one writer of the operator's record: the status of StreamJobs and Savepoints.

Every status patch goes through a `Recorder`, and the one caller that holds one is the act step
(`execute`), which writes the job's decided status before carrying out the plan's actions and what
those actions led to after them. A reconcile stays level-based: the patches are merge patches computed
against what Kubernetes held when the reconcile observed it, so writing one again is harmless.
"""

from __future__ import annotations

from typing import Any

from sluice_operator.kube import Kube
from sluice_operator.models import SavepointStatus
from sluice_operator.models import constants as c


def savepoint_patch(status: SavepointStatus) -> dict[str, Any]:
    # Nulls are kept: in a merge patch they remove fields, e.g. the trigger id of a retried savepoint.
    return dict(status.model_dump(mode="json", by_alias=True, exclude_none=False))


class Recorder:
    """Writes status in one namespace; an empty patch writes nothing (a status that did not change)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self._kube = kube
        self._namespace = namespace

    async def job_status(self, job: str, patch: dict[str, Any]) -> None:
        if patch:
            await self._kube.patch_status(c.STREAMJOB_PLURAL, self._namespace, job, patch)

    async def savepoint_status(self, savepoint: str, status: SavepointStatus) -> None:
        await self._kube.patch_status(c.SAVEPOINT_PLURAL, self._namespace, savepoint, savepoint_patch(status))


__all__ = ["Recorder", "savepoint_patch"]
