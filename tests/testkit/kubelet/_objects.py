"""What a pod reads from the API server while it starts: ConfigMaps, Secrets, service-account tokens."""

from __future__ import annotations

from typing import Any

from ._api import ApiError, KubeApi
from ._env import ConfigError

JsonDict = dict[str, Any]


class PodObjects:
    """ConfigMaps, Secrets and service-account tokens of the pod's namespace, read when needed."""

    def __init__(self, api: KubeApi, pod: JsonDict) -> None:
        self._api, self._pod = api, pod
        self._ns = pod["metadata"]["namespace"]

    async def _get(self, path: str) -> JsonDict | None:
        try:
            return await self._api.get(path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise ConfigError(str(error)) from error

    async def configmap(self, name: str) -> JsonDict | None:
        return await self._get(f"/api/v1/namespaces/{self._ns}/configmaps/{name}")

    async def secret(self, name: str) -> JsonDict | None:
        return await self._get(f"/api/v1/namespaces/{self._ns}/secrets/{name}")

    async def token(self, audience: str | None, expiration_seconds: int) -> str:
        meta = self._pod["metadata"]
        account = self._pod["spec"].get("serviceAccountName") or "default"
        spec: JsonDict = {
            "expirationSeconds": expiration_seconds,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
        }
        if audience:
            spec["audiences"] = [audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        try:
            response = await self._api.post(
                f"/api/v1/namespaces/{self._ns}/serviceaccounts/{account}/token", body
            )
        except ApiError as error:
            raise ConfigError(f"cannot get a token for service account {account}: {error}") from error
        return str(response["status"]["token"])
