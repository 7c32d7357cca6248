"""Reading and checking REST request bodies: whatever arrives is refused with 400 and a message, or is
turned into a request the job master can act on. Nothing here touches the job.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from aiohttp import web

from sluice._fs import normalize
from sluice_contract.codec import DocumentError
from sluice_contract.rest import SavepointTrigger

MAX_BODY_BYTES = 64 * 1024
BODY_TIMEOUT_S = 10.0
"""How long a request body may take to arrive: a slow sender must not hold its connection open."""
_SAVEPOINT_FIELDS = ("stop", "targetDirectory", "requestId")
# Control characters have no business in a directory name; `::` chains fsspec file systems, so a target
# "allowed-prefix/x::other://..." would write somewhere else than its prefix says.
_UNSAFE_URI = re.compile(r"[\x00-\x1f\x7f]|::")


class BadRequest(Exception):
    """The request cannot be carried out as sent; the message says why (answered with 400)."""


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


async def json_object(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object; an empty body is `{}`."""
    limit = MAX_BODY_BYTES
    if request.content_length is not None and request.content_length > limit:
        raise BadRequest(f"the body is {request.content_length} bytes; at most {limit} are accepted")
    body = bytearray()
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            # Read in pieces so that a body without Content-Length (chunked) is cut off at the limit too.
            async for chunk in request.content.iter_chunked(16 * 1024):
                body += chunk
                if len(body) > limit:
                    raise BadRequest(f"the body is longer than {limit} bytes")
    except TimeoutError:
        raise BadRequest(f"the body did not arrive within {BODY_TIMEOUT_S:g}s") from None
    if not body.strip():
        return {}
    try:
        value = json.loads(bytes(body))
    except (ValueError, RecursionError) as err:  # RecursionError: deeply nested arrays fit in 64 KiB
        raise BadRequest(f"the body is not JSON: {str(err)[:200]}") from None
    if not isinstance(value, dict):
        raise BadRequest(f"the body must be a JSON object, not {type(value).__name__}")
    return value


def _split(uri: str) -> tuple[str, str]:
    """A URI's scheme and path; a local path resolved (symlinks followed), so that a symlink under an
    allowed directory cannot lead out of it."""
    scheme, _, rest = normalize(uri).partition("://")
    scheme = scheme.lower()
    if scheme == "file" and rest:
        return scheme, os.path.realpath(rest)
    return scheme, posixpath.normpath(rest) if rest else ""


class SavepointTargets:
    """The directories a savepoint request may name: those under one of `prefixes`."""

    def __init__(self, prefixes: Iterable[str | None]) -> None:
        self._prefixes = sorted({_split(p) for p in prefixes if p})

    @property
    def prefixes(self) -> list[str]:
        return [f"{scheme}://{path}" for scheme, path in self._prefixes]

    def check(self, target: str) -> str:
        """`target` in the form it was checked in (normalized, no `..`, a local one resolved); BadRequest
        outside the prefixes."""
        if _UNSAFE_URI.search(target):
            raise BadRequest(f"targetDirectory {_shown(target)} has control characters or '::'")
        scheme, path = _split(target)
        if path not in ("", ".", "/"):
            for allowed_scheme, allowed in self._prefixes:
                if scheme == allowed_scheme and (
                    path == allowed or path.startswith(allowed.rstrip("/") + "/")
                ):
                    return f"{scheme}://{path}"
        raise BadRequest(
            f"targetDirectory {_shown(target)} is not under an allowed savepoint location "
            f"({', '.join(self.prefixes) or 'none'}; `sluice run --savepoint-dir-allow URI` adds one)"
        )


def savepoint_request(body: dict[str, Any], targets: SavepointTargets) -> SavepointTrigger:
    """The body of POST /v1/savepoints, read by the contract's document, its target checked: `targets`
    decides which directories it may name (`target_directory` is then in the form it was checked in)."""
    unknown = sorted(set(body) - set(_SAVEPOINT_FIELDS))
    if unknown:
        # Said before the codec would: the operator reads this wording to tell a coordinator from before
        # request ids (services/clients/rest.py), and it lists what a request may have.
        raise BadRequest(
            f"unknown field {_shown(unknown[0])}: a savepoint request has only "
            f"{', '.join(_SAVEPOINT_FIELDS[:-1])} and {_SAVEPOINT_FIELDS[-1]}"
        )
    try:
        sent = SavepointTrigger.from_json(body, "savepoint request")
    except DocumentError as err:
        raise BadRequest(str(err)) from None
    if sent.target_directory is None:
        return sent
    return replace(sent, target_directory=targets.check(sent.target_directory))


def cancel_request(body: dict[str, Any]) -> None:
    if body:
        raise BadRequest(f"a cancel request has no fields; got {_shown(sorted(body)[0])}")
