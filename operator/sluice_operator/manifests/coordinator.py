"""The coordinator pod (the Spark driver running `sluice run`), its REST service and its ConfigMap."""

from __future__ import annotations

from typing import Any

import yaml

from sluice_operator.models import REST_PORT, REST_PORT_NAME
from sluice_operator.models import constants as c

from ._common import (
    Manifest,
    Owner,
    config_map_name,
    coordinator_name,
    driver_account_name,
    labels,
    merge_pod,
    metadata,
    rest_service_name,
)
from .coordinator_args import (
    BLOCK_MANAGER_PORT,
    COORDINATOR_CONTAINER,
    DRIVER_PORT,
    TASKMANAGER_TEMPLATE_DIR,
    TASKMANAGER_TEMPLATE_FILE,
    sluice_run_args,
)
from .hardening import container_security_context, pod_security_context, scratch_mounts, scratch_volumes
from .run import Run
from .secret import (
    rest_token_mount,
    rest_token_volume,
    spark_secret_mount,
    spark_secret_volume,
    state_key_mount,
    state_key_volume,
)
from .taskmanager import taskmanager_pod_template

_CONFIG_VOLUME = "sluice-config"


def config_map(run: Run) -> Manifest:
    """Files the coordinator reads: the TaskManager pod template Spark's podTemplateFile points to."""
    template = taskmanager_pod_template(run)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            **metadata(run.owner, config_map_name(run.owner.name)),
            "annotations": {c.ANNOTATION_SPEC_HASH: run.spec_hash, c.ANNOTATION_JOB_ID: run.job_id},
        },
        "data": {TASKMANAGER_TEMPLATE_FILE: yaml.safe_dump(template, sort_keys=False)},
    }


def _downward(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def coordinator_pod(run: Run) -> Manifest:
    spec = run.spec
    name = run.owner.name
    annotations = {c.ANNOTATION_JOB_ID: run.job_id, c.ANNOTATION_SPEC_HASH: run.spec_hash}
    if run.restore_from is not None:
        annotations[c.ANNOTATION_RESTORED_FROM] = run.restore_from
    container: dict[str, Any] = {
        "name": COORDINATOR_CONTAINER,
        "image": spec.image,
        "args": ["coordinator", *sluice_run_args(run)],
        "env": [
            _downward("POD_NAME", "metadata.name"),
            _downward("POD_NAMESPACE", "metadata.namespace"),
            _downward("POD_IP", "status.podIP"),
            *run.env(),
        ],
        "ports": [
            {"name": REST_PORT_NAME, "containerPort": run.config.coordinator_rest_port},
            {"name": "driver", "containerPort": DRIVER_PORT},
            {"name": "blockmanager", "containerPort": BLOCK_MANAGER_PORT},
        ],
        "volumeMounts": [
            {"name": _CONFIG_VOLUME, "mountPath": TASKMANAGER_TEMPLATE_DIR, "readOnly": True},
            rest_token_mount(),
            spark_secret_mount(),
            state_key_mount(),
            *scratch_mounts(spark_local=True),
        ],
        "readinessProbe": {"httpGet": {"path": "/v1/health", "port": REST_PORT_NAME}, "periodSeconds": 5},
        "securityContext": container_security_context(),
    }
    env_from = run.env_from()
    if env_from:
        container["envFrom"] = env_from
    pull_policy = spec.image_pull_policy or run.config.image_pull_policy
    if pull_policy is not None:
        container["imagePullPolicy"] = pull_policy
    if spec.coordinator.resources is not None:
        container["resources"] = spec.coordinator.resources.model_dump(by_alias=True, exclude_none=True)
    generated: Manifest = {
        "metadata": {
            **metadata(run.owner, coordinator_name(name), c.ROLE_COORDINATOR),
            "annotations": annotations,
        },
        "spec": {
            "serviceAccountName": spec.service_account or driver_account_name(name),
            # The operator decides what happens after the coordinator exits (finished, failed, restart).
            "restartPolicy": "Never",
            "securityContext": pod_security_context(),
            "containers": [container],
            "volumes": [
                {"name": _CONFIG_VOLUME, "configMap": {"name": config_map_name(name)}},
                rest_token_volume(name),
                spark_secret_volume(name),
                state_key_volume(),
                *scratch_volumes(spark_local=True),
            ],
        },
    }
    return merge_pod(spec.coordinator.pod_template, generated, COORDINATOR_CONTAINER)


def dashboard_url(owner: Owner) -> str:
    """The coordinator's dashboard (served at `/` of its REST port) through the job's Service."""
    return f"http://{rest_service_name(owner.name)}.{owner.namespace}.svc:{REST_PORT}/"


def rest_service(run: Run) -> Manifest:
    """A stable address for the coordinator's REST API (`sluice status --address http://<job>-rest:8081`)."""
    name = run.owner.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(run.owner, rest_service_name(name), c.ROLE_COORDINATOR),
        "spec": {
            "type": "ClusterIP",
            "selector": {c.LABEL_JOB: name, c.LABEL_ROLE: c.ROLE_COORDINATOR},
            # The Service's port stays the documented one whatever port the pod serves on.
            "ports": [{"name": "rest", "port": REST_PORT, "targetPort": REST_PORT_NAME, "protocol": "TCP"}],
        },
    }


__all__ = ["config_map", "coordinator_pod", "labels", "rest_service"]
