"""A path with (or without) a stray trailing slash is redirected with a relative ``Location``.

Starlette redirects ``/health/`` to ``/health`` (307) by default, but writes the ``Location``
as an absolute URL built from the request's ``Host`` header: a client, or a cache in front
of us, that sends ``Host: evil.example`` gets ``Location: http://evil.example/health``.
``relative_slash_redirects(router)`` turns that off and redirects instead to the path alone
(as sent, so with the ``root_path`` we are mounted under, in its other spelling, and the query), which
a client resolves against the URL it actually asked. A ``Location`` never starts with two
slashes (that would name another host); only a path that matches a route is redirected, and
anything else is the router's usual 404.
"""

from __future__ import annotations

from starlette.routing import Match, Router
from starlette.types import Receive, Scope, Send


def _other_spelling(raw: bytes) -> bytes:
    return raw.rstrip(b"/") if raw.endswith(b"/") else raw + b"/"


def redirect_target(scope: Scope, router: Router) -> str | None:
    """The relative URL of the route matching the other spelling of this path, or None."""
    path: str = scope["path"]
    if path == "/":
        return None
    other = path.rstrip("/") if path.endswith("/") else path + "/"
    other_scope = {**scope, "path": other}
    if not any(route.matches(other_scope)[0] is not Match.NONE for route in router.routes):
        return None
    # The path as sent, which (ASGI) includes the root_path a proxy mounts us under.
    raw = scope.get("raw_path") or path.encode("utf-8")
    if raw.endswith(b"/") != path.endswith("/"):
        return None  # the slash was sent encoded (%2F): part of an id, not a stray slash
    target = "/" + _other_spelling(raw).decode("latin-1").lstrip("/")
    query = scope.get("query_string", b"")
    return target + (f"?{query.decode('latin-1')}" if query else "")


def relative_slash_redirects(router: Router) -> None:
    """Replace ``router``'s slash redirect (absolute, from ``Host``) with a relative one."""
    not_found = router.default
    router.redirect_slashes = False

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        target = redirect_target(scope, router) if scope["type"] == "http" else None
        if target is None:
            await not_found(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 307,
                "headers": [
                    (b"location", target.encode("latin-1")),
                    (b"content-length", b"0"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    router.default = default
