"""The pod template Spark uses for executor pods, which are Sluice's TaskManagers."""

from __future__ import annotations

from typing import Any

from sluice_operator.models import constants as c

from ._common import Manifest, labels, merge_pod
from .coordinator_args import TASKMANAGER_CONTAINER
from .run import Run


def taskmanager_pod_template(run: Run) -> Manifest:
    """A partial Pod: Spark fills in name, args (`executor`), ports and memory, and keeps the rest.

    Spark makes the coordinator pod the owner of every executor pod, so TaskManagers go away with it.
    """
    spec = run.spec
    container: dict[str, Any] = {
        "name": TASKMANAGER_CONTAINER,
        "image": spec.image,
        "env": run.env(),
    }
    env_from = run.env_from()
    if env_from:
        container["envFrom"] = env_from
    resources = spec.task_managers.resources
    if resources is not None:
        container["resources"] = resources.model_dump(by_alias=True, exclude_none=True)
    generated: Manifest = {
        "metadata": {
            "labels": labels(run.owner.name, c.ROLE_TASKMANAGER),
            "annotations": {c.ANNOTATION_JOB_ID: run.job_id},
        },
        "spec": {"containers": [container], "restartPolicy": "Never"},
    }
    return merge_pod(spec.task_managers.pod_template, generated, TASKMANAGER_CONTAINER)
