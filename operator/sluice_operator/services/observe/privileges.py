"""Fields of a StreamJob that would give its pods more than the `restricted` Pod Security Standard allows.

The operator hardens job pods itself (manifests/hardening.py); a pod template or a Spark setting could
undo that, or reach the node (host namespaces, hostPath volumes) or act as another service account.
Such fields are refused, naming the field, unless the operator is configured to allow them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from sluice_operator.models import StreamJobSpec

_HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_SPARK_ESCALATIONS = (
    (
        re.compile(r"^spark\.kubernetes\.(driver|executor)\.volumes\.hostPath\."),
        "mounts a directory of the node",
    ),
    (
        re.compile(r"^spark\.kubernetes\.authenticate\.(driver|executor)\.serviceAccountName$"),
        "runs pods as another service account",
    ),
)


def escalations(spec: StreamJobSpec) -> list[str]:
    """`<field path>: <what it does>` for every escalating field, in spec order."""
    found = []
    for role, template in (
        ("coordinator", spec.coordinator.pod_template),
        ("taskManagers", spec.task_managers.pod_template),
    ):
        if template:
            found += [f"{path}: {why}" for path, why in _pod(f"spec.{role}.podTemplate", template)]
    for key in spec.spark_conf:
        for pattern, why in _SPARK_ESCALATIONS:
            if pattern.match(key):
                found.append(f"spec.sparkConf[{key}]: {why}")
    return found


def _pod(prefix: str, template: dict[str, Any]) -> Iterator[tuple[str, str]]:
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return
    at = f"{prefix}.spec"
    for key in _HOST_NAMESPACES:
        if spec.get(key) is True:
            yield f"{at}.{key}", "shares a namespace of the node"
    for key in ("serviceAccountName", "serviceAccount"):
        if spec.get(key):
            yield f"{at}.{key}", "runs the pod as another service account (use spec.serviceAccount)"
    for index, volume in enumerate(_dicts(spec.get("volumes"))):
        if "hostPath" in volume:
            yield f"{at}.volumes[{index}].hostPath", "mounts a directory of the node"
    yield from _security_context(f"{at}.securityContext", spec.get("securityContext"))
    for key in _CONTAINER_LISTS:
        for index, container in enumerate(_dicts(spec.get(key))):
            path = f"{at}.{key}[{index}].securityContext"
            context = container.get("securityContext")
            yield from _security_context(path, context)
            yield from _container_security_context(path, context)


def _container_security_context(path: str, context: Any) -> Iterator[tuple[str, str]]:
    """What only a container's security context has: privileges and capabilities."""
    if not isinstance(context, dict):
        return
    if context.get("privileged") is True:
        yield f"{path}.privileged", "gives the container every privilege of the node"
    if context.get("allowPrivilegeEscalation") is True:
        yield f"{path}.allowPrivilegeEscalation", "lets processes gain privileges (setuid)"
    capabilities = context.get("capabilities")
    added = capabilities.get("add") if isinstance(capabilities, dict) else None
    if added:
        names = ", ".join(map(str, added)) if isinstance(added, list) else str(added)
        yield f"{path}.capabilities.add", f"adds capabilities {names}"


def _security_context(path: str, context: Any) -> Iterator[tuple[str, str]]:
    """What pod and container security contexts share: running as root."""
    if not isinstance(context, dict):
        return
    if context.get("runAsNonRoot") is False:
        yield f"{path}.runAsNonRoot", "allows running as root"
    if context.get("runAsUser") == 0:
        yield f"{path}.runAsUser", "runs as root"


def _dicts(items: Any) -> list[dict[str, Any]]:
    return [item if isinstance(item, dict) else {} for item in items] if isinstance(items, list) else []
