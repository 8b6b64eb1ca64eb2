"""One route reached without the router: what the rate limiter admits for it goes straight to its endpoint.

``DirectRoute(app, route)`` is pure ASGI middleware, installed just inside the limiter. An
``http`` request that ``route`` fully matches (its path and one of its methods, by the route's own
``matches``, so nothing is matched that the router would not match to it) is handed to the
route's ASGI endpoint with the scope the router would have given it (``route``, ``endpoint``,
``path_params``). Everything else, a path the route matches with another method included, goes
on to ``app`` unchanged: the router, the 405s and 404s, the slash redirect.

Why: the one route that serves a kept answer per request (``GET /answer/{id}`` and its 304) is
the service's busiest. Through Starlette's exception middleware and router it also paid for a
scan of the routes before it and for per-request wrappers whose only purpose is an exception
handler that endpoint never needs. So the route's endpoint must be a pure ASGI callable (no
``request_response`` wrapping) that raises nothing but the errors the server's guard turns
into a 500, as it would behind the router.
"""

from __future__ import annotations

from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send


class DirectRoute:
    """Pure ASGI; install just inside the rate limiter. See the module docstring."""

    def __init__(self, app: ASGIApp, route: Route) -> None:
        if route.app is not route.endpoint:
            raise ValueError(f"route {route.path} has a request/response endpoint; a direct route needs an ASGI one")
        self.app = app
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            match, child_scope = self.route.matches(scope)
            if match is Match.FULL:
                scope["route"] = self.route  # as the router records it (what the observer labels)
                scope.update(child_scope)
                await self.route.endpoint(scope, receive, send)
                return
        await self.app(scope, receive, send)
