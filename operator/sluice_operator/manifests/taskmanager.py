"""The pod template Spark uses for executor pods, which are Sluice's TaskManagers."""

from __future__ import annotations

from typing import Any

from sluice_operator.models import constants as c

from ._common import Manifest, labels, merge_pod
from .coordinator_args import TASKMANAGER_CONTAINER
from .hardening import container_security_context, pod_security_context, scratch_mounts, scratch_volumes
from .run import Run
from .secret import spark_secret_mount, spark_secret_volume


def taskmanager_pod_template(run: Run) -> Manifest:
    """A partial Pod: Spark fills in name, args (`executor`), ports and memory, and keeps the rest.

    Spark makes the coordinator pod the owner of every executor pod, so TaskManagers go away with it.
    Spark keeps the template's volumes, mounts and security contexts: the job's Spark secret arrives
    as a file (never as an env value in the pod spec), and the pod meets the `restricted` standard.
    """
    spec = run.spec
    container: dict[str, Any] = {
        "name": TASKMANAGER_CONTAINER,
        "image": spec.image,
        "env": run.env(),
        "volumeMounts": [spark_secret_mount(), *scratch_mounts(spark_local=False)],
        "securityContext": container_security_context(),
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
        "spec": {
            "securityContext": pod_security_context(),
            "containers": [container],
            "volumes": [spark_secret_volume(run.owner.name), *scratch_volumes(spark_local=False)],
            "restartPolicy": "Never",
        },
    }
    return merge_pod(spec.task_managers.pod_template, generated, TASKMANAGER_CONTAINER)
