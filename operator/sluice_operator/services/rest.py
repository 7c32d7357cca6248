"""Client of the coordinator's REST API (docs/reference/rest-api.md), reached at the pod's IP."""

from __future__ import annotations

from typing import Any

import aiohttp

from sluice_operator.models import REST_PORT, UNKNOWN_STATE


class CoordinatorError(Exception):
    """The coordinator could not be reached or refused the request; the message says which."""


class Coordinator:
    """`token` is the job's REST token (from its Secret); None for a coordinator that predates them."""

    def __init__(
        self, session: aiohttp.ClientSession, host: str, port: int = REST_PORT, token: str | None = None
    ) -> None:
        self._session = session
        self._base = f"http://{host}:{port}"
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def __repr__(self) -> str:  # never the token
        return f"Coordinator({self._base})"

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = self._base + path
        try:
            async with self._session.request(method, url, json=body, headers=self._headers) as response:
                payload: Any = await response.json(content_type=None)
                if response.status >= 400:
                    message = payload.get("error") if isinstance(payload, dict) else None
                    raise CoordinatorError(f"{method} {path}: HTTP {response.status}: {message or payload}")
                return payload
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise CoordinatorError(f"{method} {url}: {error or type(error).__name__}") from None

    async def job(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/v1/job"))

    async def checkpoints(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/v1/checkpoints"))

    async def trigger_savepoint(self, stop: str | bool, target_directory: str) -> str:
        answer = await self._call(
            "POST", "/v1/savepoints", {"stop": stop, "targetDirectory": target_directory}
        )
        trigger = answer.get("triggerId") if isinstance(answer, dict) else None
        if not trigger:
            raise CoordinatorError(f"POST /v1/savepoints answered without a triggerId: {answer}")
        return str(trigger)

    async def savepoint(self, trigger_id: str) -> dict[str, Any]:
        try:
            return dict(await self._call("GET", f"/v1/savepoints/{trigger_id}"))
        except CoordinatorError as error:
            if "HTTP 404" in str(error):
                return {
                    "status": UNKNOWN_STATE,
                    "error": f"the coordinator does not know trigger {trigger_id}",
                }
            raise


def session(timeout_s: float = 5.0) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s))
