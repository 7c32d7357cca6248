"""The coordinator's REST API (docs/reference/rest-api.md, docs/reference/openapi.yaml).

Who may call what is decided in front of the handlers (`_rest_auth`); what a body may hold is checked by
`_rest_input`. A handler only turns a checked request into a call on the job master.

The same server answers GET /metrics (Prometheus text format, `_prometheus`), which is a read like
GET /v1/job and needs the token when reads do (--rest-auth all): it names the job's operators, as the
job document does, and Prometheus sends a bearer token from a file or a Secret. The dashboard's static
files (`/` and `/dashboard/...`, `sluice.coordinator.dashboard`) are open in every mode: they hold no
job data, and a browser cannot add a header when it opens a page; the page itself sends the token with
every call it makes.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from sluice import _tokens
from sluice._states import CheckpointStatus
from sluice.coordinator import dashboard
from sluice.coordinator._prometheus import CONTENT_TYPE, PrometheusExporter
from sluice.coordinator._rest_auth import RestAuth, auth_middleware
from sluice.coordinator._rest_guard import ConnectionGuard
from sluice.coordinator._rest_hosts import AllowedHosts, host_middleware
from sluice.coordinator._rest_input import (
    BadRequest,
    SavepointTargets,
    cancel_request,
    json_object,
    savepoint_request,
)
from sluice.coordinator.jobmaster import JobMaster
from sluice.coordinator.metrics import MetricsHistory
from sluice.coordinator.savepoints import Refusal, SavepointRefused
from sluice.coordinator.views import job_view
from sluice_contract.rest import SavepointProgress, SavepointTrigger, SavepointTriggered

_trigger_ids = itertools.count(1)
SAMPLE_S = 0.5
"""How often the job's latest heartbeats are taken into the rate window (as often as they come)."""


