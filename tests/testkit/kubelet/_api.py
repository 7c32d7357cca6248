"""A small JSON client for the Kubernetes API, as much as the process kubelet needs.

Plain dicts over aiohttp: the kubelet patches status subresources and follows watches, where a
generated typed client gets in the way (and importing kubernetes_asyncio alone takes seconds).
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import yaml

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


def _read_kubeconfig(path: Path) -> tuple[str, ssl.SSLContext, dict[str, str]]:
    """Server, TLS context and auth headers of the current context: certificates, keys and tokens,
    as files or inline data. Exec and auth-provider plugins are not supported."""
    config = yaml.safe_load(path.read_text())
    base = path.parent
    current = _named(path, config, "contexts", config["current-context"])
    cluster = _named(path, config, "clusters", current["cluster"])
    user = _named(path, config, "users", current["user"])
    if "exec" in user or "auth-provider" in user:
        raise ValueError(f"kubeconfig {path}: credential plugins are not supported by the process kubelet")
    headers = {"Accept": "application/json"}
    token = user.get("token") or (user.get("tokenFile") and (base / user["tokenFile"]).read_text().strip())
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return str(cluster["server"]), _tls_context(base, cluster, user), headers


def _named(path: Path, config: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """The entry called `name` of a kubeconfig list (`contexts`, `clusters`, `users`)."""
    for item in config.get(kind) or []:
        if item["name"] == name:
            return dict(item[kind[:-1]])
    raise ValueError(f"kubeconfig {path}: no {kind[:-1]} named {name!r}")


def _pem(base: Path, entry: dict[str, Any], data_key: str, file_key: str) -> bytes | None:
    """Inline base64 data or, relative to the kubeconfig's directory, a file."""
    if data_key in entry:
        return base64.b64decode(entry[data_key])
    if file_key in entry:
        return Path(base, entry[file_key]).read_bytes()
    return None


def _tls_context(base: Path, cluster: dict[str, Any], user: dict[str, Any]) -> ssl.SSLContext:
    ca = _pem(base, cluster, "certificate-authority-data", "certificate-authority")
    context = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = _pem(base, user, "client-certificate-data", "client-certificate")
    key = _pem(base, user, "client-key-data", "client-key")
    if cert and key:
        # load_cert_chain reads files only; the copies live just long enough to be read.
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "tls.crt").write_bytes(cert)
            (Path(tmp) / "tls.key").write_bytes(key)
            context.load_cert_chain(Path(tmp) / "tls.crt", Path(tmp) / "tls.key")
    return context


class KubeApi:
    def __init__(self, session: aiohttp.ClientSession, server: str, headers: Mapping[str, str]) -> None:
        self._session = session
        self.server = server.rstrip("/")
        self._headers = dict(headers)

    @classmethod
    async def from_kubeconfig(cls, path: str) -> KubeApi:
        server, context, headers = _read_kubeconfig(Path(path))
        # No total timeout: watches stay open for minutes; each request below sets its own.
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
        return cls(session, server, headers)

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
