"""The `Host` check of the REST API: a request must name this coordinator, as an address or a known name.

A web page an operator opens can send requests to `http://127.0.0.1:8081` only under its own origin,
and a browser keeps the page from reading the answers. DNS rebinding gets around that: the page's own
host name is made to resolve to 127.0.0.1, so the browser sends it the coordinator's answers, with the
page's name in `Host`. Refusing names the coordinator was not told about closes that door.

An IP address in `Host` is always accepted: a page served from a name cannot make a browser send an
address as its `Host`, and probes (the kubelet's) address a pod by its IP. Names accepted are the
loopback names, the name the REST API was bound to, and those given with `sluice run
--rest-allowed-host` (the operator passes the coordinator's Service names); `*` turns the check off.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
ANY_HOST = "*"


def _name(host_header: str) -> str | None:
    """The host part of a `Host` value, lower-case and without a port or brackets; None if malformed."""
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        return value[1:end]
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    if not name or any(c.isspace() or c in "/@?#\\" for c in name):
        return None
    return name.rstrip(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class AllowedHosts:
    """The names a `Host` header may carry (addresses are always allowed)."""

    def __init__(self, names: Iterable[str]) -> None:
        given = {n.strip().lower().rstrip(".") for n in names if n.strip()}
        self.any = ANY_HOST in given
        self.names = frozenset(given - {ANY_HOST}) | LOOPBACK_NAMES

    def allow_bound(self, host: str) -> None:
        """Adds `host`, the name the REST API was bound to (when it is a name, not an address)."""
        if host and not _is_address(host):
            self.names |= {host.lower().rstrip(".")}

    def refusal(self, host_header: str | None) -> tuple[int, str] | None:
        """None when the request may go on; else the status (400, 421) and why it may not."""
        if host_header is None or self.any:
            return None  # HTTP/1.0 without Host: no browser sends that
        name = _name(host_header)
        if name is None:
            return 400, f"the Host header {host_header[:100]!r} is not a host name or address"
        if _is_address(name) or name in self.names:
            return None
        return 421, (
            f"this coordinator does not serve the host name {name[:100]!r}; call it by an address or a "
            "known name, or allow the name with `sluice run --rest-allowed-host NAME`"
        )


def host_middleware(allowed: AllowedHosts) -> Middleware:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        refused = allowed.refusal(request.headers.get("Host"))
        if refused is not None:
            status, message = refused
            return web.json_response({"error": message}, status=status)
        return await handler(request)

    return check
