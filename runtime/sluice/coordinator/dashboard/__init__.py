"""The dashboard: four static files shipped in this package, served at `/` by the coordinator.

The page is plain HTML, CSS and JavaScript with no build step and no third-party code; it reads
GET /v1/job and GET /v1/checkpoints and posts savepoints and stops like the CLI does.

Only the files named in `FILES` are served, read once from the package: a request names a file by a
fixed key, never by a path, so nothing outside this list can be reached. Every answer carries a strict
Content-Security-Policy (scripts, styles and connections from this origin only, no inline code, no
framing) and `nosniff`, so even a value the page shows can never run as code.

The REST token never appears in a URL the server sees: a user opens `/#token=...` (the fragment stays
in the browser) or types it into the page, which keeps it in the tab's sessionStorage and sends it as
`Authorization: Bearer`.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

PREFIX = "/dashboard/"
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def is_static(path: str) -> bool:
    return path == "/" or (path.startswith(PREFIX) and path[len(PREFIX) :] in FILES)


def _load() -> dict[str, bytes]:
    package = resources.files(__name__)
    return {name: package.joinpath(name).read_bytes() for name in FILES}


def routes() -> list[web.RouteDef]:
    files = _load()

    def answer(name: str) -> web.Response:
        return web.Response(body=files[name], headers={**_HEADERS, "Content-Type": FILES[name]})

    async def index(request: web.Request) -> web.Response:
        return answer("index.html")

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in FILES:
            raise web.HTTPNotFound(reason=f"no dashboard file {name!r}")
        return answer(name)

    return [web.get("/", index), web.get(PREFIX + "{name}", asset)]
