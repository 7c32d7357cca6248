"""The service account of the coordinator: as the Spark driver it creates and deletes executor pods."""

from __future__ import annotations

from typing import Any

from ._common import Manifest, Owner, driver_account_name, metadata

# What Spark's Kubernetes scheduler backend does in the job's namespace, and nothing more.
DRIVER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": [""],
        "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
    },
]


def driver_service_account(owner: Owner) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(owner, driver_account_name(owner.name)),
    }


def driver_role(owner: Owner) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata(owner, driver_account_name(owner.name)),
        "rules": DRIVER_RULES,
    }


def driver_role_binding(owner: Owner) -> Manifest:
    name = driver_account_name(owner.name)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(owner, name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": owner.namespace}],
    }