class RestApi:
    def __init__(
        self, job: JobMaster, auth: RestAuth, targets: SavepointTargets, allowed_hosts: Iterable[str] = ()
    ) -> None:
        self.job = job
        self._auth = auth
        self.targets = targets
        self.savepoints: dict[str, SavepointEntry] = {}
        self._requests: dict[str, tuple[str, SavepointTrigger]] = {}
        """Request id -> the trigger it started and the request as first sent (see `post_savepoint`)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.history = MetricsHistory()
        self._prometheus = PrometheusExporter(job, self.history)
        self._sampler: asyncio.Task[None] | None = None
        self.hosts = AllowedHosts(allowed_hosts)
        self.guard = ConnectionGuard()
        self.app = web.Application(
            middlewares=[
                self.guard.middleware(),
                host_middleware(self.hosts),
                _bad_requests,
                _static_open(auth_middleware(auth)),
            ]
        )
        self.app.add_routes(
            [
                *dashboard.routes(),
                web.get("/metrics", self.metrics),
                web.get("/v1/health", self.health),
                web.get("/v1/job", self.get_job),
                web.get("/v1/checkpoints", self.get_checkpoints),
                web.post("/v1/savepoints", self.post_savepoint),
                web.get("/v1/savepoints/{trigger_id}", self.get_savepoint),
                web.post("/v1/job/cancel", self.cancel),
            ]
        )
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self, host: str, port: int) -> str:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        # Not web.TCPSite: every connection goes through the guard (`_rest_guard`) first.
        self._server = await asyncio.get_running_loop().create_server(
            self.guard.wrapping(server), host or None, port, reuse_address=True
        )
        self.hosts.allow_bound(host)
        bound = self._server.sockets[0].getsockname()[1]
        self.url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{bound}"
        self._sampler = asyncio.create_task(self._sample())
        return self.url

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _sample(self) -> None:
        # Rates need two samples of a subtask: taking them as heartbeats come, not only when someone
        # asks, lets the first GET /v1/job or scrape show rates already.
        while True:
            self.history.ingest(self.job.metrics)
            await asyncio.sleep(SAMPLE_S)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self._prometheus.render(), headers={"Content-Type": CONTENT_TYPE})

    async def health(self, request: web.Request) -> web.Response:
        # The job id lets the job's own user's CLI pick the stored token (sluice._tokens); it is not a
        # secret: it grants nothing. The proof lets that CLI tell this coordinator from a fake one.
        answer: dict[str, Any] = {"ok": True, "jobId": self.job.config.job_id}
        challenge = request.headers.get(_tokens.CHALLENGE_HEADER)
        if challenge is not None:
            nonce = _tokens.parse_challenge(challenge)
            if nonce is None:
                return _error(
                    400, f"{_tokens.CHALLENGE_HEADER} must be {_tokens.CHALLENGE_BYTES} bytes in hex"
                )
            here = _tokens.endpoint(
                request.transport.get_extra_info("sockname") if request.transport else None
            )
            answer["tokenProof"] = _tokens.token_proof(self._auth.token, nonce, here)
        return web.json_response(answer)

    async def get_job(self, request: web.Request) -> web.Response:
        self.history.ingest(self.job.metrics)
        return web.json_response(job_view(self.job, self.history).to_json())

    async def get_checkpoints(self, request: web.Request) -> web.Response:
        return web.json_response(self.job.checkpoints.as_json())

    async def post_savepoint(self, request: web.Request) -> web.Response:
        wanted = savepoint_request(await json_object(request), self.targets)
        if wanted.request_id is not None and wanted.request_id in self._requests:
            # A caller that lost our answer (its record of the trigger failed to write) asks again: the
            # same trigger, whatever the job is doing now, so that nothing is taken twice. Looked up
            # before the job's state is: the stop it asked for may have ended the job meanwhile.
            return self._repeated(wanted)
        try:
            self.job.savepoints.check(wanted.target_directory)
        except SavepointRefused as refused:
            return _error(400 if refused.refusal is Refusal.NO_DIRECTORY else 409, str(refused))
        running = [t for t, e in self.savepoints.items() if e.in_progress]
        if running:
            return _error(409, f"savepoint {running[0]} is still in progress; one at a time")
        trigger_id = str(next(_trigger_ids))
        entry = SavepointEntry(SavepointProgress(CheckpointStatus.IN_PROGRESS, stop=wanted.stop))
        self.savepoints[trigger_id] = entry
        if wanted.request_id is not None:
            self._requests[wanted.request_id] = (trigger_id, wanted)
        task = asyncio.create_task(self._run_savepoint(entry, wanted))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response(SavepointTriggered(trigger_id).to_json(), status=202)

    def _repeated(self, wanted: SavepointTrigger) -> web.Response:
        assert wanted.request_id is not None
        trigger_id, first = self._requests[wanted.request_id]
        if first != wanted:
            return _error(
                409,
                f"requestId {wanted.request_id!r} was sent before with another request (stop: "
                f"{first.stop or 'false'}, targetDirectory: {first.target_directory or 'the default'}); a "
                "request id names one request: choose a new one for another",
            )
        return web.json_response(SavepointTriggered(trigger_id).to_json(), status=202)

    async def _run_savepoint(self, entry: SavepointEntry, wanted: SavepointTrigger) -> None:
        savepoints, stop, target = self.job.savepoints, wanted.stop, wanted.target_directory
        try:
            taken = await (
                savepoints.take(target)
                if stop is None
                else savepoints.stop(stop, target, request_id=wanted.request_id)
            )
        except Exception as err:
            entry.end(CheckpointStatus.FAILED, error=f"{type(err).__name__}: {err}")
            return
        entry.end(CheckpointStatus.COMPLETED, path=taken.path, checkpoint_id=taken.checkpoint_id)

    def unfetched_results(self) -> bool:
        """Whether a finished savepoint's result has not been read yet (see `linger`)."""
        return any(not e.in_progress and not e.fetched for e in self.savepoints.values())

    async def linger(self, limit_s: float) -> None:
        """After the job ended: keep answering until the stop's caller has read its savepoint path."""
        deadline = asyncio.get_running_loop().time() + limit_s
        while self.unfetched_results() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)

    async def get_savepoint(self, request: web.Request) -> web.Response:
        entry = self.savepoints.get(request.match_info["trigger_id"])
        if entry is None:
            return _error(404, f"no savepoint trigger {request.match_info['trigger_id']!r}")
        if not entry.in_progress:
            entry.fetched = True
        return web.json_response(entry.progress.to_json())

    async def cancel(self, request: web.Request) -> web.Response:
        cancel_request(await json_object(request))
        self.job.cancel()
        return web.json_response({"ok": True}, status=202)


@dataclass
class SavepointEntry:
    """A savepoint requested over REST: what GET /v1/savepoints/{triggerId} shows of it, and whether
    its end has been shown."""

    progress: SavepointProgress
    fetched: bool = True
    """False from its end until a GET has shown that end (see `RestApi.linger`)."""

    @property
    def in_progress(self) -> bool:
        return self.progress.status == CheckpointStatus.IN_PROGRESS

    def end(
        self,
        status: CheckpointStatus,
        *,
        path: str | None = None,
        checkpoint_id: int | None = None,
        error: str | None = None,
    ) -> None:
        self.progress = replace(
            self.progress, status=status, path=path, checkpoint_id=checkpoint_id, error=error
        )
        self.fetched = False


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _static_open(auth: Middleware) -> Middleware:
    """`auth`, except for reading the dashboard's static files (see the module's docstring)."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method in ("GET", "HEAD") and dashboard.is_static(request.path):
            return await handler(request)
        return await auth(request, handler)

    return check


@web.middleware
async def _bad_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as err:
        return _error(400, str(err))
    except web.HTTPException as err:
        # aiohttp's own answers (no such route, method not allowed) in the API's error format.
        if err.status < 400:
            raise
        answer = _error(err.status, err.reason)
        if "Allow" in err.headers:
            answer.headers["Allow"] = err.headers["Allow"]
        return answer
