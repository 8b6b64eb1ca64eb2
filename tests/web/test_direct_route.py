"""``DirectRoute``: a request its route fully matches reaches the route's ASGI endpoint with the
scope the router would give it; anything else (another method, another path) is the router's.
Then the served app: ``/answer/{id}`` taken that way is still labelled by its route, and its own
503 is never counted as a refusal of the limiter."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from rag_contract.observability.settings import Settings
from rag_contract.web.direct_route import DirectRoute
from tests.observability.apps import observed_app


class Endpoint:
    """An ASGI endpoint that answers with what the router would have told it."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        await PlainTextResponse(f"item {scope['path_params']['item']}")(scope, receive, send)


async def other(request):
    return PlainTextResponse("other")


def direct_app(endpoint: Endpoint) -> tuple[Starlette, Route]:
    route = Route("/items/{item}", endpoint, methods=["GET"])
    app = Starlette(routes=[Route("/other", other), route], middleware=[Middleware(DirectRoute, route=route)])
    return app, route


def test_a_full_match_reaches_the_endpoint_with_the_scope_the_router_gives():
    endpoint = Endpoint()
    app, route = direct_app(endpoint)
    client = TestClient(app)
    assert client.get("/items/a%20b").text == "item a b"  # decoded, as the router decodes it
    assert client.head("/items/x").status_code == 200  # GET routes answer HEAD, as behind the router
    assert [s["route"] for s in endpoint.scopes] == [route, route]
    assert endpoint.scopes[0]["endpoint"] is endpoint and endpoint.scopes[0]["path_params"] == {"item": "a b"}
    assert "router" not in endpoint.scopes[0]  # the router never saw it


def test_anything_else_is_the_routers():
    endpoint = Endpoint()
    app, _ = direct_app(endpoint)
    client = TestClient(app, follow_redirects=False)
    assert client.post("/items/x").status_code == 405  # the path matches, the method does not
    assert client.get("/items/x/").status_code == 307  # the router's slash redirect
    assert client.get("/other").text == "other"
    assert client.get("/items").status_code == 404
    assert endpoint.scopes == []


def test_a_request_response_endpoint_is_refused():
    with pytest.raises(ValueError, match="needs an ASGI one"):
        DirectRoute(Starlette(), Route("/other", other))


def test_the_answer_route_is_labelled_and_its_503_is_no_limiter_refusal(project, embedder):
    o = observed_app(project, None, embedder, Settings(metrics_port=9, access_log=True))
    with TestClient(o.app) as client:
        assert client.get("/answer/q11").status_code == 503  # no index: no_context
        assert client.post("/answer/q11").status_code == 405
    assert o.metric("rag_contract_requests_total", route="/answer/{qid}", status="503", state="no_context") == 1
    assert o.metric("rag_contract_requests_total", route="/answer/{qid}", status="405", state="none") == 1
    assert o.metric("rag_contract_refused_total", reason="limiter_unavailable") == 0
