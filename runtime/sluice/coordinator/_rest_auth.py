"""Bearer-token checks of the REST API, as aiohttp middleware in front of every handler.

A request that changes the job (any method but GET and HEAD) needs `Authorization: Bearer <token>`;
reads need it too when `protect_reads` is set. `GET /v1/health` stays open whatever the mode: it is what
liveness and readiness probes call, and it tells nothing but that the coordinator is up and its job id.
The check runs before any handler, so a refused request has no effect at all.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

OPEN_PATHS = frozenset({"/v1/health"})
_READS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class RestAuth:
    token: str
    protect_reads: bool


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the REST API reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


def auth_middleware(auth: RestAuth) -> Middleware:
    expected = auth.token.encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method in _READS and (request.path in OPEN_PATHS or not auth.protect_reads):
            return await handler(request)
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return _refuse(
                401,
                "this request needs the job's REST token: Authorization: Bearer <token>",
                {"WWW-Authenticate": 'Bearer realm="sluice"'},
            )
        # compare_digest on bytes: it refuses str with non-ASCII characters, which a header may carry.
        if not hmac.compare_digest(presented.strip().encode("utf-8", "surrogateescape"), expected):
            return _refuse(403, "the REST token is not this job's")
        return await handler(request)

    return check
