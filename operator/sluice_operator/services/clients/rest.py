"""Client of the coordinator's REST API (docs/reference/rest-api.md), reached at the pod's IP."""

from __future__ import annotations

from typing import Any, TypeVar

import aiohttp

from sluice_contract.rest import (
    CheckpointsSummary,
    DocumentError,
    JobSummary,
    SavepointProgress,
    SavepointTrigger,
    SavepointTriggered,
)
from sluice_contract.states import StopMode
from sluice_operator.models import REST_PORT, UNKNOWN_STATE

D = TypeVar("D", JobSummary, CheckpointsSummary, SavepointTriggered, SavepointProgress)


_OLDER_RUNTIME = 'HTTP 400: unknown field "requestId"'
"""How a coordinator from before `requestId` refuses it."""


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

    async def _read(self, kind: type[D], method: str, path: str, body: dict[str, Any] | None = None) -> D:
        answer = await self._call(method, path, body)
        try:
            return kind.from_json(answer)
        except DocumentError as error:
            raise CoordinatorError(f"{method} {path} answered a malformed document: {error}") from None

    async def job(self) -> JobSummary:
        return await self._read(JobSummary, "GET", "/v1/job")

    async def checkpoints(self) -> CheckpointsSummary:
        return await self._read(CheckpointsSummary, "GET", "/v1/checkpoints")

    async def trigger_savepoint(
        self, stop: StopMode | None, target_directory: str, *, request_id: str | None = None
    ) -> str:
        """The trigger id; a `request_id` the coordinator has accepted before answers that trigger."""
        body = SavepointTrigger(stop, target_directory, request_id).to_json()
        try:
            triggered = await self._read(SavepointTriggered, "POST", "/v1/savepoints", body)
        except CoordinatorError as error:
            if request_id is None or _OLDER_RUNTIME not in str(error):
                raise
            # A job on an image from before request ids refuses the field; triggered as it was then, it
            # takes its savepoint all the same, only without the idempotency.
            body = SavepointTrigger(stop, target_directory).to_json()
            triggered = await self._read(SavepointTriggered, "POST", "/v1/savepoints", body)
        if not triggered.trigger_id:
            raise CoordinatorError("POST /v1/savepoints answered an empty triggerId")
        return triggered.trigger_id

    async def savepoint(self, trigger_id: str) -> SavepointProgress:
        try:
            return await self._read(SavepointProgress, "GET", f"/v1/savepoints/{trigger_id}")
        except CoordinatorError as error:
            if "HTTP 404" in str(error):
                return SavepointProgress(
                    UNKNOWN_STATE, error=f"the coordinator does not know trigger {trigger_id}"
                )
            raise


def session(timeout_s: float = 5.0) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s))
