"""A small JSON client for the Kubernetes API, as much as the process kubelet needs.

The kubeconfig is read by kubernetes_asyncio (it knows every credential form a kubeconfig can hold);
the requests themselves go through aiohttp with plain dicts, because the kubelet patches status
subresources and follows watches, where the generated typed client gets in the way.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import Configuration

JsonDict = dict[str, Any]
_MAX_EVENT_BYTES = 64 * 1024 * 1024


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        try:
            message = json.loads(body).get("message", body)
        except ValueError:
            message = body
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status


class KubeApi:
    def __init__(self, session: aiohttp.ClientSession, server: str, headers: Mapping[str, str]) -> None:
        self._session = session
        self.server = server.rstrip("/")
        self._headers = dict(headers)

    @classmethod
    async def from_kubeconfig(cls, path: str) -> KubeApi:
        cfg = Configuration()
        await kube_config.load_kube_config(config_file=path, client_configuration=cfg)
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file)
        headers = {"Accept": "application/json"}
        if "BearerToken" in cfg.api_key:
            headers["Authorization"] = await cfg.get_api_key_with_prefix("BearerToken")
        # No total timeout: watches stay open for minutes; each request below sets its own.
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
        return cls(session, str(cfg.host), headers)

    async def close(self) -> None:
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> JsonDict:
        headers = dict(self._headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        async with self._session.request(
            method,
            self.server + path,
            data=data,
            params=params,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=30),
        ) as response:
            text = await response.text()
            if response.status >= 400:
                raise ApiError(method, path, response.status, text)
            return json.loads(text) if text else {}

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> JsonDict:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any) -> JsonDict:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, body: Any) -> JsonDict:
        return await self.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    async def delete(self, path: str, body: Any = None) -> JsonDict:
        return await self.request("DELETE", path, body=body)

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[JsonDict]:
        """Yield watch events after `resource_version` until the server closes the stream."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        async with self._session.get(
            self.server + path,
            params=params,
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30),
        ) as response:
            if response.status >= 400:
                raise ApiError("WATCH", path, response.status, await response.text())
            while True:
                # One event per line; objects with large annotations can exceed aiohttp's line limit.
                line = await response.content.readuntil(b"\n", max_size=_MAX_EVENT_BYTES)
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
