"""Which request methods the service recognises, and which a path allows (plain functions).

Contract:

- ``recognised(method)``: the methods of RFC 9110 section 9 and PATCH (RFC 5789). A request
  with any other method is 501 Not Implemented (section 9.1: an origin server SHOULD answer
  so a method it does not recognise), not 405, which says the method is known but not allowed
  on the target.
- ``allowed(routes, scope)``: every method some route allows for the request's path, sorted,
  HEAD with GET. A 405 must list them in ``Allow`` (section 10.2.1, 15.5.6); a path served
  by two routes (``GET /ask`` and ``POST /ask``) allows the union, not the first route's.
- ``SERVER_WIDE``: what ``OPTIONS *`` (section 9.3.7, RFC 9112 section 3.2.4) is told the
  server supports at all.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

RECOGNISED = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})
SERVER_WIDE = ("GET", "HEAD", "POST")


def recognised(method: str) -> bool:
    """Whether ``method`` is one this server knows (RFC 9110 section 9, RFC 5789)."""
    return method in RECOGNISED


def allowed(routes: Iterable[BaseRoute], scope: Scope) -> list[str]:
    """The methods the routes matching ``scope``'s path allow, sorted (empty: none matches)."""
    methods: set[str] = set()
    for route in routes:
        if not isinstance(route, Route) or route.methods is None:
            continue
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= route.methods
    return sorted(methods)
