"""The Kubernetes calls the operator makes, returning plain dicts; 404 on reads means None."""

from __future__ import annotations

import base64
import json
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sluice_operator.models import constants as c

Obj = dict[str, Any]
_MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


class Refused(Exception):
    """The API server refused a call: `status` 404 (no such resource type), 403 (not allowed) or 422."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _refused(error: ApiException) -> Exception:
    """403, 404 and 422 (an object another operator's CRD rejects) as Refused with the server's message."""
    if error.status not in (403, 404, 422):
        return error
    try:
        message = str(json.loads(error.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    return Refused(int(error.status), message[:500] or str(error.reason or "") or f"HTTP {error.status}")


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.networking = client.NetworkingV1Api(api)

    def _plain(self, obj: Any) -> Obj:
        return obj if isinstance(obj, dict) else dict(self.api.sanitize_for_serialization(obj))

    # StreamJobs and Savepoints ------------------------------------------------------------------------

    async def get_custom(self, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return dict(
                await self.custom.get_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, name)
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    async def list_custom(self, plural: str, namespace: str, label_selector: str | None = None) -> list[Obj]:
        answer = await self.custom.list_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, plural, label_selector=label_selector or ""
        )
        return list(answer.get("items", []))

    async def patch_status(self, plural: str, namespace: str, name: str, status: Obj) -> Obj:
        return dict(
            await self.custom.patch_namespaced_custom_object_status(
                c.GROUP, c.VERSION, namespace, plural, name, {"status": status}, **_MERGE
            )
        )

    async def patch_custom(self, plural: str, namespace: str, name: str, patch: Obj) -> Obj:
        return dict(
            await self.custom.patch_namespaced_custom_object(
                c.GROUP, c.VERSION, namespace, plural, name, patch, **_MERGE
            )
        )

    async def create_custom(self, plural: str, namespace: str, body: Obj) -> Obj | None:
        """Create unless an object of that name exists (None then): operator-made names are idempotent."""
        try:
            return dict(
                await self.custom.create_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, body)
            )
        except ApiException as error:
            if error.status == 409:
                return None
            raise

    async def delete_custom(self, plural: str, namespace: str, name: str) -> None:
        try:
            await self.custom.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, name)
        except ApiException as error:
            if error.status != 404:
                raise

    # Other operators' resources (prometheus-operator's PodMonitor), by group, version and plural ------
    # Their CRD may be missing or the operator not allowed to use them: such refusals are Refused, for
    # the caller to report, rather than errors of the reconcile.

    async def get_object(
        self, group: str, version: str, plural: str, namespace: str, name: str
    ) -> Obj | None:
        """None if there is no such object, or no such resource (a create then tells which)."""
        try:
            return dict(
                await self.custom.get_namespaced_custom_object(group, version, namespace, plural, name)
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise _refused(error) from None

    async def create_object(self, group: str, version: str, plural: str, body: Obj) -> None:
        """Create; an object of that name that appeared meanwhile is left for the next look."""
        namespace = body["metadata"]["namespace"]
        try:
            await self.custom.create_namespaced_custom_object(group, version, namespace, plural, body)
        except ApiException as error:
            if error.status != 409:
                raise _refused(error) from None

    async def patch_object(
        self, group: str, version: str, plural: str, namespace: str, name: str, patch: Obj
    ) -> None:
        try:
            await self.custom.patch_namespaced_custom_object(
                group, version, namespace, plural, name, patch, **_MERGE
            )
        except ApiException as error:
            raise _refused(error) from None

    async def delete_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> None:
        """Delete; one that is gone already (or whose resource type is) is fine."""
        try:
            await self.custom.delete_namespaced_custom_object(group, version, namespace, plural, name)
        except ApiException as error:
            if error.status != 404:
                raise _refused(error) from None

    # Pods and what the coordinator needs -------------------------------------------------------------

    async def list_pods(self, namespace: str, label_selector: str) -> list[Obj]:
        answer = await self.core.list_namespaced_pod(namespace, label_selector=label_selector)
        return [self._plain(item) for item in answer.items]

    async def delete_pod(self, namespace: str, name: str) -> None:
        try:
            await self.core.delete_namespaced_pod(name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise

    async def create(self, manifest: Obj) -> None:
        """Create `manifest`; if it exists, replace it, or keep it for kinds with nothing to update.

        A Pod that exists is an error: the caller only creates one after seeing there is none.
        """
        kind = manifest["kind"]
        namespace = manifest["metadata"]["namespace"]
        name = manifest["metadata"]["name"]
        create, replace = self._verbs(kind)
        try:
            await create(namespace, manifest)
        except ApiException as error:
            if error.status != 409 or kind == "Pod":
                raise
            if replace is not None:
                await replace(name, namespace, manifest)

    def _verbs(self, kind: str) -> tuple[Any, Any]:
        verbs: dict[str, tuple[Any, Any]] = {
            "Pod": (self.core.create_namespaced_pod, None),
            "Service": (self.core.create_namespaced_service, self._patch_service),
            "ConfigMap": (self.core.create_namespaced_config_map, self.core.replace_namespaced_config_map),
            "ServiceAccount": (self.core.create_namespaced_service_account, None),
            "Role": (self.rbac.create_namespaced_role, self.rbac.replace_namespaced_role),
            "RoleBinding": (self.rbac.create_namespaced_role_binding, None),
            # Never replaced: a job's secrets are drawn once and live as long as the job.
            "Secret": (self.core.create_namespaced_secret, None),
            "NetworkPolicy": (
                self.networking.create_namespaced_network_policy,
                self.networking.replace_namespaced_network_policy,
            ),
        }
        return verbs[kind]

    async def _patch_service(self, name: str, namespace: str, manifest: Obj) -> None:
        # A Service keeps its cluster IP: merge the spec in rather than replace it.
        await self.core.patch_namespaced_service(
            name, namespace, {"metadata": manifest["metadata"], "spec": manifest["spec"]}
        )

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        deleters = {
            "Pod": self.core.delete_namespaced_pod,
            "Service": self.core.delete_namespaced_service,
            "ConfigMap": self.core.delete_namespaced_config_map,
            "ServiceAccount": self.core.delete_namespaced_service_account,
            "Role": self.rbac.delete_namespaced_role,
            "RoleBinding": self.rbac.delete_namespaced_role_binding,
            "Secret": self.core.delete_namespaced_secret,
            "NetworkPolicy": self.networking.delete_namespaced_network_policy,
        }
        try:
            await deleters[kind](name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise

    async def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        secret = await self.secret(namespace, name)
        return secret[1] if secret is not None else None

    async def secret(self, namespace: str, name: str) -> tuple[list[str], dict[str, str]] | None:
        """The uids of a Secret's owners and its decoded data, or None if there is no such Secret."""
        try:
            secret = await self.core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        owners = [ref.uid for ref in (secret.metadata.owner_references or [])]
        data = secret.data or {}
        return owners, {key: base64.b64decode(value).decode() for key, value in data.items()}
