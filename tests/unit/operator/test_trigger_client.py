"""The operator's savepoint trigger: the request id goes with it, and a coordinator from before request
ids (a job still on an older image) is triggered as it was then rather than refused for good."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from sluice.coordinator._rest_input import SavepointTargets, savepoint_request
from sluice_contract.states import StopMode
from sluice_operator.services.clients.rest import Coordinator, CoordinatorError

TARGET = "file:///sp/jobs/counts"
Answer = Callable[[dict[str, Any]], web.Response]


async def _trigger(answer: Answer, request_id: str | None) -> tuple[str, list[dict[str, Any]]]:
    bodies: list[dict[str, Any]] = []

    async def savepoints(request: web.Request) -> web.Response:
        body = await request.json()
        bodies.append(body)
        return answer(body)

    app = web.Application()
    app.router.add_post("/v1/savepoints", savepoints)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        async with aiohttp.ClientSession() as http:
            client = Coordinator(http, "127.0.0.1", runner.addresses[0][1], token="t")
            return await client.trigger_savepoint(StopMode.SUSPEND, TARGET, request_id=request_id), bodies
    finally:
        await runner.cleanup()


def _today(body: dict[str, Any]) -> web.Response:
    # What the coordinator reads, read with its own reader.
    savepoint_request(body, SavepointTargets([TARGET]))
    return web.json_response({"triggerId": "7"}, status=202)


def _older(body: dict[str, Any]) -> web.Response:
    if "requestId" in body:  # the answer of a coordinator from before request ids, word for word
        error = 'unknown field "requestId": a savepoint request has only stop and targetDirectory'
        return web.json_response({"error": error}, status=400)
    return web.json_response({"triggerId": "3"}, status=202)


def test_the_request_id_goes_with_the_trigger() -> None:
    trigger, bodies = asyncio.run(_trigger(_today, "uid.0"))
    assert trigger == "7"
    assert bodies == [{"stop": "suspend", "targetDirectory": TARGET, "requestId": "uid.0"}]


def test_a_coordinator_from_before_request_ids_is_triggered_without_one() -> None:
    trigger, bodies = asyncio.run(_trigger(_older, "uid.0"))
    assert trigger == "3"
    assert [b.get("requestId") for b in bodies] == ["uid.0", None]


def test_any_other_refusal_is_not_sent_again() -> None:
    def busy(body: dict[str, Any]) -> web.Response:
        return web.json_response({"error": "savepoint 2 is still in progress; one at a time"}, status=409)

    with pytest.raises(CoordinatorError, match="HTTP 409"):
        asyncio.run(_trigger(busy, "uid.0"))
